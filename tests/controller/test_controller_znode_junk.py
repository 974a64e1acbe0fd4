"""Data in ZooKeeper that no Kafka tool wrote: a reassignment or preferred-election request that is
not JSON or not in its format, an ISR change notification likewise, a broker registration, a topic
assignment or a partition state that cannot be read. Each is reported naming its path; an admin
request or notification is deleted (so the path takes the next request); the controller neither fails
nor changes hands over it; topics are still created, led, reassigned and re-elected."""
from __future__ import annotations

import logging

import pytest
from _controller_cluster import Cluster
from blocking_client import CodecConnection
from external import wait_for
from logged_errors import LoggedTracebacks

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.kafka_server import CLUSTER_ID_PATH
from kafka_edu.server.producer_id_manager import PRODUCER_ID_BLOCK_PATH
from kafka_edu.server.zk.zk_utils import (CONFIG_TYPE_TOPIC, CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, DELETE_TOPICS_PATH,
                                          ENTITY_CONFIG_CHANGE_PREFIX, ENTITY_CONFIG_CHANGES_PATH,
                                          ISR_CHANGE_NOTIFICATION_PATH, PREFERRED_REPLICA_ELECTION_PATH,
                                          REASSIGN_PARTITIONS_PATH, ZnodeDataError, delete_topic_path,
                                          entity_config_path, topic_partition_leader_and_isr_path)

JUNK = [b"{", b"[]", b"\xff\xfe", b'{"version":1,"partitions":"x"}', b'{"version":1,"partitions":[{"topic":5}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":-1}]}']


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path, size=3)
    failures = LoggedTracebacks(logging.ERROR)
    logging.getLogger("kafka_edu").addHandler(failures)
    cluster.failures = failures
    yield cluster
    logging.getLogger("kafka_edu").removeHandler(failures)
    cluster.shutdown()


def led(cluster, topic: str, partitions: int) -> bool:
    return all(cluster.zk_utils.get_leader_and_isr(topic, p) is not None for p in range(partitions))


def still_works(cluster, controller_id: int, topic: str) -> None:
    zk = cluster.zk_utils
    zk.create_topic_assignment(topic, {0: [0, 1], 1: [1, 2]})
    wait_for(lambda: led(cluster, topic, 2), timeout=20, what=f"{topic} led")
    assert zk.get_controller_id() == controller_id, "the controller changed hands"
    assert cluster.failures.messages == []


def test_unreadable_admin_requests_are_deleted_and_the_next_one_is_carried_out(cluster):
    zk = cluster.zk_utils
    cluster.controller()
    controller_id = zk.get_controller_id()
    zk.create_topic_assignment("t", {0: [1, 2]})
    wait_for(lambda: led(cluster, "t", 1), what="t led")
    for path in (REASSIGN_PARTITIONS_PATH, PREFERRED_REPLICA_ELECTION_PATH):
        for junk in JUNK:
            zk.zk.create(path, junk, makepath=True)
            wait_for(lambda path=path: zk.zk.exists(path) is None, what=f"{path} holding {junk!r} deleted")
    zk.update_partition_reassignment_data({("t", 0): [0, 2]})
    wait_for(lambda: zk.get_partition_assignment_for_topics(["t"])["t"][0] == [0, 2]
             and zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, timeout=20, what="a readable reassignment done")
    for junk in JUNK:
        zk.zk.create(f"{ISR_CHANGE_NOTIFICATION_PATH}/isr_change_", junk, sequential=True, makepath=True)
    wait_for(lambda: zk.zk.get_children(ISR_CHANGE_NOTIFICATION_PATH) == [], what="the notifications consumed")
    still_works(cluster, controller_id, "after")


