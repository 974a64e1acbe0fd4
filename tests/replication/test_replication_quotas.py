"""Beyond 0.10 (KIP-73, book 4.5.8): replication quotas. The manager's rate on a mock clock; a leader
that answers a throttled follower outside the ISR with no data, over a real socket, once the
throttle it reads from ZooKeeper is exceeded, and parks its fetch for the whole wait instead of
answering it at once (the tool-driven move is in tests/tools)."""
from __future__ import annotations

import pytest
from _broker_client import records, values_of
from _cluster import wait_until

from kafka_edu.common.metrics.metrics import Metrics
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.errors import ConfigError
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.replica.replication_quota_manager import (ALL_REPLICAS, UNBOUNDED_RATE, ReplicationQuotaManager,
                                                                ReplicationQuotas, throttled_partitions)


def test_a_burst_counts_at_once_and_ages_out_after_the_windows():
    clock = MockTime()
    quota = ReplicationQuotaManager(Metrics(time=clock), "LeaderReplication", samples=11, window_ms=1000)
    quota.record(5000)
    assert not quota.is_quota_exceeded()                  # unbounded: never measured against anything
    quota.update_quota(4000)
    assert quota.is_quota_exceeded()                      # 5000 B in its first second: 5000 B/s, not 500
    clock.sleep(2000)
    assert not quota.is_quota_exceeded()                  # 5000 B over 2 s
    quota.record(6000)
    assert quota.is_quota_exceeded()                      # 11000 B over 2 s
    clock.sleep(11_000)
    assert not quota.is_quota_exceeded()                  # every window that held them has passed


def test_throttled_replica_lists_name_partitions_of_this_broker():
    assert throttled_partitions("0:1, 1:2,2:1,", 1) == frozenset({0, 2})
    assert throttled_partitions(" * ", 7) == ALL_REPLICAS
    assert throttled_partitions("", 1) == frozenset()
    quotas = ReplicationQuotas.create(Metrics(time=MockTime()))
    quotas.apply_topic_config("t", LogConfig.from_props({"leader.replication.throttled.replicas": "3:1",
                                                         "follower.replication.throttled.replicas": "*"}), 1)
    assert [quotas.leader.is_throttled(("t", p)) for p in (2, 3)] == [False, True]
    assert quotas.follower.is_throttled(("t", 9)) and not quotas.follower.is_throttled(("u", 0))
    quotas.apply_topic_config("t", LogConfig(), 1)        # the lists removed: nothing throttled
    assert not quotas.leader.is_throttled(("t", 3)) and not quotas.follower.is_throttled(("t", 9))
    quotas.apply_broker_config({"leader.replication.throttled.rate": "100", "follower.replication.throttled.rate": "x"})
    assert (quotas.leader.bound, quotas.follower.bound) == (100, UNBOUNDED_RATE)
    with pytest.raises(ConfigError, match="follower.replication.throttled.replicas"):
        LogConfig.from_props({"follower.replication.throttled.replicas": "1:two"})


def test_a_leader_holds_back_a_throttled_follower_outside_the_isr(make_cluster):
    cluster = make_cluster(1)
    cluster.create_partition("q", 0, [0, 1], isr=[0])         # broker 1 is a replica that is behind
    cluster.create_partition("q", 1, [0, 1], isr=[0, 1])      # broker 1 in sync here
    with cluster.client(0) as client:
        for partition in (0, 1):
            assert client.produce("q", partition, records(b"a" * 500, b"b" * 500)).error_code == 0
        cluster.zk_utils.change_entity_config("topics", "q", {"leader.replication.throttled.replicas": "*"})
        cluster.zk_utils.change_entity_config("brokers", "0", {"leader.replication.throttled.rate": "1"})
        quota = cluster.brokers[0].replica_manager.quotas.leader
        wait_until(lambda: quota.bound == 1 and quota.is_throttled(("q", 0)), what="the throttle applied")

        first = client.fetch("q", 0, 0, replica_id=1)             # under the quota still: the data comes
        assert values_of(first.records) == [b"a" * 500, b"b" * 500] and quota.is_quota_exceeded()
        held = client.fetch("q", 0, 0, replica_id=1)
        assert held.error_code == 0 and not held.records and held.high_watermark == 2
        replica_manager = cluster.brokers[0].replica_manager
        expired = replica_manager.delayed_fetch_expirations["follower"]
        parked = client.fetch("q", 0, 0, replica_id=1, max_wait_ms=100)   # waits in the purgatory, no busy loop
        assert not parked.records                                 # (the reaper counts it just after answering)
        wait_until(lambda: replica_manager.delayed_fetch_expirations["follower"] == expired + 1, what="expiry")
        in_sync = client.fetch("q", 1, 0, replica_id=1)           # an ISR member is never held back
        assert values_of(in_sync.records) == [b"a" * 500, b"b" * 500]
        as_consumer = client.fetch("q", 0, 0)                     # nor is a consumer
        assert values_of(as_consumer.records) == [b"a" * 500, b"b" * 500]

        cluster.zk_utils.change_entity_config("brokers", "0", {})   # the rate removed: unbounded again
        wait_until(lambda: quota.bound == UNBOUNDED_RATE, what="the rate removed")
        assert values_of(client.fetch("q", 0, 0, replica_id=1).records) == [b"a" * 500, b"b" * 500]


def test_a_throttled_follower_behind_by_a_segment_is_parked_too(make_cluster):
    """A fetch position on an older segment than the log end would complete a parked fetch at once;
    for a held-back follower that answer is empty, so it waits for `max_wait_ms` instead of spinning."""
    cluster = make_cluster(1)
    small = {"segment.bytes": "600"}
    cluster.create_partition("s", 0, [0, 1], isr=[0], config=small)
    with cluster.client(0) as client:
        for value in (b"a", b"b", b"c"):
            assert client.produce("s", 0, records(value * 500)).error_code == 0
        assert len(cluster.partition(0, "s").local_replica.log.segments) >= 2
        cluster.zk_utils.change_entity_config("topics", "s", {**small, "leader.replication.throttled.replicas": "*"})
        cluster.zk_utils.change_entity_config("brokers", "0", {"leader.replication.throttled.rate": "1"})
        quota = cluster.brokers[0].replica_manager.quotas.leader
        wait_until(lambda: quota.bound == 1 and quota.is_throttled(("s", 0)), what="the throttle applied")
        assert values_of(client.fetch("s", 0, 0, replica_id=1).records) and quota.is_quota_exceeded()
        replica_manager = cluster.brokers[0].replica_manager
        expired = replica_manager.delayed_fetch_expirations["follower"]
        parked = client.fetch("s", 0, 0, replica_id=1, max_wait_ms=200)
        assert not parked.records
        wait_until(lambda: replica_manager.delayed_fetch_expirations["follower"] == expired + 1, what="expiry")


def test_a_partition_no_longer_followed_takes_its_lag_along(make_cluster):
    cluster = make_cluster(2)
    cluster.create_partition("g", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("g", 0, records(b"x"), acks=1).error_code == 0
    [fetcher] = cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()
    wait_until(lambda: fetcher.lag.get(("g", 0)) == 0, what="the follower's first answer")
    cluster.brokers[1].replica_manager.replica_fetcher_manager.remove_fetcher_for_partitions([("g", 0)])
    assert ("g", 0) not in fetcher.lag and ("g", 0) not in fetcher.fetch_states()
