"""Acceptance test T24: the group coordinator follows the leadership of `__consumer_offsets`
(4.7 on top of 4.5 and 4.6), on an InProcessCluster through sockets."""
from __future__ import annotations

import threading

import pytest
from _acceptance import create_topic, produce, state
from _broker_client import BrokerClient
from external import require

from kafka_edu.clients.admin import ClusterAdmin
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME, partition_for

OFFSETS_PARTITIONS = 3
COMMITTED = {TopicPartition("t24", 0): 42, TopicPartition("t24", 1): 7}


def offset_fetch(cluster, broker_id: int, group: str) -> tuple[Errors, dict]:
    """OffsetFetch v3 (group-level error) for every committed partition of `group` at one broker."""
    with BrokerClient(cluster.ports[broker_id]) as client:
        response = client.call(ApiKeys.OFFSET_FETCH, 3, {"group_id": group, "topics": None})
    return Errors.for_code(response.error_code), {
        TopicPartition(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


def find_coordinator(cluster, broker_id: int, group: str) -> tuple[Errors, int]:
    with BrokerClient(cluster.ports[broker_id]) as client:
        response = client.call(ApiKeys.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
    return Errors.for_code(response.error_code), response.node_id


def committed_group(make_cluster, controller_coordinates: bool):
    """A cluster with a group whose coordinator is (or is not) the controller, and which has
    COMMITTED there; returns (cluster, group, coordinator id, offsets partition)."""
    cluster = make_cluster(3, **{"offsets.topic.num.partitions": OFFSETS_PARTITIONS,
                                 "auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "t24", {0: [0, 1, 2], 1: [1, 2, 0]})
    controller = cluster.controller().broker_id
    with ClusterAdmin(cluster.bootstrap_servers) as admin:
        admin.find_coordinator("warm-up")                     # creates __consumer_offsets
        cluster.wait_until(lambda: all(len(state(cluster, GROUP_METADATA_TOPIC_NAME, p)[2]) == 3
                                       for p in range(OFFSETS_PARTITIONS)), what="the offsets topic's full ISRs")
        group = next(g for g in (f"g{i}" for i in range(100))
                     if (state(cluster, GROUP_METADATA_TOPIC_NAME, partition_for(g, OFFSETS_PARTITIONS))[0]
                         == controller) == controller_coordinates)
        partition = partition_for(group, OFFSETS_PARTITIONS)
        coordinator = admin.find_coordinator(group).id
        assert coordinator == state(cluster, GROUP_METADATA_TOPIC_NAME, partition)[0]
        admin.commit_group_offsets(group, COMMITTED)
    return cluster, group, coordinator, partition


@pytest.mark.parametrize("controller_coordinates,hold_load", [(False, False), (True, False), (False, True)],
                         ids=["coordinator", "coordinator-and-controller", "load-held"])
def test_T24_coordinator_failover_after_the_coordinator_dies(make_cluster, controller_coordinates, hold_load):
    """Killed right after acknowledging the commit: the new leader's high watermark may still be
    below the commit (its followers learn the old leader's HW one fetch later), yet it serves it.
    With `hold_load` the successor's coordinator scheduler is kept busy, so its load of the partition
    waits and OffsetFetch answers GROUP_LOAD_IN_PROGRESS (COORDINATOR_LOAD_IN_PROGRESS) meanwhile."""
    cluster, group, old, partition = committed_group(make_cluster, controller_coordinates)
    leader, epoch, isr = state(cluster, GROUP_METADATA_TOPIC_NAME, partition)
    successor = next(r for r in isr if r != old)           # the first live ISR member (4.6.4)
    loading, release = threading.Event(), threading.Event()
    if hold_load:
        cluster.broker(successor).group_coordinator_scheduler.schedule(
            "hold", lambda: loading.set() or release.wait(10))
        assert loading.wait(5)
    try:
        cluster.kill(old)
        new, new_epoch, _ = cluster.wait_until(
            lambda: (s := state(cluster, GROUP_METADATA_TOPIC_NAME, partition))[0] not in (old, -1) and s,
            what="a new leader of the offsets partition")
        assert new == successor and new_epoch == epoch + 1
        for broker_id in cluster.live_brokers:
            assert cluster.wait_until(lambda b=broker_id: find_coordinator(cluster, b, group) == (Errors.NONE, new),
                                      what=f"broker {broker_id} naming {new}")
        if hold_load:
            cluster.wait_until(lambda: offset_fetch(cluster, new, group)[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS,
                               what="GROUP_LOAD_IN_PROGRESS while the load waits")
    finally:
        release.set()
    cluster.wait_until(lambda: offset_fetch(cluster, new, group) == (Errors.NONE, COMMITTED),
                       what="the new coordinator serving the committed offsets")
    cluster.restart(old)                                            # back, as a follower of the partition
    cluster.wait_until(lambda: old in state(cluster, GROUP_METADATA_TOPIC_NAME, partition)[2],
                       what="the old coordinator in the ISR")
    assert offset_fetch(cluster, old, group)[0] is Errors.NOT_COORDINATOR
    assert find_coordinator(cluster, old, group) == (Errors.NONE, new)


def test_T24_a_coordinator_losing_leadership_unloads_its_groups(make_cluster):
    """A coordinator that stays alive but stops leading (controlled shutdown moves the leadership)
    gives its groups up: NOT_COORDINATOR there, the offsets at the new leader."""
    cluster, group, old, partition = committed_group(make_cluster, False)
    assert offset_fetch(cluster, old, group) == (Errors.NONE, COMMITTED)
    assert cluster.broker(old).controlled_shutdown() is True
    new = state(cluster, GROUP_METADATA_TOPIC_NAME, partition)[0]
    assert new != old
    cluster.wait_until(lambda: offset_fetch(cluster, old, group)[0] is Errors.NOT_COORDINATOR,
                       what="the old coordinator giving the group up")
    assert cluster.broker(old).group_coordinator.group_manager.has_offsets(group) is False
    cluster.wait_until(lambda: offset_fetch(cluster, new, group) == (Errors.NONE, COMMITTED),
                       what="the new coordinator serving the group's offsets")


def test_T24_a_real_client_resumes_at_its_commits_after_the_coordinator_dies(make_cluster):
    """librdkafka (confluent-kafka) joins group g, reads half, commits and leaves; the coordinator is
    killed; a new member of g starts exactly where the commits say, at the new coordinator."""
    try:
        from confluent_kafka import Consumer
    except ImportError:
        require(False, "confluent-kafka is not installed (pip install -e '.[dev]')")
    cluster, group, old, partition = committed_group(make_cluster, False)
    values = {p: [f"{p}-{i}" for i in range(60)] for p in (0, 1)}
    for p, vs in values.items():
        produce(cluster, "t24", vs, partition=p)

    def member():
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                             "topic.metadata.refresh.interval.ms": 500, "fetch.wait.max.ms": 100})
        consumer.subscribe(["t24"])
        return consumer

    def read(consumer, count: int) -> list[str]:
        seen: list[str] = []

        def more() -> bool:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append(message.value().decode())
            return len(seen) >= count
        cluster.wait_until(more, what=f"{count} records for group {group}")
        return seen

    first = member()
    # COMMITTED holds offsets 42 and 7: the group starts there, not at the beginning
    remaining = values[0][42:] + values[1][7:]
    head = read(first, 30)
    first.commit(asynchronous=False)
    first.close()
    cluster.kill(old)
    second = member()
    try:
        tail = read(second, len(remaining) - len(head))
    finally:
        second.close()
    assert sorted(head + tail) == sorted(remaining)
