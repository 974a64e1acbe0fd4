"""Lock order between a group's lock and the delayed produce that stores the group (Kafka's KAFKA-5970).

A rebalance that leaves a group without members appends to `__consumer_offsets` (the `Empty`
generation, or the `Dead` group's tombstone) while its thread holds the group's lock: `on_complete_join`
runs inside the DelayedJoin, whose lock *is* the group's lock, called by a LeaveGroup that holds it too.
With `acks=-1` and an ISR of the leader alone, that append moves the high watermark, so the same thread
re-tests the produce operations watching the partition, among them the SyncGroup store of the group's
previous generation. If another thread is completing that store at that moment (here the ISR shrink that
let the leader's high watermark move), it holds the store's lock and its callback (`_on_group_stored`)
waits for the group's lock: two threads, two locks, opposite orders.

The test drives real objects (a ReplicaManager with its produce purgatory, a ReplicaOffsetsStore, a
GroupMetadataManager and a GroupCoordinator, their own locks) into that interleaving. The help it gives:
the shrinking thread pauses inside the store's `try_complete` (holding the store's lock, before it marks
the store completed) until the LeaveGroup's thread has been re-testing the partition's produces for
0.2 s, or has finished; two thin wrappers only note which produces are created and when the LeaveGroup's
thread walks the partition. Every wait is bounded, so the test ends in a few seconds either way; on a
deadlock the two daemon threads stay blocked (holding only the group's and the store's locks) and the
test fails. Fixed in the purgatory (`DelayedOperation.maybe_try_complete`, 4.4.4), as Kafka 1.1 did.
"""
from __future__ import annotations

import threading
import time as real_time

import pytest

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from kafka_edu.server.coordinator.group_metadata import GroupState
from kafka_edu.server.coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig
from kafka_edu.server.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kafka_edu.server.coordinator.replica_offsets_store import ReplicaOffsetsStore
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.purgatory.delayed_operation import DelayedOperationPurgatory
from kafka_edu.server.purgatory.delayed_produce import DelayedProduce
from kafka_edu.server.replica.metadata_cache import MetadataCache
from kafka_edu.server.replica.partition import PartitionState
from kafka_edu.server.replica.replica_manager import ReplicaManager
from kafka_edu.server.utils.scheduler import MockScheduler
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import LeaderAndIsr, ZkUtils

TP = (GROUP_METADATA_TOPIC_NAME, 0)
LAG_MS = 1000                   # replica.lag.time.max.ms; the stores' own timeout is 5 s on the same clock
DEADLOCK_WAIT_S = 3.0
PROTOCOLS = [("range", b"sub:orders")]


class Broker:
    """Broker 0 leading `__consumer_offsets-0` (replicas 0 and 1, ISR both) and coordinating its groups."""

    def __init__(self, tmp_path, keep_empty_groups: bool):
        self.clock = MockTime(start_ms=1_000_000)
        config = KafkaConfig({"broker.id": 0, "log.dirs": str(tmp_path), "replica.lag.time.max.ms": LAG_MS})
        self.scheduler = MockScheduler(self.clock)
        self.zk_utils = ZkUtils(EmbeddedZooKeeper().connect())
        self.zk_utils.create_leader_and_isr(*TP, LeaderAndIsr(0, 0, (0, 1)), 1)
        self.log_manager = LogManager(config.log_dirs, scheduler=self.scheduler, time=self.clock)
        self.replica_manager = ReplicaManager(config, self.log_manager, self.zk_utils, self.scheduler,
                                              MetadataCache(0), time=self.clock)
        error, _ = self.replica_manager.become_leader_or_follower(0, 1, {TP: PartitionState(1, 0, 0, (0, 1), 0, (0, 1))})
        assert error is Errors.NONE
        self.partition = self.replica_manager.get_partition(TP)
        manager = GroupMetadataManager(0, OffsetConfig(offsets_topic_num_partitions=1),
                                       ReplicaOffsetsStore(self.replica_manager, -1, 5000), self.scheduler,
                                       time=self.clock)
        self.purgatories = [DelayedOperationPurgatory(name, 0, reaper_enabled=False, time=self.clock)
                            for name in ("Heartbeat", "Rebalance")]
        names = iter(["alice", "bob"])
        self.coordinator = GroupCoordinator(0, GroupConfig(keep_empty_groups=keep_empty_groups), manager,
                                            *self.purgatories, time=self.clock,
                                            new_member_id=lambda client_id: next(names))
        self.coordinator.startup()
        self.coordinator.handle_group_immigration(0)
        self.scheduler.tick()
        self.produces: list[DelayedProduce] = []
        purgatory = self.replica_manager.delayed_produce_purgatory
        watch = purgatory.try_complete_else_watch

        def recording(operation, keys):          # only notes which operations the produce path creates
            self.produces.append(operation)
            return watch(operation, keys)
        purgatory.try_complete_else_watch = recording

    def close(self) -> None:
        self.coordinator.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()

    def call(self, handler: str, *args):
        """A request to the coordinator; returns the answers its callback received so far."""
        answers = []
        getattr(self.coordinator, handler)(*args, lambda *result: answers.append(result))
        return answers


