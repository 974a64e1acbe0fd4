"""The acks=all round trip (book 4.5.3-4.5.4): a produce wakes the follower fetches parked in the
leader's fetch purgatory, and the follower's next fetch completes the waiting DelayedProduce.

The follower's parked fetch waits 30 s and the produce only 15 s, so the produce can succeed only
if the append woke the parked fetch and the HW advance completed the DelayedProduce: if either
waited for a timeout, the produce would answer REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from _broker_client import records
from _cluster import wait_until

PARKED = {"replica.fetch.wait.max.ms": 30_000, "replica.lag.time.max.ms": 60_000}


def parked_follower_fetches(cluster, topic: str) -> int:
    return cluster.brokers[0].replica_manager.delayed_fetch_purgatory.watch_counts().get((topic, 0), 0)


def test_a_produce_wakes_parked_follower_fetches_and_their_next_fetch_acknowledges_it(make_cluster):
    cluster = make_cluster(3, **PARKED)
    cluster.create_partition("wake", 0, [0, 1, 2])
    leader = cluster.brokers[0].replica_manager
    with cluster.client(0) as client:
        for n, value in enumerate((b"first", b"second", b"third"), start=1):
            wait_until(lambda: parked_follower_fetches(cluster, "wake") == 2, 20, "both follower fetches to park")
            response = client.produce("wake", 0, records(value), acks=-1, timeout_ms=15_000)
            assert (response.error_code, response.base_offset) == (0, n - 1)
            assert cluster.partition(0, "wake").high_watermark == n
    assert not leader.delayed_produce_expirations
    assert leader.delayed_fetch_expirations["follower"] == 0
