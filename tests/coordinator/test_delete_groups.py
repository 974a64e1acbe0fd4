"""DeleteGroups in the coordinator (Beyond 0.10: Kafka 1.1, KIP-229), on the mock clock over real logs.

A group with members is refused, an inactive one is forgotten with its offsets, tombstones make the
deletion survive a reload, and every gate error comes back per group.
"""
from __future__ import annotations

import pytest
from _coordinator_harness import Harness

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.coordinator.group_metadata import GroupMetadata, GroupState
from kafka_edu.server.coordinator.offsets_topic import GroupMetadataKey, OffsetKey


def other_partition_group(h: Harness, group_id: str) -> str:
    """A group id whose `__consumer_offsets` partition differs from `group_id`'s."""
    return next(name for name in (f"other-{i}" for i in range(200))
                if h.manager.partition_for(name) != h.manager.partition_for(group_id))


def same_partition_group(h: Harness, group_id: str) -> str:
    return next(name for name in (f"peer-{i}" for i in range(1000))
                if h.manager.partition_for(name) == h.manager.partition_for(group_id))


def tail(h: Harness, group_id: str, count: int) -> list[tuple[object, object]]:
    """(key, value) of the last `count` records of the group's partition."""
    return [(key, value) for _, key, value in h.records(h.manager.partition_for(group_id))[-count:]]


def delete(h: Harness, *group_ids: str) -> dict[str, Errors]:
    return h.coordinator.handle_delete_groups(list(group_ids))


@pytest.fixture
def empty_groups(tmp_path):
    """Kafka 0.10.1+'s life cycle: a group whose members left stays Empty."""
    h = Harness(tmp_path, keep_empty_groups=True)
    h.own("g")
    yield h
    h.close()


@pytest.fixture
def book_rules(tmp_path):
    """The book's life cycle: a group whose last member leaves dies; its offsets stay."""
    h = Harness(tmp_path)
    h.own("g")
    yield h
    h.close()


def test_a_group_with_members_is_refused_and_kept(empty_groups):
    h = empty_groups
    generation, (alice,) = h.stable_group("g", "alice")
    assert h.commit("g", alice, generation, {("t", 0): 7}) == {("t", 0): Errors.NONE}
    records_before = len(h.records(h.manager.partition_for("g")))
    assert delete(h, "g") == {"g": Errors.NON_EMPTY_GROUP}
    group = h.manager.get_group("g")
    assert group.state is GroupState.STABLE and group.has(alice)
    assert h.fetch("g", [("t", 0)])[1][("t", 0)].offset == 7
    assert h.heartbeat("g", alice, generation) is Errors.NONE
    assert len(h.records(h.manager.partition_for("g"))) == records_before     # nothing was written


def test_a_rebalancing_group_is_refused(empty_groups):
    h = empty_groups
    h.stable_group("g", "alice")
    parked = h.join("g", client_id="bob")                   # bob waits for alice to rejoin
    assert parked.value is None and h.manager.get_group("g").state is GroupState.PREPARING_REBALANCE
    assert delete(h, "g") == {"g": Errors.NON_EMPTY_GROUP}


def test_an_empty_group_is_deleted_with_its_offsets_and_stays_deleted_after_a_reload(empty_groups):
    h = empty_groups
    generation, (alice,) = h.stable_group("g", "alice")
    h.commit("g", alice, generation, {("t", 0): 7, ("t", 1): 9, ("u", 0): 1})
    assert h.leave("g", alice) is Errors.NONE
    group = h.manager.get_group("g")
    assert group.state is GroupState.EMPTY

    assert delete(h, "g") == {"g": Errors.NONE}
    assert group.state is GroupState.DEAD and h.manager.get_group("g") is None
    error, offsets = h.fetch("g", [("t", 0), ("t", 1), ("u", 0)])
    assert error is Errors.NONE and {tp: r.offset for tp, r in offsets.items()} == {
        ("t", 0): -1, ("t", 1): -1, ("u", 0): -1}
    assert h.fetch("g")[1] == {}
    # one batch of tombstones: every offset key, then the group's key
    assert sorted(tail(h, "g", 4)[:3]) == [(OffsetKey(1, "g", "t", 0), None), (OffsetKey(1, "g", "t", 1), None),
                                            (OffsetKey(1, "g", "u", 0), None)]
    assert tail(h, "g", 1) == [(GroupMetadataKey(2, "g"), None)]

    h.start_coordinator()                                   # a broker restart replays the log
    h.own("g")
    assert h.manager.get_group("g") is None and h.fetch("g")[1] == {}
    assert delete(h, "g") == {"g": Errors.GROUP_ID_NOT_FOUND}
    assert h.commit("g", "", -1, {("t", 0): 3}) == {("t", 0): Errors.NONE}    # the name can be used again
    assert h.manager.get_group("g").state is GroupState.EMPTY