@pytest.fixture(params=[True, False], ids=["empty-generation-store", "dead-group-tombstone"])
def broker(request, tmp_path):
    b = Broker(tmp_path, keep_empty_groups=request.param)
    yield b
    b.close()                                    # even after a deadlock: its two threads hold only the group's
                                                 # and the store's locks, which closing does not need


def _generation_2_awaiting_sync(b: Broker):
    """alice and bob in generation 2; alice's (the leader's) SyncGroup is answered REBALANCE_IN_PROGRESS
    by bob's LeaveGroup, but its store still waits in the produce purgatory for broker 1."""
    alice = b.call("handle_join_group", "g", "", "alice", "/10.0.0.1", 10_000, 10_000, "consumer", PROTOCOLS)
    assert alice[0][0].error is Errors.NONE and alice[0][0].generation_id == 1
    bob = b.call("handle_join_group", "g", "", "bob", "/10.0.0.2", 10_000, 10_000, "consumer", PROTOCOLS)
    alice = b.call("handle_join_group", "g", "alice", "alice", "/10.0.0.1", 10_000, 10_000, "consumer", PROTOCOLS)
    assert [r[0][0].generation_id for r in (alice, bob)] == [2, 2]
    sync = b.call("handle_sync_group", "g", 2, "alice", {"alice": b"orders-0", "bob": b"orders-1"})
    (store,) = b.produces
    assert sync == [] and not store.is_completed and b.replica_manager.delayed_produce_purgatory.watch_counts() == {TP: 1}
    assert b.call("handle_leave_group", "g", "bob") == [(Errors.NONE,)]
    assert sync == [(b"", Errors.REBALANCE_IN_PROGRESS)]
    assert b.coordinator.group_manager.get_group("g").state is GroupState.PREPARING_REBALANCE
    return store


def test_last_member_leaving_while_the_isr_shrink_completes_the_previous_store(broker):
    b = broker
    store = _generation_2_awaiting_sync(b)
    b.clock.advance(LAG_MS + 500)                # broker 1 never fetched: it leaves the ISR at the next check

    shrinker_in_store, leaver_at_store, leaver_done = threading.Event(), threading.Event(), threading.Event()
    seen_by_leaver = []
    check = b.partition.check_enough_replicas_reach_offset

    def paused_check(required_offset):
        """Inside `store.try_complete`, under its lock: the shrinking thread waits for the leaver here."""
        if threading.current_thread().name == "isr-expiration" and not shrinker_in_store.is_set():
            shrinker_in_store.set()
            deadline = real_time.monotonic() + DEADLOCK_WAIT_S
            while not (leaver_at_store.is_set() or leaver_done.is_set()) and real_time.monotonic() < deadline:
                real_time.sleep(0.005)
        return check(required_offset)
    b.partition.check_enough_replicas_reach_offset = paused_check

    produce_purgatory = b.replica_manager.delayed_produce_purgatory
    check_and_complete = produce_purgatory.check_and_complete

    def noting_check_and_complete(key):
        """The leaver re-tests the partition's produces: it will meet the store the shrinker holds."""
        if threading.current_thread().name == "leave-group" and shrinker_in_store.is_set() and not store.is_completed:
            seen_by_leaver.append(key)
            later = threading.Timer(0.2, leaver_at_store.set)   # time to reach the store's lock (or pass it by)
            later.daemon = True
            later.start()
        return check_and_complete(key)
    produce_purgatory.check_and_complete = noting_check_and_complete

    leave = []

    def leave_group():
        try:
            leave.extend(b.call("handle_leave_group", "g", "alice"))
        finally:
            leaver_done.set()

    shrinker = threading.Thread(target=b.replica_manager.maybe_shrink_isr, name="isr-expiration", daemon=True)
    leaver = threading.Thread(target=leave_group, name="leave-group", daemon=True)
    shrinker.start()
    assert shrinker_in_store.wait(DEADLOCK_WAIT_S), "the ISR shrink never re-tested the waiting store"
    leaver.start()
    deadline = real_time.monotonic() + DEADLOCK_WAIT_S
    for thread in (shrinker, leaver):
        thread.join(max(0.0, deadline - real_time.monotonic()))
    if shrinker.is_alive() or leaver.is_alive():
        pytest.fail("deadlock: the LeaveGroup thread holds group g's lock and waits for the lock of the "
                    "SyncGroup store's DelayedProduce, which the ISR-shrink thread holds while its callback "
                    "waits for group g's lock")

    assert seen_by_leaver == [TP], "the interleaving was not forced: the leaver never re-tested the store"
    assert leave == [(Errors.NONE,)]
    assert b.partition.in_sync_replicas == {0} and b.partition.local_replica.high_watermark == 2
    assert store.is_completed and store.produce_status[TP].response.error is Errors.NONE
    group = b.coordinator.group_manager.get_group("g")
    if b.coordinator.group_config.keep_empty_groups:
        assert group.state is GroupState.EMPTY and group.generation_id == 3
    else:
        assert group is None
    assert produce_purgatory.watch_counts() == {} and all(p.is_completed for p in b.produces)
