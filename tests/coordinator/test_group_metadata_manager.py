"""GroupMetadataManager: storing through the store, loading after a restart, unloading, offset expiry (T26)."""
from __future__ import annotations

import pytest
from _coordinator_harness import Harness, ScriptedStore

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.coordinator.group_metadata import GroupState
from kafka_edu.server.coordinator.offsets_topic import (GroupMetadataKey, OffsetAndMetadata, OffsetKey,
                                                        group_metadata_key, offset_commit_key, offset_commit_value)


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


def test_commits_and_groups_survive_a_restart_latest_wins(harness):
    harness.own("g")
    _, ids = harness.stable_group("g", "alice", "bob")
    generation = harness.manager.get_group("g").generation_id
    assert harness.commit("g", ids[0], generation, {("t", 0): 5, ("t", 1): 9}) == {("t", 0): Errors.NONE,
                                                                                   ("t", 1): Errors.NONE}
    harness.commit("g", ids[0], generation, {("t", 0): 6})
    harness.commit("h", "", -1, {("u", 3): 1})             # a group-less commit in another group's name
    harness.own("h")
    harness.commit("h", "", -1, {("u", 3): 2})

    harness.start_coordinator()                           # a restarted broker, same logs
    harness.own("g", "h")
    assert harness.fetch("g")[1] == {("t", 0): (6, "", Errors.NONE, -1), ("t", 1): (9, "", Errors.NONE, -1)}
    assert harness.fetch("h", [("u", 3)])[1][("u", 3)].offset == 2
    group = harness.manager.get_group("g")
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert group.all_members() == ids and group.leader_id == ids[0]
    assert [m.assignment for m in group.all_member_metadata()] == [m.encode() for m in ids]
    for member_id in ids:                                 # the loaded members heartbeat as before
        assert harness.heartbeat("g", member_id, generation) is Errors.NONE


def test_tombstones_delete_on_load(harness):
    harness.own("g")
    partition = harness.manager.partition_for("g")
    _, ids = harness.stable_group("g", "alice")
    harness.commit("g", ids[0], 1, {("t", 0): 5})
    harness.leave("g", ids[0])                            # last member: Dead, group tombstone
    harness.manager.storage.append(partition, harness.manager._records([(offset_commit_key("g", "t", 0), None)]),
                                   lambda error: None)
    kinds = [(type(key).__name__, value is None) for _, key, value in harness.records(partition)]
    assert kinds[-2:] == [("GroupMetadataKey", True), ("OffsetKey", True)]
    harness.start_coordinator()
    loaded = []
    harness.manager.load_groups_for_partition(partition, loaded.append)
    harness.scheduler.tick()
    assert loaded == [] and harness.manager.get_group("g") is None
    assert harness.fetch("g", [("t", 0)])[1][("t", 0)].offset == -1


def test_records_beyond_the_stores_load_end_are_not_loaded(tmp_path):
    store = ScriptedStore()
    h = Harness(tmp_path, store=store)
    try:
        h.own("g")
        h.commit("g", "", -1, {("t", 0): 1})
        h.commit("g", "", -1, {("t", 0): 2, ("t", 1): 3})   # one batch, offsets 1 and 2
        store.hw_lag = 1                                   # offset 2 is not replicated yet
        h.start_coordinator()
        h.own("g")
        assert h.fetch("g")[1] == {("t", 0): (2, "", Errors.NONE, -1)}
        store.hw_lag = 2                                   # neither record of the second batch
        h.start_coordinator()
        h.own("g")
        assert h.fetch("g")[1] == {("t", 0): (1, "", Errors.NONE, -1)}
    finally:
        h.close()


@pytest.mark.parametrize("append_error,client_error", [
    (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_COORDINATOR),
    (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.NOT_ENOUGH_REPLICAS, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.MESSAGE_TOO_LARGE, Errors.INVALID_COMMIT_OFFSET_SIZE),
    (Errors.CORRUPT_MESSAGE, Errors.CORRUPT_MESSAGE),
])
def test_failed_commit_appends_are_translated_and_not_cached(tmp_path, append_error, client_error):
    store = ScriptedStore()
    h = Harness(tmp_path, store=store)
    try:
        h.own("g")
        store.fail_with = append_error
        assert h.commit("g", "", -1, {("t", 0): 7}) == {("t", 0): client_error}
        assert h.fetch("g", [("t", 0)])[1][("t", 0)].offset == -1
    finally:
        h.close()


def test_oversized_metadata_is_refused_per_partition(harness):
    harness.own("g")
    result = harness.commit("g", "", -1, {("t", 0): 1}, metadata="x" * 4096)
    assert result == {("t", 0): Errors.NONE}
    reply = []
    harness.coordinator.handle_commit_offsets("g", "", -1, {
        ("t", 1): harness.coordinator.offset_and_metadata(2, "y" * 4097),
        ("t", 2): harness.coordinator.offset_and_metadata(3, "\U0001F600" * 2049),   # 4098 UTF-16 units
        ("t", 3): harness.coordinator.offset_and_metadata(4, None)}, reply.append)
    assert reply == [{("t", 1): Errors.OFFSET_METADATA_TOO_LARGE, ("t", 2): Errors.OFFSET_METADATA_TOO_LARGE,
                      ("t", 3): Errors.NONE}]
    offsets = harness.fetch("g")[1]
    assert sorted(offsets) == [("t", 0), ("t", 3)] and offsets[("t", 0)].metadata == "x" * 4096


