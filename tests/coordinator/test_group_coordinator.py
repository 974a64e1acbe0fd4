"""GroupCoordinator: rebalances (T22), heartbeat expiry (T23), commit/join validation (T25), per-state rules."""
from __future__ import annotations

import threading
import time as real_time

import pytest
from _coordinator_harness import PROTOCOLS, Harness, Reply, ScriptedStore

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from kafka_edu.server.coordinator.group_metadata import GroupState
from kafka_edu.server.coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig
from kafka_edu.server.coordinator.offsets_store import LogOffsetsStore
from kafka_edu.server.coordinator.offsets_topic import GroupMetadataKey, java_string_hash
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.utils.scheduler import KafkaScheduler


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    h.own("g")
    yield h
    h.close()


def state(h: Harness, group_id: str = "g") -> GroupState:
    return h.manager.get_group(group_id).state


# --- T22 --------------------------------------------------------------------------------------------

def test_t22_group_rebalance(harness):
    h = harness
    first = h.join("g", client_id="c1", protocols=[("range", b"meta-1")])
    assert first.value.generation_id == 1                  # alone: generation 1 at once
    second = h.join("g", client_id="c2", protocols=[("range", b"meta-2")])
    assert second.value is None and state(h) is GroupState.PREPARING_REBALANCE
    again = h.join("g", member_id=first.value.member_id, client_id="c1", protocols=[("range", b"meta-1")])
    leader, follower = again.value, second.value
    assert leader.generation_id == follower.generation_id == 2
    assert leader.leader_id == follower.leader_id == leader.member_id
    assert leader.members == [(leader.member_id, b"meta-1"), (follower.member_id, b"meta-2")]
    assert follower.members == [] and leader.protocol == follower.protocol == "range"

    follower_sync = h.sync("g", 2, follower.member_id)
    assert follower_sync.value is None and state(h) is GroupState.AWAITING_SYNC
    leader_sync = h.sync("g", 2, leader.member_id, {leader.member_id: b"P0,P1", follower.member_id: b"P2"})
    assert leader_sync.value == (b"P0,P1", Errors.NONE) and follower_sync.value == (b"P2", Errors.NONE)
    assert state(h) is GroupState.STABLE

    partition = abs(java_string_hash("g")) % 50
    assert partition == 3 and h.manager.partition_for("g") == 3
    stored = [(key, value) for _, key, value in h.records(partition) if isinstance(key, GroupMetadataKey)]
    assert stored[-1][0] == GroupMetadataKey(2, "g") and stored[-1][1].generation_id == 2
    assert [m.assignment for m in stored[-1][1].all_member_metadata()] == [b"P0,P1", b"P2"]

    third = h.join("g", client_id="c3", protocols=[("range", b"meta-3")])
    assert third.value is None and state(h) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", leader.member_id, 2) is Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", follower.member_id, 2) is Errors.REBALANCE_IN_PROGRESS
    rejoins = [h.join("g", member_id=m.member_id, client_id=m.member_id, protocols=[("range", b"m")])
               for m in (leader, follower)]
    assert {r.value.generation_id for r in [third, *rejoins]} == {3}
    assert len(rejoins[0].value.members) == 3 and state(h) is GroupState.AWAITING_SYNC


# --- T23 --------------------------------------------------------------------------------------------

def test_t23_heartbeat_expiry(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    for _ in range(2):                                     # alice heartbeats every 3 s, bob is silent
        h.advance(2_999)
        assert h.heartbeat("g", a, generation) is Errors.NONE
    h.advance(3_000)                                       # 8998 ms: bob's 10 s session still runs
    assert h.manager.get_group("g").has(b)
    assert h.heartbeat("g", a, generation) is Errors.NONE
    h.advance(1_002)                                       # 10 000 ms: bob expires
    assert not h.manager.get_group("g").has(b) and state(h) is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a, generation) is Errors.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", member_id=a, client_id="alice")
    assert rejoin.value.generation_id == generation + 1 and rejoin.value.members == [(a, PROTOCOLS[0][1])]
    assert h.sync("g", generation + 1, a, {a: b"all"}).value == (b"all", Errors.NONE)

    h.advance(10_000)                                      # alice goes silent too: the last member is gone
    group_records = [(k, v) for _, k, v in h.records(h.manager.partition_for("g")) if isinstance(k, GroupMetadataKey)]
    assert group_records[-1] == (GroupMetadataKey(2, "g"), None)
    assert h.manager.get_group("g") is None
    assert h.heartbeat("g", a, generation + 1) is Errors.UNKNOWN_MEMBER_ID


