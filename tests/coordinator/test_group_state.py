"""GroupMetadata and MemberMetadata: the state machine, membership, the protocol vote, the figure."""
from __future__ import annotations

import itertools

import pytest

from kafka_edu.server.coordinator.group_metadata import (GroupMetadata, GroupState, IllegalStateTransitionError,
                                                         MemberMetadata)
from kafka_edu.viz.group import group_figure

S = GroupState
LEGAL = {
    (S.STABLE, S.PREPARING_REBALANCE), (S.AWAITING_SYNC, S.PREPARING_REBALANCE), (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.AWAITING_SYNC), (S.AWAITING_SYNC, S.STABLE), (S.PREPARING_REBALANCE, S.EMPTY),
    *((s, S.DEAD) for s in GroupState),
}


def member(member_id: str, protocols, group_id: str = "g", rejoined: bool = True) -> MemberMetadata:
    m = MemberMetadata(member_id, group_id, member_id.split("-")[0], "/h", 30_000, 10_000, "consumer", protocols)
    if rejoined:
        m.awaiting_join_callback = print
    return m


def group_in(state: GroupState) -> GroupMetadata:
    group = GroupMetadata("g", "consumer")
    group.state = state
    return group


@pytest.mark.parametrize("source,target", list(itertools.product(GroupState, GroupState)))
def test_transition_table(source, target):
    group = group_in(source)
    if (source, target) in LEGAL:
        group.transition_to(target)
        assert group.state is target and group.transitions[-1] == (source, target, 0)
    else:
        with pytest.raises(IllegalStateTransitionError):
            group.transition_to(target)
        assert group.state is source and group.transitions == []


def test_new_groups_start_stable_or_empty_only():
    assert GroupMetadata("g").state is S.STABLE
    assert GroupMetadata("g", initial_state=S.EMPTY).state is S.EMPTY
    with pytest.raises(ValueError):
        GroupMetadata("g", initial_state=S.AWAITING_SYNC)


def test_first_member_leads_and_the_next_one_takes_over():
    group = GroupMetadata("g")
    for name in ("a-1", "b-1", "c-1"):
        group.add(member(name, [("range", b"")]))
    assert group.leader_id == "a-1" and group.protocol_type == "consumer"
    group.remove("b-1")
    assert group.leader_id == "a-1"
    group.remove("a-1")
    assert group.leader_id == "c-1"
    group.remove("c-1")
    assert group.leader_id is None and group.is_empty


def test_a_member_of_another_group_is_refused():
    with pytest.raises(ValueError):
        GroupMetadata("g").add(member("a-1", [("range", b"")], group_id="h"))


def test_vote_picks_the_most_popular_common_protocol():
    group = GroupMetadata("g")
    group.add(member("a-1", [("roundrobin", b""), ("range", b""), ("sticky", b"")]))
    group.add(member("b-1", [("sticky", b""), ("roundrobin", b"")]))
    group.add(member("c-1", [("sticky", b""), ("range", b""), ("roundrobin", b"")]))
    assert group.candidate_protocols() == {"roundrobin", "sticky"}
    assert group.select_protocol() == "sticky"


def test_vote_ties_go_to_the_earliest_vote():
    group = GroupMetadata("g")
    group.add(member("a-1", [("roundrobin", b""), ("range", b"")]))
    group.add(member("b-1", [("range", b""), ("roundrobin", b"")]))
    assert group.select_protocol() == "roundrobin"


def test_supports_protocols():
    group = GroupMetadata("g")
    assert group.supports_protocols("consumer", {"range"})
    assert not group.supports_protocols("", {"range"}) and not group.supports_protocols("consumer", set())
    group.add(member("a-1", [("range", b""), ("roundrobin", b"")]))
    assert group.supports_protocols("consumer", {"roundrobin", "x"})
    assert not group.supports_protocols("consumer", {"sticky"})
    assert not group.supports_protocols("connect", {"range"})


def test_init_next_generation_needs_every_member_rejoined():
    group = GroupMetadata("g")
    group.add(member("a-1", [("range", b"A")]))
    group.add(member("b-1", [("range", b"B")], rejoined=False))
    group.transition_to(S.PREPARING_REBALANCE)
    assert [m.member_id for m in group.not_yet_rejoined_members()] == ["b-1"]
    with pytest.raises(IllegalStateTransitionError):
        group.current_member_metadata()
    with pytest.raises(IllegalStateTransitionError):
        group.init_next_generation()
    group.remove("b-1")
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol) == (S.AWAITING_SYNC, 1, "range")
    assert group.current_member_metadata() == [("a-1", b"A")]


def test_a_generation_without_members_is_empty():
    group = GroupMetadata("g", initial_state=S.EMPTY)
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol) == (S.EMPTY, 1, None)


def test_rebalance_timeout_is_the_largest_of_the_members():
    group = GroupMetadata("g")
    assert group.rebalance_timeout_ms == 0
    a, b = member("a-1", [("range", b"")]), member("b-1", [("range", b"")])
    b.rebalance_timeout_ms = 90_000
    group.add(a)
    group.add(b)
    assert group.rebalance_timeout_ms == 90_000


def test_member_matches_vote_and_metadata():
    m = member("a-1", [("range", b"R"), ("roundrobin", b"RR")])
    assert m.matches([("range", bytearray(b"R")), ("roundrobin", b"RR")])
    assert not m.matches([("roundrobin", b"RR"), ("range", b"R")])
    assert m.vote({"roundrobin"}) == "roundrobin" and m.metadata("roundrobin") == b"RR"
    with pytest.raises(ValueError):
        m.vote({"sticky"})
    with pytest.raises(ValueError):
        m.metadata("sticky")
    with pytest.raises(TypeError):
        member("b-1", [("range", "not bytes")])


def test_summary_shows_metadata_only_when_stable():
    group = GroupMetadata("g")
    group.add(member("a-1", [("range", b"R")]))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.summary().members[0].metadata == b"" and group.summary().protocol == ""
    group.get("a-1").assignment = b"X"
    group.transition_to(S.STABLE)
    summary = group.summary()
    assert (summary.state, summary.protocol, summary.members[0].metadata, summary.members[0].assignment) == \
        ("Stable", "range", b"R", b"X")
    assert group.overview() == ("g", "consumer")


def test_group_figure_is_deterministic_and_marks_the_current_state():
    group = GroupMetadata("g")
    group.add(member("a-1", [("range", b"R")]))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    first, second = group_figure(group).source, group_figure(group).source
    assert first == second
    assert 'AwaitingSync [label=AwaitingSync fillcolor="#ffd27f"' in first
    assert 'Stable [label=Stable fillcolor=white' in first
    assert "1x (gen 1)" in first and "a-1 (leader)" in first
