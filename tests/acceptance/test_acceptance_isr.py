"""Acceptance test T7 end to end: a stalled follower leaves the ISR, the leader announces it through
/isr_change_notification, and the controller's UpdateMetadata brings every broker's cache along."""
from __future__ import annotations

from _acceptance import create_topic, produce, state


def cached_isr(cluster, broker_id: int, topic: str) -> list[int]:
    info = cluster.broker(broker_id).metadata_cache.get_partition_info(topic, 0)
    return sorted(info.isr) if info is not None else []


def test_T7_isr_shrink_and_expand_reach_zookeeper_and_every_cache(make_cluster):
    cluster = make_cluster(3, **{"replica.lag.time.max.ms": 1000, "auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "t7", {0: [1, 2, 0]})
    leader = cluster.broker(1).replica_manager
    shrinks, expands = leader.isr_shrinks, leader.isr_expands
    assert cluster.pause_fetchers(2)
    produce(cluster, "t7", ["a", "b"], acks="1")
    cluster.wait_until(lambda: sorted(state(cluster, "t7")[2]) == [0, 1], what="broker 2 out of the ISR in ZooKeeper")
    assert leader.isr_shrinks == shrinks + 1
    # 2.5 s propagation period, 5 s without further changes: within 8 s every cache has it
    cluster.wait_until(lambda: all(cached_isr(cluster, b, "t7") == [0, 1] for b in range(3)), timeout_s=10,
                       what="every MetadataCache showing the smaller ISR")
    cluster.wait_until(lambda: cluster.zk.get_children("/isr_change_notification") == [],
                       what="the notification handled and deleted")
    cluster.resume_fetchers(2)
    cluster.wait_until(lambda: sorted(state(cluster, "t7")[2]) == [0, 1, 2], what="broker 2 back in the ISR")
    assert leader.isr_expands == expands + 1
