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

The second test is the circle that fix leaves (Kafka's KAFKA-6042/KAFKA-8334): two groups of one
partition emptied at the same moment, each thread completing the other group's store while holding
its own group's lock. Fixed as Kafka 2.7 did: the coordinator's appends leave their re-tests on the
ReplicaManager's action queue, which runs after the request, with no group lock held (4.5, 4.7.2).
The tests call the coordinator directly, so `Broker.call` does what `KafkaApis.handle` does after
every request: it runs the queued actions.
"""
from __future__ import annotations

import threading
import time as real_time

import pytest
from _coordinator_harness import PROTOCOLS

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
        self.coordinator = GroupCoordinator(0, GroupConfig(keep_empty_groups=keep_empty_groups), manager,
                                            *self.purgatories, time=self.clock,
                                            new_member_id=lambda client_id: client_id)
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
        # what KafkaApis.handle runs after every request; a ReplicaManager without an action queue
        # (before KAFKA-8334) re-tests inline instead, and then the second test shows its deadlock

    def close(self) -> None:
        self.coordinator.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()

    def call(self, handler: str, *args):
        """A request to the coordinator, then what a request handler does after every request: run the
        ReplicaManager's queued actions. Returns the answers the callback received so far."""
        answers = []
        try:
            getattr(self.coordinator, handler)(*args, lambda *result: answers.append(result))
        finally:
            self.replica_manager.try_complete_actions()
        return answers


@pytest.fixture(params=[True, False], ids=["empty-generation-store", "dead-group-tombstone"])
def broker(request, tmp_path):
    b = Broker(tmp_path, keep_empty_groups=request.param)
    yield b
    b.close()                                    # even after a deadlock: its two threads hold only the group's
                                                 # and the store's locks, which closing does not need


def _generation_2_awaiting_sync(b: Broker, group_id: str = "g", alice: str = "alice", bob: str = "bob"):
    """alice and bob in generation 2; alice's (the leader's) SyncGroup is answered REBALANCE_IN_PROGRESS
    by bob's LeaveGroup, but its store still waits in the produce purgatory for broker 1."""
    waiting = len(b.produces)                    # the stores of earlier groups wait too
    joined = b.call("handle_join_group", group_id, "", alice, "/10.0.0.1", 10_000, 10_000, "consumer", PROTOCOLS)
    assert joined[0][0].error is Errors.NONE and joined[0][0].generation_id == 1
    bob_joined = b.call("handle_join_group", group_id, "", bob, "/10.0.0.2", 10_000, 10_000, "consumer", PROTOCOLS)
    joined = b.call("handle_join_group", group_id, alice, alice, "/10.0.0.1", 10_000, 10_000, "consumer", PROTOCOLS)
    assert [r[0][0].generation_id for r in (joined, bob_joined)] == [2, 2]
    sync = b.call("handle_sync_group", group_id, 2, alice, {alice: b"orders-0", bob: b"orders-1"})
    assert len(b.produces) == waiting + 1
    store = b.produces[-1]
    assert sync == [] and not store.is_completed
    assert b.replica_manager.delayed_produce_purgatory.watch_counts() == {TP: waiting + 1}
    assert b.call("handle_leave_group", group_id, bob) == [(Errors.NONE,)]
    assert sync == [(b"", Errors.REBALANCE_IN_PROGRESS)]
    assert b.coordinator.group_manager.get_group(group_id).state is GroupState.PREPARING_REBALANCE
    return store


def _assert_emptied(b: Broker, group_id: str) -> None:
    group = b.coordinator.group_manager.get_group(group_id)
    if b.coordinator.group_config.keep_empty_groups:
        assert group.state is GroupState.EMPTY and group.generation_id == 3
    else:
        assert group is None



def join_or_fail(threads, deadlock: str) -> None:
    """Join `threads` within one DEADLOCK_WAIT_S; any still running means they wait for each other."""
    deadline = real_time.monotonic() + DEADLOCK_WAIT_S
    for thread in threads:
        thread.join(max(0.0, deadline - real_time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        pytest.fail(deadlock)

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
    join_or_fail((shrinker, leaver), "deadlock: the LeaveGroup thread holds group g's lock and waits for the lock "
                 "of the SyncGroup store's DelayedProduce, which the ISR-shrink thread holds while its callback "
                 "waits for group g's lock")

    assert seen_by_leaver == [TP], "the interleaving was not forced: the leaver never re-tested the store"
    assert leave == [(Errors.NONE,)]
    assert b.partition.in_sync_replicas == {0} and b.partition.local_replica.high_watermark == 2
    assert store.is_completed and store.produce_status[TP].response.error is Errors.NONE
    _assert_emptied(b, "g")
    assert produce_purgatory.watch_counts() == {} and all(p.is_completed for p in b.produces)


def test_two_groups_emptied_at_once_complete_each_others_stores(broker):
    """Groups x and y share `__consumer_offsets-0`; each has a SyncGroup store waiting for broker 1 when
    the ISR shrinks to broker 0 alone. The shrink's own re-test comes too late: we shrink the partition
    (`Partition.maybe_shrink_isr`) and leave out the ReplicaManager's re-test that follows it, so both
    stores can complete but nobody completed them yet. Then the last members of x and y leave on two
    threads. Each stores its group's Empty generation (or tombstone) under its group's lock; the append
    moves the HW, and the partition's produces are re-tested. The help: thread B (y's leaver) pauses
    inside x's store (holding the store's lock) until thread A (x's leaver) is inside y's store.

    Re-tested inline, under the group's lock (before KAFKA-8334): B completes x's store, whose callback
    waits for x's lock, held by A, which completes y's store, whose callback waits for y's lock, held by
    B. Deadlock: both daemon threads stay blocked and the test fails after 3 s. With the action queue
    the re-tests run after each LeaveGroup, in `Broker.call` where KafkaApis.handle would run them, with
    no group's lock held, and both threads finish."""
    b = broker
    x_store = _generation_2_awaiting_sync(b, "x", "x-leader", "x-other")
    y_store = _generation_2_awaiting_sync(b, "y", "y-leader", "y-other")
    manager = b.coordinator.group_manager
    assert manager.partition_for("x") == manager.partition_for("y") == TP[1]
    b.clock.advance(LAG_MS + 500)
    b.partition.maybe_shrink_isr(LAG_MS)         # the ISR-expiration thread, before its re-test
    assert b.partition.in_sync_replicas == {0}
    required = {store: store.produce_status[TP].required_offset for store in (x_store, y_store)}
    assert b.partition.local_replica.high_watermark >= max(required.values())
    assert not x_store.is_completed and not y_store.is_completed

    b_in_x_store, a_in_y_store, b_waited = threading.Event(), threading.Event(), []
    check = b.partition.check_enough_replicas_reach_offset

    def paused_check(required_offset):
        """Inside a store's `try_complete`, under the store's lock."""
        me = threading.current_thread().name
        if me == "leave-y" and required_offset == required[x_store] and not b_in_x_store.is_set():
            b_in_x_store.set()
            b_waited.append(a_in_y_store.wait(DEADLOCK_WAIT_S))
        elif me == "leave-x" and required_offset == required[y_store]:
            a_in_y_store.set()
        return check(required_offset)
    b.partition.check_enough_replicas_reach_offset = paused_check

    answers: dict[str, list] = {}

    def leave(group_id: str, member_id: str) -> None:
        answers[group_id] = b.call("handle_leave_group", group_id, member_id)

    thread_a = threading.Thread(target=leave, args=("x", "x-leader"), name="leave-x", daemon=True)
    thread_b = threading.Thread(target=leave, args=("y", "y-leader"), name="leave-y", daemon=True)
    thread_b.start()
    assert b_in_x_store.wait(DEADLOCK_WAIT_S), "y's leaver never re-tested x's store"
    thread_a.start()
    join_or_fail((thread_a, thread_b), "deadlock: x's leaver holds x's lock and, completing y's store, waits for "
                 "y's lock; y's leaver holds y's lock and, completing x's store, waits for x's lock")

    assert b_waited == [True], "the interleaving was not forced: x's leaver never reached y's store"
    assert answers == {"x": [(Errors.NONE,)], "y": [(Errors.NONE,)]}
    for store in (x_store, y_store):
        assert store.is_completed and store.produce_status[TP].response.error is Errors.NONE
    _assert_emptied(b, "x")
    _assert_emptied(b, "y")
    assert b.replica_manager.delayed_produce_purgatory.watch_counts() == {}
    assert all(p.is_completed for p in b.produces) and len(b.replica_manager.action_queue) == 0
