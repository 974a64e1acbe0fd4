"""`kafka-edu configs` and the broker's DynamicConfigManager.

The manager runs against a real LogManager on the embedded ZooKeeper: overrides present at startup,
notifications applied to live logs and to logs created later, old and malformed notifications,
purging. The command runs as the installed console script against a real ZooKeeper (under a
chroot), checking 0.10's lines and the znodes it writes, and against a broker process for the
--bootstrap-server describe (Beyond 0.10)."""
from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.dynamic_config_manager import topic_config_manager
from kafka_edu.server.log.errors import ConfigError
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils, create_zk_client

# --- DynamicConfigManager -----------------------------------------------------------------------


@pytest.fixture
def broker_side(tmp_path):
    log_manager = LogManager([str(tmp_path / "logs")], LogConfig())
    zk_utils = ZkUtils(EmbeddedZooKeeper().connect("test"))
    zk_utils.setup_common_paths()
    clock = MockTime(start_ms=10**12)
    yield log_manager, zk_utils, clock
    log_manager.shutdown()
    zk_utils.zk.close()


def test_overrides_reach_live_logs_and_later_ones(broker_side):
    log_manager, zk_utils, clock = broker_side
    orders0, other = log_manager.create_log("orders", 0), log_manager.create_log("other", 0)
    zk_utils.change_entity_config("topics", "orders", {"retention.ms": "1000"})
    manager = topic_config_manager(zk_utils, log_manager, clock)
    manager.startup()
    assert orders0.config.retention_ms == 1000                  # applied at startup
    zk_utils.change_entity_config("topics", "orders", {"segment.bytes": "4096"})
    zk_utils.zk.await_events()
    assert (orders0.config.segment_bytes, orders0.config.retention_ms) == (4096, LogConfig().retention_ms)
    assert log_manager.create_log("orders", 1).config.segment_bytes == 4096
    assert other.config == LogConfig()
    assert manager.listener.last_executed_change == 1
    manager.shutdown()
    zk_utils.change_entity_config("topics", "orders", {"segment.bytes": "8192"})
    zk_utils.zk.await_events()
    assert orders0.config.segment_bytes == 4096                 # no longer watching


def test_throttled_replica_lists_are_topic_configs_beside_the_others(broker_side):
    """Beyond 0.10 (KIP-73): the lists `reassign-partitions --throttle` writes are topic-level configs,
    so a topic's other overrides stay in force beside them; a malformed list is refused by name."""
    log_manager, zk_utils, clock = broker_side
    orders0 = log_manager.create_log("orders", 0)
    zk_utils.change_entity_config("topics", "orders", {
        "retention.ms": "1000", "leader.replication.throttled.replicas": "0:1, 0:2",
        "follower.replication.throttled.replicas": "*"})
    manager = topic_config_manager(zk_utils, log_manager, clock)
    manager.startup()
    assert orders0.config.retention_ms == 1000
    assert (orders0.config.leader_replication_throttled_replicas,
            orders0.config.follower_replication_throttled_replicas) == ("0:1, 0:2", "*")
    manager.shutdown()
    assert LogConfig().leader_replication_throttled_replicas == ""
    with pytest.raises(ConfigError, match="leader.replication.throttled.replicas"):
        LogConfig.from_props({"leader.replication.throttled.replicas": "0-1"})


def test_old_malformed_and_foreign_notifications(broker_side):
    log_manager, zk_utils, clock = broker_side
    orders = log_manager.create_log("orders", 0)
    manager = topic_config_manager(zk_utils, log_manager, clock)
    manager.startup()
    zk_utils.zk.create("/config/changes/config_change_", b"not json", sequential=True)
    zk_utils.change_entity_config("clients", "app", {"producer_byte_rate": "1024"})
    zk_utils.change_entity_config("topics", "orders", {"retention.ms": "oops"})     # a bad override: defaults
    zk_utils.change_entity_config("topics", "orders", {"retention.ms": "5000"})
    zk_utils.zk.await_events()
    assert orders.config.retention_ms == 5000 and manager.listener.last_executed_change == 3
    orders.config = LogConfig()
    manager.listener.process_notifications(zk_utils.zk.get_children("/config/changes"))       # all seen already
    assert orders.config == LogConfig()


