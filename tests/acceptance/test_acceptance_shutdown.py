"""Acceptance test T15: a controlled shutdown (4.6.9) under a running producer, end to end."""
from __future__ import annotations

from _acceptance import BackgroundProducer, consume, create_topic, state

ASSIGNMENT = {0: [1, 0, 2], 1: [1, 2, 0], 2: [0, 1, 2]}


def test_T15_controlled_shutdown_moves_leaders_first_and_loses_nothing(make_cluster):
    cluster = make_cluster(3, **{"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": 2000})
    create_topic(cluster, "t15", ASSIGNMENT, **{"min.insync.replicas": 2})
    create_topic(cluster, "single", {0: [1]})
    with BackgroundProducer(cluster, "t15", list(ASSIGNMENT)) as producer:
        assert producer.progressing(cluster)
        assert cluster.broker(1).controlled_shutdown() is True          # partitions_remaining = []
        assert cluster.live_brokers == [0, 1, 2]                        # it still runs
        assert all(state(cluster, "t15", p)[0] in [r for r in replicas if r != 1] for p, replicas in ASSIGNMENT.items())
        # a fetch broker 1 sent before its StopReplica can put it back for a moment (0.10 has that
        # race); the leader's ISR expiry then drops it for good
        cluster.wait_until(lambda: all(1 not in state(cluster, "t15", p)[2] for p in ASSIGNMENT),
                           what="broker 1 out of every ISR")
        assert state(cluster, "single")[0] == 1                         # one replica: nowhere to move
        assert producer.progressing(cluster)
        cluster.stop(1)
        assert producer.progressing(cluster)
    assert producer.failed == []
    for p in ASSIGNMENT:
        read = consume(cluster, "t15", len(producer.acknowledged[p]), partition=p)
        assert set(producer.acknowledged[p]) <= set(read)
