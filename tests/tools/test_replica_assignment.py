"""AdminUtils' replica placement (kafka_edu.server.admin_utils): the book's figures 5-1 and 5-2 and
its addPartitions example exactly, the properties every placement has, racks and their modes."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.admin_utils import (AdminOperationError, BrokerMetadata, RackAwareMode, assign_added_partitions,
                                          assign_replicas_to_brokers, broker_metadatas, rack_alternated_broker_list)
from kafka_edu.server.zk.zk_utils import BrokerInfo

RACKS = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack2", 4: "rack3"}


def racked(racks=RACKS):
    return [BrokerMetadata(b, r) for b, r in racks.items()]


def test_rack_unaware_figure_5_1():
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, 2, next_replica_shift=1) == {
        0: [2, 4, 0], 1: [3, 0, 1], 2: [4, 1, 2], 3: [0, 2, 3], 4: [1, 3, 4],
        5: [2, 0, 1], 6: [3, 1, 2], 7: [4, 2, 3], 8: [0, 3, 4], 9: [1, 4, 0]}


def test_a_fixed_start_is_also_the_shift_as_in_0_10():
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 3, 2, 2) == assign_replicas_to_brokers(
        [0, 1, 2, 3, 4], 3, 2, 2, next_replica_shift=2)


@pytest.mark.parametrize("n", range(1, 11))
def test_no_duplicates_and_leaders_balanced_for_every_start_and_shift(n):
    for rf in range(1, n + 1):
        for start in range(n):
            for shift in range(n):
                placed = assign_replicas_to_brokers(list(range(n)), 3 * n + 1, rf, start, next_replica_shift=shift)
                assert list(placed) == list(range(3 * n + 1))
                assert all(len(r) == rf and len(set(r)) == rf for r in placed.values())
                leaders = Counter(r[0] for r in placed.values())
                assert max(leaders.values()) - min(leaders[b] for b in range(n)) <= 1


def test_six_partitions_rf3_on_four_brokers_whatever_the_draw():
    for seed in range(50):
        placed = assign_replicas_to_brokers([0, 1, 2, 3], 6, 3, rand=random.Random(seed))
        assert set(Counter(r[0] for r in placed.values()).values()) <= {1, 2}
        assert set(Counter(b for r in placed.values() for b in r).values()) <= {4, 5}


def test_random_draws_come_from_the_given_generator():
    a = assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, rand=random.Random(11))
    assert a == assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, rand=random.Random(11))
    draws = random.Random(11)
    start, shift = draws.randrange(5), draws.randrange(5)
    assert a == assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, start, next_replica_shift=shift)


def test_rack_alternated_list():
    assert rack_alternated_broker_list(RACKS) == [0, 2, 4, 1, 3]
    assert rack_alternated_broker_list({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}) == [
        0, 3, 1, 5, 4, 2]


def test_rack_aware_figure_5_2():
    placed = assign_replicas_to_brokers(racked(), 10, 3, 2, next_replica_shift=1)
    assert placed == {0: [4, 2, 1], 1: [1, 4, 3], 2: [3, 1, 4], 3: [0, 3, 4], 4: [2, 0, 4],
                      5: [4, 0, 2], 6: [1, 2, 4], 7: [3, 4, 1], 8: [0, 3, 4], 9: [2, 0, 4]}
    assert all(len({RACKS[b] for b in r}) == 3 for r in placed.values())


def test_rack_aware_kafka_doc_example_shifts_after_a_round():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(racked(racks), 7, 3, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


def test_rack_aware_spreads_over_racks_for_every_draw():
    racks = {b: f"r{b % 3}" for b in range(9)}
    for seed in range(30):
        for rf in (2, 3, 4):
            placed = assign_replicas_to_brokers(racked(racks), 12, rf, rand=random.Random(seed))
            for replicas in placed.values():
                assert len(set(replicas)) == rf and len({racks[b] for b in replicas}) == min(rf, 3)


def test_add_partitions_example():
    existing = {0: [2, 0], 1: [3, 1], 2: [4, 2]}
    assert assign_added_partitions([0, 1, 2, 3, 4], existing, 6) == {3: [0, 3], 4: [1, 4], 5: [2, 1]}
    with pytest.raises(AdminOperationError, match="The number of partitions for a topic can only be increased"):
        assign_added_partitions([0, 1, 2, 3, 4], existing, 3)


def test_add_partitions_start_is_the_first_broker_at_or_after_the_preferred_replica():
    # broker 2 is gone: the round continues at broker 3, index 2 of [0, 1, 3, 4]
    assert assign_added_partitions([0, 1, 3, 4], {0: [2, 0]}, 3) == assign_replicas_to_brokers(
        [0, 1, 3, 4], 2, 2, 2, 1)


@pytest.mark.parametrize("args, error, message", [
    (([0, 1], 0, 1), Errors.INVALID_PARTITIONS, "number of partitions must be larger than 0"),
    (([0, 1], 1, 0), Errors.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0"),
    (([0, 1, 2], 1, 4), Errors.INVALID_REPLICATION_FACTOR, "replication factor: 4 larger than available brokers: 3"),
    (([BrokerMetadata(0, "r"), BrokerMetadata(1)], 1, 1), Errors.INVALID_REPLICA_ASSIGNMENT,
     "Not all brokers have rack information for replica rack aware assignment"),
])
def test_refusals_use_0_10s_messages(args, error, message):
    with pytest.raises(AdminOperationError) as refused:
        assign_replicas_to_brokers(*args)
    assert (refused.value.error, refused.value.message) == (error, message)


def test_rack_aware_modes_over_registrations():
    registered = [BrokerInfo(2, "h", 1, ("PLAINTEXT://h:1",), rack="b"), BrokerInfo(0, "h", 1, ("PLAINTEXT://h:1",),
                                                                                     rack="a"),
                  BrokerInfo(1, "h", 1, ("PLAINTEXT://h:1",))]
    with pytest.raises(AdminOperationError, match=r"^Not all brokers have rack information\. Add --disable-rack-aware"):
        broker_metadatas(registered)
    with pytest.raises(AdminOperationError, match="Add --disable-rack-aware"):
        assign_replicas_to_brokers(registered, 3, 2, rack_aware_mode=RackAwareMode.ENFORCED)
    unracked = [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert broker_metadatas(registered, RackAwareMode.SAFE) == unracked
    assert broker_metadatas(registered, RackAwareMode.DISABLED) == unracked
    assert broker_metadatas(registered, broker_list=[2, 0]) == [BrokerMetadata(0, "a"), BrokerMetadata(2, "b")]
    assert broker_metadatas(registered[:2], RackAwareMode.SAFE) == [BrokerMetadata(0, "a"), BrokerMetadata(2, "b")]
    assert assign_replicas_to_brokers(registered, 3, 2, 0, rack_aware_mode=RackAwareMode.DISABLED) == \
        assign_replicas_to_brokers([0, 1, 2], 3, 2, 0)