def test_expired_notifications_are_purged(broker_side):
    log_manager, zk_utils, clock = broker_side
    zk_utils.change_entity_config("topics", "orders", {"retention.ms": "5000"})
    manager = topic_config_manager(zk_utils, log_manager, clock)
    manager.startup()
    assert zk_utils.zk.get_children("/config/changes") == ["config_change_0000000000"]
    created = zk_utils.zk.get("/config/changes/config_change_0000000000")[1].ctime
    clock.set_milliseconds(created + 15 * 60 * 1000 + 1)     # the first is just too old ...
    time.sleep(0.05)                                            # ... the next (real ctime) is 50 ms younger
    zk_utils.change_entity_config("topics", "orders", {"retention.ms": "6000"})
    zk_utils.zk.await_events()
    assert zk_utils.zk.get_children("/config/changes") == ["config_change_0000000001"]


# --- the command against a real ZooKeeper -----------------------------------------------------------

def configs(*argv) -> tuple[int, str, str]:
    done = subprocess.run([str(KAFKA_EDU), "configs", *argv], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def chroot(zookeeper):
    chroot = f"/cfg-{uuid.uuid4().hex[:8]}"
    zk_utils = ZkUtils(create_zk_client({"zookeeper.connect": zookeeper.connect + chroot}))
    zk_utils.setup_common_paths()
    zk_utils.create_topic_assignment("orders", {0: [0]})
    yield zk_utils, zookeeper.connect + chroot
    zk_utils.zk.close()


def test_alter_and_describe_write_0_10s_znodes(chroot):
    zk_utils, connect = chroot
    assert configs("--zookeeper", connect, "--entity-type", "topics", "--entity-name", "orders", "--describe") == \
        (0, "Configs for topics:orders are \n", "")
    assert configs("--zookeeper", connect, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                   "--add-config", "retention.ms=3600000,cleanup.policy=compact") == \
        (0, 'Updated config for topic: "orders".\n', "")
    assert json.loads(zk_utils.zk.get("/config/topics/orders")[0]) == \
        {"version": 1, "config": {"retention.ms": "3600000", "cleanup.policy": "compact"}}
    (change,) = zk_utils.zk.get_children("/config/changes")
    assert change.startswith("config_change_") and len(change) == len("config_change_") + 10
    assert json.loads(zk_utils.zk.get(f"/config/changes/{change}")[0]) == \
        {"version": 1, "entity_type": "topics", "entity_name": "orders"}
    assert configs("--zookeeper", connect, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                   "--delete-config", "cleanup.policy")[0] == 0
    assert configs("--zookeeper", connect, "--entity-type", "topics", "--describe") == \
        (0, "Configs for topics:orders are retention.ms=3600000\n", "")
    assert configs("--zookeeper", connect, "--entity-type", "clients", "--entity-name", "app", "--alter",
                   "--add-config", "producer_byte_rate=1024") == (0, 'Updated config for clientId: "app".\n', "")
    assert len(zk_utils.zk.get_children("/config/changes")) == 3


@pytest.mark.parametrize("argv, message", [
    (["--entity-name", "nosuch", "--alter", "--add-config", "retention.ms=1"], 'Topic "nosuch" does not exist.'),
    (["--entity-name", "orders", "--alter", "--add-config", "retention.ms=soon"], "retention.ms"),
    (["--entity-name", "orders", "--alter", "--add-config", "colour=blue"], "not a topic-level log config"),
    (["--entity-name", "orders", "--alter", "--delete-config", "flush.ms"], "Invalid config(s): flush.ms"),
])
def test_refused_changes_are_one_line_and_status_1(chroot, argv, message):
    zk_utils, connect = chroot
    status, out, err = configs("--zookeeper", connect, "--entity-type", "topics", *argv)
    assert status == 1 and out == ""
    assert err.startswith("Error while executing config command : ") and message in err
    assert len(err.splitlines()) == 1
    assert zk_utils.zk.get_children("/config/changes") == []


@pytest.mark.parametrize("action", [["--describe"], ["--alter", "--add-config", "retention.ms=1"]])
def test_a_damaged_entry_is_one_line_and_status_1(chroot, action):
    zk_utils, connect = chroot
    zk_utils.zk.create("/config/topics/orders", b"{", makepath=True)
    status, out, err = configs("--zookeeper", connect, "--entity-type", "topics", "--entity-name", "orders", *action)
    assert (status, out) == (1, "") and len(err.splitlines()) == 1 and "/config/topics/orders: cannot read" in err, err


def test_broker_configs_are_the_replication_throttle_rates(chroot):
    """Beyond 0.10 (0.10.1): `--entity-type brokers` takes the two throttle rates, in bytes per second."""
    zk_utils, connect = chroot
    alter = ("--zookeeper", connect, "--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config")
    assert configs(*alter, "leader.replication.throttled.rate=1000") == (0, 'Updated config for broker: "0".\n', "")
    for change, message in (("colour=blue", "Unknown Dynamic Configuration 'colour'."),
                            ("follower.replication.throttled.rate=fast", "Invalid value fast for configuration")):
        status, out, err = configs(*alter, change)
        assert status == 1 and out == "" and message in err and len(err.splitlines()) == 1, err
    assert zk_utils.fetch_entity_config("brokers", "0") == {"leader.replication.throttled.rate": "1000"}


@pytest.mark.parametrize("argv, message", [
    (["--zookeeper", "h:1", "--entity-type", "topics"], "one of the arguments --describe --alter is required"),
    (["--zookeeper", "h:1", "--entity-type", "groups", "--describe"], "invalid choice"),
    (["--zookeeper", "h:1", "--entity-type", "topics", "--alter", "--add-config", "x=1"], "--alter needs --entity-name"),
    (["--zookeeper", "h:1", "--entity-type", "topics", "--entity-name", "t", "--alter"], "--add-config or"),
    (["--zookeeper", "h:1", "--entity-type", "topics", "--describe", "--add-config", "x=1"], "go with --alter"),
    (["--zookeeper", "h:1", "--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "x"],
     "--add-config expects"),
    (["--bootstrap-server", "h:1", "--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "x=1"],
     "only --entity-type topics can be described or altered"),
    (["--zookeeper", "h:1", "--command-config", "c.properties", "--entity-type", "topics", "--describe"],
     "--command-config goes with --bootstrap-server"),
    (["--entity-type", "topics", "--describe"], "one of the arguments --zookeeper --bootstrap-server is required"),
])
def test_usage_errors(argv, message):
    status, out, err = configs(*argv)
    assert status == 2 and message in err and len(err.splitlines()) == 1, err


def test_unreachable_zookeeper():
    status, out, err = configs("--zookeeper", "127.0.0.1:1", "--entity-type", "topics", "--describe",
                               "--timeout", "1000")
    assert status == 1 and err.startswith("Error while executing config command : ") and len(err.splitlines()) == 1


def test_describe_and_alter_over_the_wire(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    wire = ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics"]
    try:
        with ClusterAdmin(broker.bootstrap) as admin:
            assert admin.create_topics([NewTopic("events", 1, 1, configs={"retention.ms": "60000"}),
                                        NewTopic("plain", 1, 1)]) == {"events": None, "plain": None}
        status, out, err = configs(*wire, "--describe")
        assert (status, err) == (0, "")
        assert out == "Configs for topics:events are retention.ms=60000\nConfigs for topics:plain are \n"
        # AlterConfigs replaces the whole set: the tool merges, so retention.ms survives an unrelated add
        assert configs(*wire, "--entity-name", "events", "--alter", "--add-config",
                       "cleanup.policy=compact,segment.ms=600000") == (0, 'Updated config for topic: "events".\n', "")
        assert configs(*wire, "--entity-name", "events", "--alter", "--delete-config", "segment.ms")[0] == 0
        assert configs(*wire, "--entity-name", "events", "--describe")[1] == \
            "Configs for topics:events are cleanup.policy=compact,retention.ms=60000\n"
        status, out, err = configs(*wire, "--entity-name", "events", "--alter", "--delete-config", "flush.ms")
        assert status == 1 and err.startswith("Error while executing config command : Invalid config(s): flush.ms")
        status, out, err = configs(*wire, "--entity-name", "events", "--alter", "--add-config", "retention.ms=soon")
        assert status == 1 and len(err.splitlines()) == 1, err
    finally:
        assert broker.stop() == 0


def test_wire_alter_keeps_the_throttled_replica_lists(zookeeper, tmp_path):
    """The tool merges into what DescribeConfigs reports; the broker reports every topic-level key, so the
    throttle lists `reassign-partitions --throttle` writes survive an unrelated alter over the wire."""
    connect = f"{zookeeper.connect}/wire-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path, zookeeper_connect=connect).start()
    zk_utils = ZkUtils(create_zk_client({"zookeeper.connect": connect}))
    wire = ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "wt"]
    throttled = {"leader.replication.throttled.replicas": "0:0", "retention.ms": "100000"}
    try:
        with ClusterAdmin(broker.bootstrap) as admin:
            assert admin.create_topics([NewTopic("wt", 1, 1)]) == {"wt": None}
        assert configs("--zookeeper", connect, "--entity-type", "topics", "--entity-name", "wt", "--alter",
                       "--add-config", ",".join(f"{k}={v}" for k, v in throttled.items()))[0] == 0
        assert configs(*wire, "--describe")[1] == \
            "Configs for topics:wt are leader.replication.throttled.replicas=0:0,retention.ms=100000\n"
        assert configs(*wire, "--alter", "--add-config", "segment.ms=600000")[0] == 0
        assert zk_utils.fetch_entity_config("topics", "wt") == {**throttled, "segment.ms": "600000"}
    finally:
        zk_utils.zk.close()
        assert broker.stop() == 0


BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


def test_alter_reaches_a_running_broker_without_restart(zookeeper, tmp_path):
    """Every broker runs a DynamicConfigManager: `configs --alter` changes its live log's max.message.bytes."""
    from kafka_edu.clients.producer.kafka_producer import KafkaProducer
    from kafka_edu.common.protocol.errors import Errors, KafkaError

    connect = f"{zookeeper.connect}/live-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path, zookeeper_connect=connect).start()
    producer = KafkaProducer({"bootstrap.servers": broker.bootstrap, "retries": 0, "max.block.ms": 10_000,
                              "key.serializer": BYTES, "value.serializer": BYTES})
    try:
        with ClusterAdmin(broker.bootstrap) as admin:
            assert admin.create_topics([NewTopic("live", 1, 1)]) == {"live": None}
        assert producer.send("live", b"x" * 2000, partition=0).get(10).offset == 0
        assert configs("--zookeeper", connect, "--alter", "--entity-type", "topics", "--entity-name", "live",
                       "--add-config", "max.message.bytes=1000")[0] == 0
        deadline = time.monotonic() + 15
        while True:
            try:
                producer.send("live", b"x" * 2000, partition=0).get(10)
            except KafkaError as e:
                assert e.error is Errors.MESSAGE_TOO_LARGE
                break
            assert time.monotonic() < deadline, "the broker never applied max.message.bytes=1000"
            time.sleep(0.2)
        assert producer.send("live", b"small", partition=0).get(10).offset > 0
    finally:
        producer.close()
        assert broker.stop() == 0