def test_an_unreadable_registration_assignment_or_state_is_no_reason_to_fail(cluster):
    zk = cluster.zk_utils
    cluster.controller()
    controller_id = zk.get_controller_id()
    zk.create_topic_assignment("t", {0: [1, 2], 1: [2, 0]})
    wait_for(lambda: led(cluster, "t", 2), what="t led")
    for i, junk in enumerate(JUNK):
        zk.zk.create(f"/brokers/ids/{50 + i}", junk, ephemeral=True)
        zk.zk.create(f"/brokers/topics/junk{i}", junk)
    zk.zk.set(topic_partition_leader_and_isr_path("t", 1), JUNK[0])
    still_works(cluster, controller_id, "after")
    assert sorted(b.id for b in zk.get_all_brokers_in_cluster()) == [0, 1, 2]
    assert zk.get_leader_and_isr("t", 1) is None                    # read as no state, and logged
    # a new controller reads it all on failover, and takes over rather than resigning in a loop
    cluster.stop(controller_id)
    wait_for(lambda: zk.get_controller_id() not in (None, controller_id), timeout=20, what="a new controller")
    successor = zk.get_controller_id()
    zk.create_topic_assignment("later", {0: [b for b in range(3) if b != controller_id]})
    wait_for(lambda: led(cluster, "later", 1), timeout=20, what="later led")
    assert zk.get_controller_id() == successor and cluster.failures.messages == []


def test_junk_config_changes_and_deletion_requests_hold_nothing_back(cluster):
    """A config notification that is not sequential or not readable, a topic's overrides that are not
    JSON or not valid configs, and a deletion request for a topic that does not exist: each is
    reported (a topic keeps the config it had), and the next readable change is applied on every
    broker, a restarted one included."""
    zk = cluster.zk_utils
    cluster.controller()
    controller_id = zk.get_controller_id()
    zk.create_topic_assignment("t", {0: [0, 1, 2]})
    zk.create_topic_assignment("u", {0: [0, 1, 2]})
    wait_for(lambda: led(cluster, "t", 1) and led(cluster, "u", 1), what="t and u led")
    zk.zk.create(f"{ENTITY_CONFIG_CHANGES_PATH}/{ENTITY_CONFIG_CHANGE_PREFIX}", b"{}")       # not sequential
    for junk in JUNK + [b'{"version":1,"entity_type":"topics","entity_name":""}']:
        zk.zk.create(f"{ENTITY_CONFIG_CHANGES_PATH}/{ENTITY_CONFIG_CHANGE_PREFIX}", junk, sequential=True)
    for overrides in (b'{"version":1,"config":{"retention.ms":"soon"}}', b'{"version":1,"config":[]}', b"[1]", b"{"):
        zk.zk.set(entity_config_path(CONFIG_TYPE_TOPIC, "t"), overrides) if zk.zk.exists(
            entity_config_path(CONFIG_TYPE_TOPIC, "t")) else zk.zk.create(entity_config_path(CONFIG_TYPE_TOPIC, "t"),
                                                                           overrides, makepath=True)
        zk.zk.create(f"{ENTITY_CONFIG_CHANGES_PATH}/{ENTITY_CONFIG_CHANGE_PREFIX}",
                     b'{"version":1,"entity_type":"topics","entity_name":"t"}', sequential=True)
    for name in ("nosuch", "bad name", JUNK[2].decode("latin-1")):
        zk.zk.create(delete_topic_path(name), b"", makepath=True)
    zk.change_entity_config(CONFIG_TYPE_TOPIC, "u", {"retention.ms": "3600000"})

    def retention(broker_id: int, topic: str) -> int | None:
        partition = cluster.servers[broker_id].replica_manager.get_partition((topic, 0))
        replica = None if partition is None else partition.local_replica
        return None if replica is None or replica.log is None else replica.log.config.retention_ms
    wait_for(lambda: all(retention(b, "u") == 3_600_000 for b in cluster.servers), what="u's override applied")
    assert all(retention(b, "t") == 7 * 24 * 3_600_000 for b in cluster.servers)       # t keeps its config
    wait_for(lambda: zk.zk.get_children(DELETE_TOPICS_PATH) == [], what="the deletion requests dropped")
    restarted = next(b for b in cluster.servers if b != controller_id)
    cluster.stop(restarted)
    cluster.start(restarted)
    wait_for(lambda: retention(restarted, "u") == 3_600_000 and retention(restarted, "t") is not None,
             timeout=20, what="the restarted broker hosting t and u")
    assert retention(restarted, "t") == 7 * 24 * 3_600_000
    still_works(cluster, controller_id, "after")


