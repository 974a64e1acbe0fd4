"""Acceptance tests T5, T10, T11 and T21 on an InProcessCluster: the controller, the replica
managers and the fetchers together, driven only through sockets (admin, producer, consumer)."""
from __future__ import annotations

from _acceptance import consume, create_topic, produce, state


def test_T5_leader_failover_loses_no_acknowledged_record(make_cluster):
    cluster = make_cluster(3)
    create_topic(cluster, "t5", {0: [0, 1, 2]}, **{"min.insync.replicas": 2})
    values = [f"v{i}" for i in range(1000)]
    assert produce(cluster, "t5", values) == list(range(1000))
    leader, epoch, isr = state(cluster, "t5")
    cluster.kill(leader)
    new_leader, new_epoch, new_isr = cluster.wait_until(
        lambda: (s := state(cluster, "t5"))[0] not in (leader, -1) and s, timeout_s=5, what="a new leader")
    assert new_leader in isr and new_epoch == epoch + 1 and leader not in new_isr
    assert consume(cluster, "t5", 1000) == values
