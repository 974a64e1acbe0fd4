"""A /config/changes notification that cannot be applied (its entity name is no ZooKeeper path) is
skipped with a log line, as a malformed one is: the changes after it still apply, and the broker's
next start-up, which replays the notifications, still succeeds."""
from __future__ import annotations

from _broker_client import BrokerClient, start_broker
from external import wait_for

from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import CONFIG_TYPE_TOPIC, ENTITY_CONFIG_CHANGE_PREFIX, ENTITY_CONFIG_CHANGES_PATH


def notify(zookeeper, entity_name: str) -> None:
    zookeeper.connect().create(f"{ENTITY_CONFIG_CHANGES_PATH}/{ENTITY_CONFIG_CHANGE_PREFIX}",
                               f'{{"version":1,"entity_type":"topics","entity_name":"{entity_name}"}}'.encode(),
                               sequential=True)


def test_an_unusable_notification_holds_back_neither_later_changes_nor_the_next_start(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper)
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("t")
        notify(zookeeper, "a//b")
        server.zk_utils.change_entity_config(CONFIG_TYPE_TOPIC, "t", {"retention.ms": "1234"})
        wait_for(lambda: server.log_manager.get_log("t", 0).config.retention_ms == 1234, what="the later change")
    finally:
        server.shutdown()
    notify(zookeeper, "")
    start_broker(tmp_path, zookeeper).shutdown()