def test_an_unreadable_controller_epoch_is_followed_by_a_higher_one(cluster):
    """Every broker's takeover failed on it in turn (no controller at all); the next controller now
    goes on from the newest epoch its broker accepted, so the brokers still take its requests."""
    zk = cluster.zk_utils
    old = cluster.controller()
    epoch = old.controller.context.epoch
    zk.zk.set(CONTROLLER_EPOCH_PATH, b"{")
    cluster.stop(old.broker_id)
    successor = wait_for(lambda: next((s for s in cluster.servers.values() if s.controller.is_active), None),
                         timeout=20, what="a new controller")
    assert zk.zk.get(CONTROLLER_EPOCH_PATH)[0] == str(epoch + 1).encode()
    assert successor.controller.context.epoch == epoch + 1
    topic = "after"
    zk.create_topic_assignment(topic, {0: sorted(cluster.servers)})
    wait_for(lambda: all(s.replica_manager.get_partition((topic, 0)) is not None
                         and s.replica_manager.get_partition((topic, 0)).leader_epoch >= 0 for s in cluster.servers.values())
             and led(cluster, topic, 1), timeout=20, what="the brokers taking the new controller's LeaderAndIsr")
    assert zk.get_controller_id() == successor.broker_id and cluster.failures.messages == []


def test_an_unreadable_producer_id_block_or_cluster_id_is_named_not_guessed(cluster):
    """Guessing past either could hand out an id another broker holds, or let a broker join the wrong
    cluster: InitProducerId answers the retriable COORDINATOR_NOT_AVAILABLE until the block is repaired,
    and a broker refuses to start, naming the znode."""
    zk = cluster.zk_utils
    zk.zk.create(PRODUCER_ID_BLOCK_PATH, b'{"version":1,"block_end":"many"}', makepath=True)
    port = cluster.servers[0].bound_port()
    with CodecConnection(port) as client:
        answer = client.call(ApiKeys.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 1000})
        assert (Errors.for_code(answer.error_code), answer.producer_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        zk.zk.delete(PRODUCER_ID_BLOCK_PATH)
        answer = client.call(ApiKeys.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 1000})
        assert answer.error_code == 0 and answer.producer_id >= 0
    assert cluster.failures.messages == []
    zk.zk.set(CLUSTER_ID_PATH, b"{")
    with pytest.raises(ZnodeDataError, match=CLUSTER_ID_PATH):
        cluster.start(3)


def test_a_controller_znode_naming_no_broker_holds_the_election_and_nothing_else(cluster):
    """Junk written into the live controller's /controller changes nothing; a persistent /controller
    of junk, made by hand while no broker runs, lets a broker start without taking over, until it goes."""
    zk = cluster.zk_utils
    controller = cluster.controller()
    zk.zk.set(CONTROLLER_PATH, b"junk")
    zk.create_topic_assignment("held", {0: [0, 1, 2]})
    wait_for(lambda: led(cluster, "held", 1), timeout=20, what="held led by the same controller")
    assert controller.controller.is_active and zk.zk.exists(CONTROLLER_PATH).ephemeral_owner != 0
    for broker_id in list(cluster.servers):
        cluster.stop(broker_id)
    zk.zk.create(CONTROLLER_PATH, b"junk")                    # persistent, with no broker to race
    cluster.start(0)                                           # starts, and does not take over
    assert not cluster.servers[0].controller.is_active
    zk.zk.delete(CONTROLLER_PATH)
    wait_for(lambda: cluster.servers[0].controller.is_active, timeout=20, what="an election once the junk is gone")
    for broker_id in (1, 2):
        cluster.start(broker_id)
    still_works(cluster, 0, "after")