def test_session_timeout_6000_removes_after_6_seconds(harness):
    h = harness
    generation, (a,) = h.stable_group("g", "alice", session_ms=6_000)
    h.advance(5_999)
    assert h.manager.get_group("g").has(a)
    h.advance(1)
    assert h.manager.get_group("g") is None               # alone: removed, group dead (0.10.0)


# --- T25 --------------------------------------------------------------------------------------------

def test_t25_commit_and_join_validation(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    assert h.commit("g", a, generation - 1, {("t", 0): 1}) == {("t", 0): Errors.ILLEGAL_GENERATION}
    assert h.commit("g", "nobody", generation, {("t", 0): 1}) == {("t", 0): Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", a, generation, {("t", 0): 1}) == {("t", 0): Errors.NONE}
    h.own("solo")
    assert h.commit("solo", "", -1, {("t", 0): 5}) == {("t", 0): Errors.NONE}
    assert h.fetch("solo", [("t", 0)])[1][("t", 0)].offset == 5
    assert h.commit("solo", "", 3, {("t", 0): 6}) == {("t", 0): Errors.ILLEGAL_GENERATION}
    for session in (5_000, 30_001):
        assert h.join("g", session_ms=session).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.join("g", session_ms=6_000).value is None     # the bounds themselves are allowed (parked join)
    assert h.commit("g", a, generation, {("t", 0): 1}, metadata="m" * 4097) == \
        {("t", 0): Errors.OFFSET_METADATA_TOO_LARGE}


def test_heartbeat_sync_and_leave_errors(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    assert h.heartbeat("g", a, generation + 1) is Errors.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", generation) is Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat("unknown-group", a, generation) is Errors.NOT_COORDINATOR
    assert h.sync("g", generation, "nobody").error is Errors.UNKNOWN_MEMBER_ID
    assert h.sync("g", generation + 1, a).error is Errors.ILLEGAL_GENERATION
    assert h.sync("g", generation, b).value == (b.encode(), Errors.NONE)   # Stable: own assignment again
    assert h.leave("g", "nobody") is Errors.UNKNOWN_MEMBER_ID
    h.join("g", client_id="carol")                          # PreparingRebalance now
    assert h.sync("g", generation, a).error is Errors.REBALANCE_IN_PROGRESS


def test_gate_errors(tmp_path):
    h = Harness(tmp_path)
    try:
        assert h.join("g").error is Errors.NOT_COORDINATOR
        h.own("g")
        assert h.join("").error is Errors.INVALID_GROUP_ID
        assert h.heartbeat("", "m", 1) is Errors.INVALID_GROUP_ID
        assert h.commit("", "", -1, {("t", 0): 1}) == {("t", 0): Errors.NOT_COORDINATOR}  # "" is a valid commit id
        h.coordinator.shutdown()
        assert h.join("g").error is Errors.COORDINATOR_NOT_AVAILABLE
        assert h.fetch("g", [("t", 0)])[0] is Errors.COORDINATOR_NOT_AVAILABLE
        assert h.coordinator.handle_list_groups() == (Errors.COORDINATOR_NOT_AVAILABLE, [])
    finally:
        h.close()


def test_join_protocol_rules(harness):
    h = harness
    generation, (a,) = h.stable_group("g", "alice")
    assert h.join("g", protocols=[("roundrobin", b"")]).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", protocol_type="connect").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", member_id="ghost").error is Errors.UNKNOWN_MEMBER_ID
    h.own("fresh")
    assert h.join("fresh", member_id="ghost").error is Errors.UNKNOWN_MEMBER_ID
    assert h.manager.get_group("fresh") is None
    assert h.join("fresh", protocols=[]).error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_known_follower_rejoining_unchanged_in_stable_gets_current_generation(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    follower = b if h.manager.get_group("g").leader_id == a else a
    reply = h.join("g", member_id=follower, client_id="x")
    assert reply.value.generation_id == generation and reply.value.members == []
    assert state(h) is GroupState.STABLE


def test_leader_rejoining_in_stable_forces_a_rebalance(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    leader = h.manager.get_group("g").leader_id
    reply = h.join("g", member_id=leader, client_id="x")
    assert reply.value is None and state(h) is GroupState.PREPARING_REBALANCE


def test_changed_subscription_forces_a_rebalance(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    follower = b if h.manager.get_group("g").leader_id == a else a
    reply = h.join("g", member_id=follower, client_id="x", protocols=[("range", b"new topics")])
    assert reply.value is None and state(h) is GroupState.PREPARING_REBALANCE


def test_join_during_awaiting_sync_answers_parked_syncs_with_rebalance_in_progress(harness):
    h = harness
    h.stable_group("g", "alice")
    second = h.join("g", client_id="bob")
    first = h.join("g", member_id=h.manager.get_group("g").leader_id, client_id="alice")
    generation = first.value.generation_id
    parked = h.sync("g", generation, second.value.member_id)
    assert parked.value is None
    assert h.commit("g", second.value.member_id, generation, {("t", 0): 1}) == \
        {("t", 0): Errors.REBALANCE_IN_PROGRESS}
    unchanged = h.join("g", member_id=second.value.member_id, client_id="bob")   # lost its JoinGroup answer
    assert unchanged.value.generation_id == generation and state(h) is GroupState.AWAITING_SYNC
    h.join("g", client_id="carol")
    assert parked.value == (b"", Errors.REBALANCE_IN_PROGRESS)
    assert state(h) is GroupState.PREPARING_REBALANCE


def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob", session_ms=30_000, rebalance_ms=15_000)
    newcomer = h.join("g", client_id="carol", session_ms=30_000, rebalance_ms=12_000)
    h.join("g", member_id=a, client_id="alice", session_ms=30_000, rebalance_ms=15_000)
    h.advance(14_999)                                       # bob (session 30 s) is alive but never rejoins
    assert newcomer.value is None
    h.advance(1)                                            # the largest rebalance timeout (15 s) passed
    assert newcomer.value.generation_id == generation + 1
    assert not h.manager.get_group("g").has(b) and len(h.manager.get_group("g").members) == 2


def test_leader_leaving_hands_leadership_to_the_next_member(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    leader = h.manager.get_group("g").leader_id
    other = b if leader == a else a
    assert h.leave("g", leader) is Errors.NONE
    reply = h.join("g", member_id=other, client_id="x")
    assert reply.value.leader_id == other and reply.value.members == [(other, PROTOCOLS[0][1])]
    assert h.leave("g", leader) is Errors.UNKNOWN_MEMBER_ID


def test_a_failed_group_store_fails_the_syncs_and_rebalances(tmp_path):
    store = ScriptedStore()
    h = Harness(tmp_path, store=store)
    try:
        h.own("g")
        a = h.join("g", client_id="alice").value.member_id
        store.fail_with = Errors.NOT_LEADER_OR_FOLLOWER
        assert h.sync("g", 1, a, {a: b"x"}).value == (b"", Errors.NOT_COORDINATOR)
        assert state(h) is GroupState.PREPARING_REBALANCE
    finally:
        h.close()


def test_describe_and_list_groups(harness):
    h = harness
    h.own("other")
    generation, (a,) = h.stable_group("g", "alice")
    h.join("other", client_id="x")
    error, summary = h.coordinator.handle_describe_group("g")
    assert error is Errors.NONE and summary.state == "Stable" and summary.protocol == "range"
    assert [(m.member_id, m.client_id, m.metadata, m.assignment) for m in summary.members] == \
        [(a, "alice", PROTOCOLS[0][1], a.encode())]
    error, summary = h.coordinator.handle_describe_group("other")
    assert summary.state == "AwaitingSync" and summary.protocol == "" and summary.members[0].metadata == b""
    ghost = next(n for n in (f"x{i}" for i in range(1000)) if h.manager.partition_for(n) == h.manager.partition_for("g"))
    assert h.coordinator.handle_describe_group(ghost) == (Errors.NONE, ("Dead", "", "", []))
    assert h.coordinator.handle_list_groups() == (Errors.NONE, [("g", "consumer"), ("other", "consumer")])


def test_emigration_answers_parked_requests_with_not_coordinator(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    parked = h.join("g", client_id="carol")
    h.coordinator.handle_group_emigration(h.manager.partition_for("g"))
    h.scheduler.tick()
    assert parked.error is Errors.NOT_COORDINATOR
    assert h.join("g", member_id=a).error is Errors.NOT_COORDINATOR
    h.advance(30_000)                                       # the unloaded members' heartbeats end quietly
    assert h.coordinator.heartbeat_purgatory.delayed() == 0


def test_immigration_restarts_the_heartbeat_clocks(harness):
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob")
    h.advance(8_000)
    h.start_coordinator()
    h.own("g")
    h.advance(9_000)                                        # within 10 s of the load: both still members
    assert h.heartbeat("g", a, generation) is Errors.NONE
    h.advance(1_000)                                        # 10 s after the load, bob never heartbeated
    assert not h.manager.get_group("g").has(b)


# --- Beyond 0.10: the Empty state ----------------------------------------------------------------------

def test_keep_empty_groups_lifecycle(tmp_path):
    h = Harness(tmp_path, keep_empty_groups=True, retention_ms=60_000)
    try:
        h.own("g")
        assert h.join("g", client_id="alice").value.generation_id == 1
        group = h.manager.get_group("g")
        assert group.transitions[0][:2] == (GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
        a = group.all_members()[0]
        h.sync("g", 1, a, {a: b"x"})
        h.commit("g", a, 1, {("t", 0): 4})
        assert h.leave("g", a) is Errors.NONE
        assert state(h) is GroupState.EMPTY and group.generation_id == 2
        assert h.heartbeat("g", a, 2) is Errors.UNKNOWN_MEMBER_ID
        assert h.commit("g", "", -1, {("t", 0): 5}) == {("t", 0): Errors.NONE}
        assert h.commit("g", "", 2, {("t", 0): 6}) == {("t", 0): Errors.UNKNOWN_MEMBER_ID}
        h.start_coordinator()                               # the Empty generation was stored
        h.own("g")
        assert state(h) is GroupState.EMPTY and h.manager.get_group("g").generation_id == 2
        h.clock.advance(60_001)
        h.manager.delete_expired_offsets()                  # no offsets left: the Empty group dies
        assert h.manager.get_group("g") is None
        _, key, value = h.records(h.manager.partition_for("g"))[-1]
        assert key == GroupMetadataKey(2, "g") and value is None
    finally:
        h.close()


def test_keep_empty_groups_creates_a_group_for_groupless_commits(tmp_path):
    h = Harness(tmp_path, keep_empty_groups=True)
    try:
        h.own("g")
        assert h.commit("g", "", -1, {("t", 0): 1}) == {("t", 0): Errors.NONE}
        assert state(h) is GroupState.EMPTY
        assert h.join("g", client_id="alice").value.generation_id == 1
    finally:
        h.close()


# --- threads: real clock, reaper threads, real scheduler -------------------------------------------------

def test_concurrent_members_on_real_threads_reach_a_common_generation(tmp_path):
    """Four members keep rejoining, syncing and heartbeating on their own threads; no deadlock, one agreement."""
    log = Log(str(tmp_path / "__consumer_offsets-0"), LogConfig(cleanup_policy="compact"))
    scheduler = KafkaScheduler(threads=1, thread_name_prefix="h6-test-")
    scheduler.startup()
    manager = GroupMetadataManager(0, OffsetConfig(offsets_topic_num_partitions=1), LogOffsetsStore(lambda p: log),
                                   scheduler)
    coordinator = GroupCoordinator(0, GroupConfig(50, 30_000), manager)
    coordinator.startup()
    coordinator.handle_group_immigration(0)
    deadline = real_time.monotonic() + 10
    while not manager.is_group_local("g") and real_time.monotonic() < deadline:
        real_time.sleep(0.01)
    stop = threading.Event()
    seen: dict[str, tuple[int, bytes]] = {}

    def call(method, *args):
        reply, done = Reply(), threading.Event()

        def callback(*values):
            reply(*values)
            done.set()
        method(*args, callback)
        return reply.value if done.wait(5) else None

    def member(name: str) -> None:
        member_id = ""
        while not stop.is_set():
            result = call(coordinator.handle_join_group, "g", member_id, name, "/h", 2_000, 1_000, "consumer",
                          PROTOCOLS)
            if result is None:
                continue
            if result.error is not Errors.NONE:
                member_id = "" if result.error is Errors.UNKNOWN_MEMBER_ID else member_id
                continue
            member_id, generation = result.member_id, result.generation_id
            assignment = {m: m.encode() for m, _ in result.members}
            synced = call(coordinator.handle_sync_group, "g", generation, member_id, assignment)
            if synced is None or synced[1] is not Errors.NONE:
                continue
            seen[name] = (generation, synced[0])
            while not stop.is_set() and call(coordinator.handle_heartbeat, "g", member_id, generation) is Errors.NONE:
                real_time.sleep(0.05)

    threads = [threading.Thread(target=member, args=(f"m{i}",), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    try:
        deadline = real_time.monotonic() + 20
        while real_time.monotonic() < deadline:
            group = manager.get_group("g")
            if group and group.in_state(GroupState.STABLE) and len(group.members) == 4 and len(seen) == 4 \
                    and len({g for g, _ in seen.values()}) == 1 and next(iter(seen.values()))[0] == group.generation_id:
                break
            real_time.sleep(0.05)
        group = manager.get_group("g")
        assert group.in_state(GroupState.STABLE) and len(group.members) == 4
        assert {g for g, _ in seen.values()} == {group.generation_id}
        assert sorted(a for _, a in seen.values()) == sorted(m.encode() for m in group.members)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        coordinator.shutdown()
        scheduler.shutdown()
        log.close()


def test_create_reads_the_broker_config(tmp_path):
    from kafka_edu.common.utils.time import MockTime
    from kafka_edu.server.kafka_config import KafkaConfig
    from kafka_edu.server.utils.scheduler import MockScheduler

    clock = MockTime()
    config = KafkaConfig({"group.max.session.timeout.ms": 60_000, "offsets.retention.minutes": 2,
                          "offsets.topic.num.partitions": 3, "offset.metadata.max.bytes": 10})
    log = Log(str(tmp_path / "__consumer_offsets-0"), LogConfig(cleanup_policy="compact"), time=clock)
    coordinator = GroupCoordinator.create(7, config, LogOffsetsStore(lambda p: log if p == 0 else None),
                                          MockScheduler(clock), time=clock)
    try:
        assert coordinator.group_config == GroupConfig(6000, 60_000, False)
        offsets = coordinator.group_manager.config
        assert (offsets.offsets_retention_ms, offsets.offsets_topic_num_partitions, offsets.max_metadata_size) == \
            (120_000, 3, 10)
        assert coordinator.partition_for("g") == 103 % 3
        assert coordinator.offset_and_metadata(5, None) == (5, "", 0, 120_000, -1)
        assert coordinator.offset_and_metadata(5, "m", commit_timestamp=10, retention_ms=50) == (5, "m", 10, 60, -1)
    finally:
        coordinator.shutdown()
        log.close()


def test_expiry_and_group_removal_on_two_threads_do_not_deadlock(tmp_path):
    """The expiry task locks groups while members leave (which removes dead groups): one lock order for both."""
    h = Harness(tmp_path, retention_ms=0)
    h.own("g")
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn():
        try:
            while not stop.is_set():
                joined = h.join("g", client_id="c").value
                h.commit("g", joined.member_id, joined.generation_id, {("t", 0): 1})
                h.leave("g", joined.member_id)
        except BaseException as e:               # surfaced below: a failure here must fail the test
            errors.append(e)

    def expire():
        try:
            while not stop.is_set():
                h.clock.advance(1)
                h.manager.delete_expired_offsets()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=churn, daemon=True), threading.Thread(target=expire, daemon=True)]
    for t in threads:
        t.start()
    real_time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(5)
    try:
        assert not any(t.is_alive() for t in threads), "deadlock: a thread is still blocked"
        assert errors == []
    finally:
        h.close()


def test_heartbeats_during_a_rebalance_keep_a_slow_member_alive(harness):
    """Beyond 0.10 (KIP-62): a member finishing its batch keeps heartbeating and is not evicted."""
    h = harness
    generation, (a, b) = h.stable_group("g", "alice", "bob", session_ms=10_000, rebalance_ms=60_000)
    newcomer = h.join("g", client_id="carol", session_ms=10_000, rebalance_ms=60_000)
    h.join("g", member_id=a, client_id="alice", session_ms=10_000, rebalance_ms=60_000)
    for _ in range(4):                                      # 20 s: twice bob's session timeout
        h.advance(5_000)
        assert h.heartbeat("g", b, generation) is Errors.REBALANCE_IN_PROGRESS
    assert h.manager.get_group("g").has(b) and newcomer.value is None
    h.join("g", member_id=b, client_id="bob", session_ms=10_000, rebalance_ms=60_000)
    assert newcomer.value.generation_id == generation + 1
    assert len(h.manager.get_group("g").members) == 3
