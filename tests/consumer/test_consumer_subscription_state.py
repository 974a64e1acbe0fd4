"""SubscriptionState: exclusive modes, group subscription, assignment, positions, resets, pause."""
from __future__ import annotations

import pytest

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.consumer.subscription_state import (OffsetAndMetadata, OffsetResetStrategy,
                                                            SubscriptionState, SubscriptionType)
from kafka_edu.common.cluster import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


@pytest.mark.parametrize("first, second", [("topics", "assign"), ("assign", "pattern"), ("pattern", "topics")])
def test_modes_are_mutually_exclusive(first, second):
    subs = SubscriptionState()
    actions = {"topics": lambda: subs.subscribe(["t"]), "assign": lambda: subs.assign_from_user([T0]),
               "pattern": lambda: subs.subscribe_pattern("t.*")}
    actions[first]()
    actions[first]()                                   # the same mode again is fine
    with pytest.raises(IllegalStateError):
        actions[second]()
    subs.unsubscribe()
    actions[second]()
    assert subs.subscription_type is not SubscriptionType.NONE


def test_subscribe_rejects_a_plain_string_and_bad_names():
    subs = SubscriptionState()
    with pytest.raises(TypeError):
        subs.subscribe("t")
    with pytest.raises(ValueError):
        subs.subscribe([""])


def test_change_subscription_drops_partitions_and_asks_for_assignment():
    subs = SubscriptionState()
    subs.subscribe(["t", "u"])
    subs.assign_from_subscribed([T0, U0])
    assert not subs.needs_partition_assignment
    subs.subscribe(["t", "u"])                        # unchanged: nothing happens
    assert not subs.needs_partition_assignment
    subs.subscribe(["t"])
    assert subs.assigned_partitions() == [T0] and subs.needs_partition_assignment


def test_group_subscription_grows_on_the_leader_and_shrinks_on_reassignment():
    subs = SubscriptionState()
    subs.subscribe(["t"])
    subs.group_subscribe(["t", "u", "v"])
    assert subs.group_subscription == {"t", "u", "v"}
    subs.need_reassignment()
    assert subs.group_subscription == {"t"} and subs.needs_partition_assignment


def test_assign_from_subscribed_refuses_foreign_topics():
    subs = SubscriptionState()
    subs.subscribe(["t"])
    with pytest.raises(ValueError):
        subs.assign_from_subscribed([U0])


def test_reassignment_keeps_state_of_partitions_that_stay():
    subs = SubscriptionState()
    subs.assign_from_user([T0, T1])
    subs.seek(T0, 5)
    subs.pause(T1)
    subs.assign_from_user([T0, U0])
    assert subs.position(T0) == 5 and not subs.is_paused(U0) and not subs.is_assigned(T1)


def test_positions_resets_and_fetchability():
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign_from_user([T0, T1])
    assert not subs.has_all_fetch_positions() and subs.missing_fetch_positions() == [T0, T1]
    subs.need_offset_reset(T0)
    subs.need_offset_reset(T1, OffsetResetStrategy.LATEST)
    assert subs.reset_strategy(T0) is OffsetResetStrategy.EARLIEST
    assert subs.reset_strategy(T1) is OffsetResetStrategy.LATEST
    subs.seek(T0, 0)
    subs.seek(T1, 9)
    assert not subs.is_offset_reset_needed(T0) and subs.has_all_fetch_positions()
    subs.pause(T1)
    assert subs.fetchable_partitions() == [T0] and subs.paused_partitions() == [T1]
    subs.resume(T1)
    assert subs.is_fetchable(T1)
    assert subs.all_consumed() == {T0: OffsetAndMetadata(0), T1: OffsetAndMetadata(9)}
    with pytest.raises(ValueError):
        subs.seek(T0, -1)
    with pytest.raises(IllegalStateError):
        subs.position(U0)


def test_committed_and_refresh_flag():
    subs = SubscriptionState()
    subs.assign_from_user([T0])
    assert subs.needs_fetch_committed_offsets
    subs.committed(T0, OffsetAndMetadata(7, "m"))
    subs.commits_refreshed()
    assert subs.committed(T0) == OffsetAndMetadata(7, "m") and not subs.needs_fetch_committed_offsets
    subs.need_refresh_commits()
    assert subs.needs_fetch_committed_offsets


def test_pattern_subscription_uses_full_match():
    subs = SubscriptionState()
    subs.subscribe_pattern(r"t\d")
    assert subs.matches_subscribed_pattern("t1") and not subs.matches_subscribed_pattern("t10")
    subs.subscribe_from_pattern(["t1", "t2"])
    assert subs.subscription == {"t1", "t2"} and subs.partitions_auto_assigned()
    other = SubscriptionState()
    other.subscribe(["t"])
    with pytest.raises(IllegalStateError):
        other.subscribe_from_pattern(["t"])


def test_figure_is_deterministic():
    from kafka_edu.viz.consumer import subscription_state_figure
    subs = SubscriptionState()
    subs.assign_from_user([T1, T0])
    subs.seek(T0, 3)
    first = subscription_state_figure(subs).source
    assert first == subscription_state_figure(subs).source and "t-0" in first and first.index("t-0") < first.index("t-1")
