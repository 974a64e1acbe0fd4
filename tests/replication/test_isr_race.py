"""Beyond 0.10 (after KIP-841): a follower's fetch that reaches the leader after the controller took the
follower out of the ISR does not bring it back, neither from a broker that is no longer alive in the
leader's MetadataCache nor when the fetch was read in an older leader epoch."""
from __future__ import annotations

from _broker_client import records
from _cluster import wait_until

from kafka_edu.server.replica.replica_manager import FetchPartitionInfo
from kafka_edu.server.zk.zk_utils import LeaderAndIsr


def _late_fetch(cluster, topic: str, leader_epoch: int) -> None:
    """Broker 1's fetch from the leader's log end, handled by broker 0 as its request handler would."""
    partition = cluster.partition(0, topic)
    fetch = FetchPartitionInfo(partition.local_replica.log_end_offset, 1 << 20, leader_epoch)
    cluster.brokers[0].replica_manager.fetch_messages(0, 1, 1, 1 << 20, False, [((topic, 0), fetch)],
                                                      lambda responses: None)


def _remove_follower_1(cluster, topic: str, to) -> None:
    """The controller's ISR removal: ISR {0}, leader epoch + 1, announced to the brokers in `to`."""
    current = cluster.zk_utils.get_leader_and_isr(topic, 0).leader_and_isr
    written, _ = cluster.zk_utils.update_leader_and_isr(
        topic, 0, LeaderAndIsr(0, current.leader_epoch + 1, (0,), current.zk_version),
        cluster.zk_utils.get_controller_epoch()[0])
    assert written
    cluster.publish(topic, 0, to=to)


def _replicated(cluster, topic: str) -> None:
    cluster.create_partition(topic, 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce(topic, 0, records(b"a", b"b"), acks=-1).error_code == 0
    wait_until(lambda: cluster.partition(1, topic).local_replica.log_end_offset == 2, what="the follower's copy")


def test_a_late_fetch_from_a_dead_follower_does_not_rejoin_the_isr(make_cluster):
    cluster = make_cluster(2)
    _replicated(cluster, "dead")
    cluster.stop(1)                                        # its registration is gone: not alive any more
    _remove_follower_1(cluster, "dead", to=[0])
    assert cluster.brokers[0].metadata_cache.get_alive_broker(1) is None
    _late_fetch(cluster, "dead", -1)                       # a fetch version without an epoch, to isolate the rule
    assert cluster.partition(0, "dead").in_sync_replicas == {0} and cluster.isr_in_zk("dead") == [0]
    cluster.start(1)                                       # alive again: the same fetch does bring it in
    cluster.publish("dead", 0, to=[0])
    assert cluster.brokers[0].metadata_cache.get_alive_broker(1) is not None
    _late_fetch(cluster, "dead", -1)
    assert cluster.isr_in_zk("dead") == [0, 1]


def test_a_fetch_read_before_the_isr_removal_does_not_undo_it(make_cluster):
    """The interleaving itself: the leader reads the fetch in epoch E, the controller's LeaderAndIsr
    (epoch E+1, ISR {0}) is applied, then the leader records the fetch."""
    cluster = make_cluster(2)
    _replicated(cluster, "race")
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    wait_until(lambda: cluster.isr_in_zk("race") == [0, 1], what="the follower in the ISR")
    partition = cluster.partition(0, "race")
    epoch = partition.leader_epoch
    read_records = partition.read_records

    def read_then_lose_the_race(*args, **kwargs):
        result = read_records(*args, **kwargs)
        _remove_follower_1(cluster, "race", to=[0])
        return result

    partition.read_records = read_then_lose_the_race
    _late_fetch(cluster, "race", epoch)
    partition.read_records = read_records
    assert partition.leader_epoch == epoch + 1
    assert partition.in_sync_replicas == {0} and cluster.isr_in_zk("race") == [0]
    _late_fetch(cluster, "race", epoch + 1)                # a fetch in the new epoch joins as before
    assert cluster.isr_in_zk("race") == [0, 1]
