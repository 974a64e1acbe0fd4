"""Range and RoundRobin assignors against the examples in Kafka's documentation, plus invariants."""
from __future__ import annotations

import random

import pytest

from kafka_edu.clients.consumer.assignors import RangeAssignor, RoundRobinAssignor, assignors_for
from kafka_edu.common.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kafka_edu.common.protocol.consumer_protocol import ConsumerProtocol, Subscription


def names(result):
    return {m: [f"{tp.topic}p{tp.partition}" for tp in ps] for m, ps in result.items()}


def test_range_documented_example():
    result = RangeAssignor().assign_partitions({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert names(result) == {"C0": ["t0p0", "t0p1", "t1p0", "t1p1"], "C1": ["t0p2", "t1p2"]}


def test_roundrobin_documented_example():
    result = RoundRobinAssignor().assign_partitions({"t0": 3, "t1": 3}, {"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    assert names(result) == {"C0": ["t0p0", "t0p2", "t1p1"], "C1": ["t0p1", "t1p0", "t1p2"]}


def test_roundrobin_documented_unequal_subscriptions():
    subscriptions = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    result = RoundRobinAssignor().assign_partitions({"t0": 1, "t1": 2, "t2": 3}, subscriptions)
    assert names(result) == {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}


def test_range_more_consumers_than_partitions_and_member_order():
    result = RangeAssignor().assign_partitions({"t": 2}, {"b": ["t"], "c": ["t"], "a": ["t"]})
    assert names(result) == {"b": ["tp1"], "c": [], "a": ["tp0"]}


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()])
def test_every_partition_once_to_a_subscriber(assignor):
    rng = random.Random(7)
    for _ in range(50):
        topics = {f"t{i}": rng.randint(1, 7) for i in range(rng.randint(1, 4))}
        members = {f"m{j}": rng.sample(sorted(topics), rng.randint(1, len(topics))) for j in range(rng.randint(1, 5))}
        result = assignor.assign_partitions(topics, members)
        assert set(result) == set(members)
        owned = [tp for ps in result.values() for tp in ps]
        wanted = {TopicPartition(t, p) for t, n in topics.items() if any(t in s for s in members.values())
                  for p in range(n)}
        assert sorted(owned) == sorted(wanted)
        for member, ps in result.items():
            assert all(tp.topic in members[member] for tp in ps)
        assert assignor.assign_partitions(topics, dict(reversed(list(members.items())))) == result


def test_roundrobin_balanced_for_equal_subscriptions():
    result = RoundRobinAssignor().assign_partitions({"a": 5, "b": 4}, {f"m{i}": ["a", "b"] for i in range(4)})
    sizes = sorted(len(ps) for ps in result.values())
    assert sizes[-1] - sizes[0] <= 1


def test_assign_with_cluster_skips_unknown_topics():
    node = Node(0, "h", 1)
    cluster = Cluster([node], [PartitionInfo("t", p, node) for p in range(2)])
    subs = {m: ConsumerProtocol.deserialize_subscription(ConsumerProtocol.serialize_subscription(
        Subscription(["t", "missing"]))) for m in ("x", "y")}
    result = RangeAssignor().assign(cluster, subs)
    assert {m: a.partitions for m, a in result.items()} == {"x": [TopicPartition("t", 0)], "y": [TopicPartition("t", 1)]}


def test_assignors_for_names():
    assert [a.name for a in assignors_for(["range", "RoundRobin"])] == ["range", "roundrobin"]
    assert assignors_for([RoundRobinAssignor])[0].name == "roundrobin"
    with pytest.raises(ValueError):
        assignors_for(["sticky"])
    with pytest.raises(ValueError):
        assignors_for([])