def test_old_value_versions_load_with_the_default_retention(tmp_path):
    h = Harness(tmp_path, retention_ms=60_000)
    try:
        partition = h.manager.partition_for("g")
        v0 = b"\x00\x00" + offset_commit_value(OffsetAndMetadata(11, "", 1_000, 0))[2:20]
        h.manager.storage.append(partition, h.manager._records([(offset_commit_key("g", "t", 0), v0)]),
                                 lambda error: None)
        h.own("g")
        assert h.manager.offsets[next(iter(h.manager.offsets))] == OffsetAndMetadata(11, "", 1_000, 61_000)
    finally:
        h.close()


def test_loading_state_and_errors_during_a_load(harness):
    partition = harness.manager.partition_for("g")
    assert harness.fetch("g", [("t", 0)])[0] is Errors.NOT_COORDINATOR
    harness.coordinator.handle_group_immigration(partition)
    assert harness.manager.is_group_loading("g") and not harness.manager.is_group_local("g")
    assert harness.fetch("g", [("t", 0)]) == (Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                              {("t", 0): (-1, "", Errors.COORDINATOR_LOAD_IN_PROGRESS, -1)})
    assert harness.commit("g", "", -1, {("t", 0): 1}) == {("t", 0): Errors.COORDINATOR_LOAD_IN_PROGRESS}
    assert harness.join("g").error is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert harness.heartbeat("g", "m", 1) is Errors.NONE          # the book answers heartbeats blindly
    assert harness.coordinator.handle_list_groups()[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert harness.coordinator.handle_describe_group("g")[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
    harness.coordinator.handle_group_immigration(partition)       # a second call queues a second load, as
    assert harness.scheduler.tick() == 2                           # in 0.10 (an unload may sit between them)
    assert harness.manager.is_group_local("g") and not harness.manager.is_loading()
    assert harness.fetch("g", [("t", 0)])[0] is Errors.NONE


def test_unloading_drops_caches_without_tombstones(harness):
    harness.own("g")
    partition = harness.manager.partition_for("g")
    generation, ids = harness.stable_group("g", "alice")
    harness.commit("g", ids[0], generation, {("t", 0): 3})
    before = len(harness.records(partition))
    harness.coordinator.handle_group_emigration(partition)
    harness.scheduler.tick()
    assert len(harness.records(partition)) == before
    assert harness.manager.get_group("g") is None and harness.manager.offsets == {}
    assert harness.fetch("g", [("t", 0)])[0] is Errors.NOT_COORDINATOR
    assert harness.heartbeat("g", ids[0], generation) is Errors.NOT_COORDINATOR


def test_t26_offset_expiry_writes_tombstones(tmp_path):
    """offsets.retention.minutes=1, check interval 1000 ms: OffsetFetch returns -1 and tombstones are in the log."""
    h = Harness(tmp_path, retention_ms=60_000, check_interval_ms=1_000)
    try:
        h.coordinator.group_manager.startup()
        h.own("g")
        partition = h.manager.partition_for("g")
        h.commit("g", "", -1, {("t", 0): 10, ("t", 1): 20})
        h.clock.advance(30_000)
        h.commit("g", "", -1, {("t", 1): 21})             # renewed: expires 30 s later than t-0
        h.clock.advance(30_001)
        h.scheduler.tick()
        assert h.fetch("g", [("t", 0), ("t", 1)])[1] == {("t", 0): (-1, "", Errors.NONE, -1),
                                                         ("t", 1): (21, "", Errors.NONE, -1)}
        assert h.records(partition)[-1][1:] == (OffsetKey(1, "g", "t", 0), None)
        h.clock.advance(30_000)
        h.scheduler.tick()
        assert h.fetch("g")[1] == {}
        tombstones = [key for _, key, value in h.records(partition) if value is None]
        assert tombstones == [OffsetKey(1, "g", "t", 0), OffsetKey(1, "g", "t", 1)]
        h.start_coordinator()                              # and they stay expired after a restart
        h.own("g")
        assert h.fetch("g")[1] == {}
    finally:
        h.close()


def test_offsets_of_live_groups_expire_too_as_in_0_10(tmp_path):
    h = Harness(tmp_path, retention_ms=60_000)
    try:
        h.own("g")
        generation, ids = h.stable_group("g", "alice")
        h.commit("g", ids[0], generation, {("t", 0): 1})
        for _ in range(7):
            h.advance(9_000)
            assert h.heartbeat("g", ids[0], generation) is Errors.NONE
        assert h.manager.delete_expired_offsets() == 1
        assert h.manager.get_group("g").state is GroupState.STABLE
    finally:
        h.close()


def test_group_key_records_are_typed(harness):
    harness.own("g")
    harness.stable_group("g", "alice")
    partition = harness.manager.partition_for("g")
    (_, key, value), = harness.records(partition)
    assert key == GroupMetadataKey(2, "g") and value.generation_id == 1
    assert group_metadata_key("g") == b"\x00\x02\x00\x01g"
