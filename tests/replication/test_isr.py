"""The leader's side: ISR shrink and expansion, their propagation, min.insync.replicas (book 4.5.2, 4.5.3)."""
from __future__ import annotations

import threading
import time

import pytest
from _broker_client import records
from _cluster import wait_until

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.utils.time import MockTime


def test_isr_shrinks_after_the_lag_time_expands_again_and_is_announced(make_cluster):
    """T7: a paused follower leaves the ISR after replica.lag.time.max.ms and returns once caught up."""
    cluster = make_cluster(2, **{"replica.lag.time.max.ms": 500})
    cluster.create_partition("t7", 0, [0, 1])
    leader = cluster.brokers[0].replica_manager
    announced = []
    propagate = leader.zk_utils.propagate_isr_changes

    def record_propagation(partitions):
        partitions = list(partitions)
        path = propagate(partitions)
        announced.append((path, partitions))
        return path

    leader.zk_utils.propagate_isr_changes = record_propagation
    fetchers = cluster.brokers[1].replica_manager.replica_fetcher_manager
    assert fetchers.pause(timeout_s=5)
    with cluster.client(0) as client:
        assert client.produce("t7", 0, records(b"a"), acks=1).error_code == 0
    wait_until(lambda: cluster.isr_in_zk("t7") == [0], what="the ISR to shrink")
    assert cluster.partition(0, "t7").in_sync_replicas == {0} and leader.isr_shrinks == 1
    assert cluster.partition(0, "t7").high_watermark == 1               # the ISR is {0}: HW = leader LEO
    fetchers.resume()
    wait_until(lambda: cluster.isr_in_zk("t7") == [0, 1], what="the ISR to expand")
    assert leader.isr_expands == 1
    leader.last_isr_change_ms -= 6000                                # 5 s without changes: announce now
    leader.maybe_propagate_isr_changes()
    [(path, partitions)] = announced
    assert path.startswith("/isr_change_notification/isr_change_") and ("t7", 0) in partitions
    wait_until(lambda: not cluster.zk_utils.zk.exists(path), what="the controller to delete the notification")
    assert leader.isr_change_set == set()


def test_an_isr_change_whose_announcement_fails_is_announced_next_round(make_cluster):
    cluster = make_cluster(1)
    leader = cluster.brokers[0].replica_manager
    leader.record_isr_change(("lost", 0))
    leader.last_isr_change_ms -= 6000
    write = leader.zk_utils.propagate_isr_changes

    def session_lost(partitions):
        raise ConnectionError("ZooKeeper connection lost")

    leader.zk_utils.propagate_isr_changes = session_lost
    with pytest.raises(ConnectionError):
        leader.maybe_propagate_isr_changes()
    assert leader.isr_change_set == {("lost", 0)}                    # kept, not dropped
    leader.zk_utils.propagate_isr_changes = write
    leader.last_isr_propagation_ms -= 61_000                         # the next round is due
    leader.maybe_propagate_isr_changes()
    assert leader.isr_change_set == set()


def test_isr_changes_wait_for_5_s_of_quiet_but_never_more_than_60_s(make_cluster):
    """0.10's rate limit on /isr_change_notification: a change is announced once no other came for 5 s,
    and a flapping ISR that never goes quiet is still announced 60 s after the last announcement."""
    cluster = make_cluster(1)
    leader = cluster.brokers[0].replica_manager
    clock = MockTime(start_ms=leader.time.milliseconds())
    leader.time = clock                  # the rule reads only this clock; the test moves it by hand
    leader.last_isr_change_ms = leader.last_isr_propagation_ms = clock.milliseconds()
    announced = []
    propagate = leader.zk_utils.propagate_isr_changes

    def record_propagation(partitions):
        partitions = list(partitions)
        announced.append(sorted(partitions))
        return propagate(partitions)

    leader.zk_utils.propagate_isr_changes = record_propagation
    leader.record_isr_change(("a", 0))
    clock.advance(5000)
    leader.maybe_propagate_isr_changes()
    assert announced == []                                        # 5 s of quiet is not yet more than 5 s
    clock.advance(1)
    leader.maybe_propagate_isr_changes()
    assert announced == [[("a", 0)]]
    for i in range(16):                                           # a change every 4 s: never 5 s of quiet
        leader.record_isr_change(("b", i))
        clock.advance(4000)
        leader.maybe_propagate_isr_changes()
        assert len(announced) == (1 if i < 15 else 2), i          # until 64 s > 60 s after the last one
    assert announced[1] == [("b", i) for i in range(16)]
    assert leader.isr_change_set == set()