def test_book_rules_a_dead_group_left_offsets_which_deletion_removes(book_rules):
    h = book_rules
    generation, (alice,) = h.stable_group("g", "alice")
    h.commit("g", alice, generation, {("t", 0): 7})
    h.leave("g", alice)                                     # the group dies, its offset stays
    assert h.manager.get_group("g") is None and h.fetch("g")[1][("t", 0)].offset == 7

    assert delete(h, "g") == {"g": Errors.NONE}
    assert h.fetch("g")[1] == {}
    assert tail(h, "g", 1) == [(OffsetKey(1, "g", "t", 0), None)]
    assert delete(h, "g") == {"g": Errors.GROUP_ID_NOT_FOUND}   # nothing of that name is left
    h.start_coordinator()
    h.own("g")
    assert h.manager.get_group("g") is None and h.fetch("g")[1] == {}


def test_groupless_commits_are_a_group_that_can_be_deleted(book_rules):
    h = book_rules
    assert h.commit("g", "", -1, {("t", 2): 11}) == {("t", 2): Errors.NONE}
    assert h.manager.get_group("g") is None
    assert delete(h, "g") == {"g": Errors.NONE}
    assert h.fetch("g")[1] == {}


def test_deleting_one_group_leaves_its_partition_neighbours_alone(book_rules):
    h = book_rules
    peer = same_partition_group(h, "g")
    generation, (alice,) = h.stable_group(peer, "alice")
    h.commit(peer, alice, generation, {("t", 0): 5})
    h.commit("g", "", -1, {("t", 0): 8})
    assert delete(h, "g") == {"g": Errors.NONE}
    assert h.fetch(peer)[1][("t", 0)].offset == 5 and h.manager.get_group(peer).has(alice)
    h.start_coordinator()
    h.own(peer)
    assert h.fetch(peer)[1][("t", 0)].offset == 5 and h.manager.get_group(peer).generation_id == generation
    assert h.fetch("g")[1] == {}


def test_each_group_gets_its_own_error_and_the_gate_comes_first(book_rules):
    h = book_rules
    elsewhere, unknown = other_partition_group(h, "g"), same_partition_group(h, "g")
    h.commit("g", "", -1, {("t", 0): 1})
    assert delete(h, "g", unknown, "", elsewhere) == {
        "g": Errors.NONE, unknown: Errors.GROUP_ID_NOT_FOUND, "": Errors.INVALID_GROUP_ID,
        elsewhere: Errors.NOT_COORDINATOR}
    h.coordinator.handle_group_immigration(h.manager.partition_for(elsewhere))   # loading until the next tick
    assert delete(h, elsewhere) == {elsewhere: Errors.COORDINATOR_LOAD_IN_PROGRESS}
    h.scheduler.tick()
    assert delete(h, elsewhere) == {elsewhere: Errors.GROUP_ID_NOT_FOUND}
    h.coordinator.shutdown()
    assert delete(h, unknown) == {unknown: Errors.COORDINATOR_NOT_AVAILABLE}


def test_the_manager_deletes_only_dead_groups(book_rules):
    h = book_rules
    live = GroupMetadata("g", "consumer")
    with pytest.raises(ValueError, match="only a Dead group"):
        h.manager.delete_group("g", live)
    live.transition_to(GroupState.DEAD)
    with pytest.raises(ValueError, match="only a Dead group"):
        h.manager.delete_group("another", live)


def test_a_stale_group_object_never_tombstones_the_cached_one(empty_groups):
    """Only whoever removes a group from the cache writes its tombstone."""
    h = empty_groups
    h.commit("g", "", -1, {("t", 0): 1})                  # creates the Empty group "g"
    stale = GroupMetadata("g", "consumer", initial_state=GroupState.EMPTY)
    stale.transition_to(GroupState.DEAD)
    before = len(h.records(h.manager.partition_for("g")))
    assert h.manager.delete_group("g", stale) == 1          # its offset goes, the cached group stays
    assert h.manager.get_group("g") is not stale and h.manager.get_group("g").state is GroupState.EMPTY
    written = h.records(h.manager.partition_for("g"))[before:]
    assert [(key, value) for _, key, value in written] == [(OffsetKey(1, "g", "t", 0), None)]


def test_a_repeated_group_id_is_answered_once(book_rules):
    h = book_rules
    h.commit("g", "", -1, {("t", 0): 1})
    assert delete(h, "g", "g") == {"g": Errors.NONE}
