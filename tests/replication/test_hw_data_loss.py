"""T12: the 0.10 window in which truncating to the high watermark loses an acknowledged acks=-1 record,
and the same script with leader-epoch truncation (KIP-101, Beyond 0.10), which keeps it.

The follower learns the leader's HW one fetch after the leader does. A follower that restarts in
that window truncates to its stale HW (0.10); if the leader then dies, the follower becomes leader
without a record the old leader had acknowledged, and the old leader truncates it away when it
returns. With leader epochs the follower does not trust its HW: it asks the leader where its
latest epoch ended and cuts there.
"""
from __future__ import annotations

from _broker_client import records, values_of
from _cluster import wait_until

from kafka_edu.common.record.memory_records import MemoryRecords

OLD_PROTOCOL = {"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.0"}


def _acknowledge_m0_then_restart_the_follower(cluster) -> int:
    """Steps 1-2: m0 is acknowledged with the follower's HW still 0; the follower restarts (fetchers
    paused, so it cannot re-fetch) and follows again. Returns the follower's LEO after that."""
    cluster.create_partition("t12", 0, [0, 1])
    with cluster.client(0) as client:
        acknowledged = client.produce("t12", 0, records(b"m0"), acks=-1)
    assert acknowledged.error_code == 0 and acknowledged.base_offset == 0        # committed: HW 1 on the leader
    assert cluster.partition(0, "t12").high_watermark == 1
    follower = cluster.partition(1, "t12")
    assert (follower.local_replica.log_end_offset, follower.high_watermark) == (1, 0)   # has m0, HW still 0
    cluster.stop(1)
    cluster.start(1)
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    cluster.publish("t12", 0, to=[1])
    return cluster.partition(1, "t12").local_replica.log_end_offset


def _old_leader_dies_and_returns(cluster) -> None:
    """Steps 3-4: the leader dies before 1 re-fetched m0; 1 is elected (clean: it is in the ISR),
    takes a write in its epoch, and the old leader returns as its follower."""
    cluster.stop(0)
    cluster.elect("t12", 0, leader=1, isr=[1])
    cluster.brokers[1].replica_manager.replica_fetcher_manager.resume()
    with cluster.client(1) as client:
        assert client.produce("t12", 0, records(b"after"), acks=1).error_code == 0
    cluster.start(0)
    cluster.publish("t12", 0, to=[0])


def _committed_values(cluster) -> list[bytes]:
    leader_end = cluster.partition(1, "t12").local_replica.log_end_offset
    wait_until(lambda: cluster.partition(0, "t12").local_replica.log_end_offset == leader_end,
               what="the old leader to follow the new one")
    wait_until(lambda: cluster.partition(1, "t12").high_watermark == leader_end, what="the new leader's HW")
    with cluster.client(1) as client:
        return values_of(client.fetch("t12", 0, 0).records)


def _log_values(cluster, broker_id: int) -> list[tuple[int, bytes]]:
    log = cluster.partition(broker_id, "t12").local_replica.log
    data = log.read(0, 1 << 20, None, True).records.read_bytes()
    return [(r.offset, r.value) for r in MemoryRecords(data).records()]


# a long fetch wait: the follower's fetch that would carry HW 1 back stays parked at the leader for a
# minute, far longer than any of these scripts takes even on a loaded machine (shutdown wakes it); the
# socket timeout must be as long, or the follower would give up on its parked fetch
LONG_FETCH_WAIT = {"replica.fetch.wait.max.ms": 60_000, "replica.socket.timeout.ms": 60_000,
                   "replica.lag.time.max.ms": 120_000}


def test_truncating_to_a_stale_high_watermark_loses_an_acknowledged_record(make_cluster):
    cluster = make_cluster(2, **{**LONG_FETCH_WAIT, **OLD_PROTOCOL})
    assert _acknowledge_m0_then_restart_the_follower(cluster) == 0      # make_followers truncated to HW 0
    _old_leader_dies_and_returns(cluster)
    assert _committed_values(cluster) == [b"after"]                        # m0 was acknowledged, and is gone
    # worse: the returning broker's HW (1) was not above the new leader's end, so nothing was cut and
    # the two replicas now hold different records at offset 0 (the divergence KIP-101 also fixes)
    assert _log_values(cluster, 0) == [(0, b"m0")] and _log_values(cluster, 1) == [(0, b"after")]


def test_leader_epochs_keep_the_acknowledged_record(make_cluster):
    cluster = make_cluster(2, **LONG_FETCH_WAIT)
    assert _acknowledge_m0_then_restart_the_follower(cluster) == 1      # no truncation to the stale HW
    fetch_states = [t.fetch_states()[("t12", 0)] for t in
                    cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()]
    assert [s.truncating for s in fetch_states] == [True]                # paused before it could ask the leader
    _old_leader_dies_and_returns(cluster)
    assert _committed_values(cluster) == [b"m0", b"after"]
    [fetcher] = cluster.brokers[0].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()
    [truncation] = fetcher.truncations
    # the old leader asked where epoch 0 ended on broker 1 (offset 1) and kept m0: not below the leader
    assert (truncation.offset, truncation.reason) == (1, "the end of epoch 0")
    for broker_id in (0, 1):
        entries = cluster.partition(broker_id, "t12").local_replica.epochs.entries()
        assert [(e.epoch, e.start_offset) for e in entries] == [(0, 0), (1, 1)]


def test_a_leader_without_offsets_for_leader_epoch_means_truncating_to_the_high_watermark(make_cluster):
    """The follower falls back to its HW when the leader does not advertise the API: 0.10's loss again."""
    cluster = make_cluster(2, serve_leader_epochs=False, **LONG_FETCH_WAIT)
    assert _acknowledge_m0_then_restart_the_follower(cluster) == 1
    cluster.brokers[1].replica_manager.replica_fetcher_manager.resume()
    wait_until(lambda: [t.fetch_states()[("t12", 0)].truncating for t in
                        cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()]
               == [False], what="the follower to settle")
    [fetcher] = cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()
    assert [(t.offset, t.reason) for t in fetcher.truncations][:1] == [
        (0, "the high watermark (no leader epochs to compare)")]