def test_a_leader_with_a_stale_zk_version_leaves_the_isr_alone(make_cluster):
    """The ISR is written with a compare-and-set on the state znode's version. When someone else (a
    new controller) wrote the znode since, the leader's shrink fails, and the leader keeps both the
    znode and its own ISR as they were, waiting for the LeaderAndIsr that will follow."""
    cluster = make_cluster(2, **{"replica.lag.time.max.ms": 1000})
    cluster.create_partition("cas", 0, [0, 1])
    leader = cluster.partition(0, "cas")
    cached = leader.zk_version
    current = cluster.zk_utils.get_leader_and_isr("cas", 0)
    written, version = cluster.zk_utils.update_leader_and_isr(            # the same state, one version later
        "cas", 0, current.leader_and_isr, current.controller_epoch)
    assert written and version == cached + 1
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    with cluster.client(0) as client:
        assert client.produce("cas", 0, records(b"a"), acks=1).error_code == 0
    time.sleep(1.1)                                                       # past replica.lag.time.max.ms
    assert leader.maybe_shrink_isr(1000) is False
    assert leader.in_sync_replicas == {0, 1} and leader.zk_version == cached
    assert cluster.isr_in_zk("cas") == [0, 1]
    assert cluster.brokers[0].replica_manager.isr_change_set == set()


def test_min_insync_replicas_refuses_acks_all_before_appending(make_cluster):
    """T8: ISR {0} < min.insync.replicas 2: acks=-1 gets NOT_ENOUGH_REPLICAS and nothing is appended."""
    cluster = make_cluster(2)
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    cluster.create_partition("t8", 0, [0, 1], isr=[0], config={"min.insync.replicas": 2})
    with cluster.client(0) as client:
        refused = client.produce("t8", 0, records(b"a"), acks=-1)
        assert refused.error_code == Errors.NOT_ENOUGH_REPLICAS.code
        assert cluster.partition(0, "t8").local_replica.log_end_offset == 0
        assert client.produce("t8", 0, records(b"a"), acks=1).error_code == 0


def _produce_in_background(cluster, topic, timeout_ms):
    answer = {}

    def produce():
        with cluster.client(0) as client:
            answer["response"] = client.produce(topic, 0, records(b"a"), acks=-1, timeout_ms=timeout_ms)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    return thread, answer


def test_isr_shrinking_below_min_insync_after_the_append(make_cluster):
    """T9: the ISR shrinks to {0} while the acks=-1 produce waits: NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    cluster = make_cluster(2, **{"replica.lag.time.max.ms": 500})
    cluster.create_partition("t9", 0, [0, 1], config={"min.insync.replicas": 2})
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    thread, answer = _produce_in_background(cluster, "t9", 20_000)
    thread.join(20)
    assert answer["response"].error_code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND.code
    assert cluster.isr_in_zk("t9") == [0]
    assert cluster.partition(0, "t9").local_replica.log_end_offset == 1      # appended, never acknowledged


def test_acks_all_times_out_while_a_stalled_follower_stays_in_the_isr(make_cluster):
    """T9: followers stalled but still in the ISR (lag time 10 s), request timeout 500 ms: REQUEST_TIMED_OUT."""
    cluster = make_cluster(2)
    cluster.create_partition("t9b", 0, [0, 1], config={"min.insync.replicas": 2})
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    thread, answer = _produce_in_background(cluster, "t9b", 500)
    thread.join(20)
    assert answer["response"].error_code == Errors.REQUEST_TIMED_OUT.code
    assert cluster.isr_in_zk("t9b") == [0, 1]
    cluster.brokers[1].replica_manager.replica_fetcher_manager.resume()
    wait_until(lambda: cluster.partition(0, "t9b").high_watermark == 1, what="the HW once the follower fetched")
