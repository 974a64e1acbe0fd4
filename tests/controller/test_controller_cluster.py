"""The controller drives every broker over the wire: acceptance tests T1, T2, T15, T21 and a broker failure."""
from __future__ import annotations

import json

import pytest
from _controller_cluster import Cluster, partition_views
from external import wait_for

from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.controller.partition_state_machine import PartitionState
from kafka_edu.server.controller.replica_state_machine import ReplicaState
from kafka_edu.server.zk.zk_utils import LeaderAndIsr

ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 1, 0]}


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path)
    yield cluster
    cluster.shutdown()


def agreed_views(cluster, topic, partitions):
    """Every broker's view of `topic`, once they all agree and every replica knows its role."""
    def check():
        views = [partition_views(s, topic) for s in cluster.servers.values()]
        caches = [v["cache"] for v in views]
        return views if all(c == caches[0] and len(c) == partitions for c in caches) else None
    return wait_for(check, timeout=10, what=f"all brokers agreeing on {topic}")


def roles_match(cluster, topic, partitions, leaving=()):
    """Every broker caches all `partitions`, and each hosted replica's Partition has the cache's leader
    and leader epoch (except on brokers `leaving`: a replica taken offline hears no more LeaderAndIsr)."""
    for broker_id, server in cluster.servers.items():
        if broker_id in leaving:
            continue
        cache = server.metadata_cache.get_partitions(topic) or {}
        if len(cache) != partitions:
            return False
        for p, state in cache.items():
            if broker_id not in state.replicas:
                continue
            partition = server.replica_manager.get_partition((topic, p))
            if partition is None or (partition.leader_replica_id, partition.leader_epoch) != (state.leader, state.leader_epoch):
                return False
    return True


def test_topic_creation_reaches_every_broker(cluster):
    """T1: the state znodes, identical metadata caches, leaders and followers made, state machines Online."""
    controller = cluster.controller()
    cluster.zk_utils.create_topic_assignment("test", ASSIGNMENT)
    views = agreed_views(cluster, "test", 3)
    epoch = controller.controller.context.epoch
    for p, replicas in ASSIGNMENT.items():
        state = json.loads(cluster.zk_utils.zk.get(f"/brokers/topics/test/partitions/{p}/state")[0])
        assert state == {"version": 1, "leader": replicas[0], "leader_epoch": 0, "controller_epoch": epoch,
                         "isr": replicas}
        assert views[0]["cache"][p] == (replicas[0], 0, tuple(replicas), tuple(replicas))
    wait_for(lambda: roles_match(cluster, "test", 3), what="every replica made leader or follower")
    for broker_id, server in cluster.servers.items():
        for p, replicas in ASSIGNMENT.items():
            partition = server.replica_manager.get_partition(("test", p))
            assert partition.is_leader == (replicas[0] == broker_id)
    psm, rsm = controller.controller.partition_state_machine, controller.controller.replica_state_machine
    assert [psm.state_of(("test", p)) for p in range(3)] == [PartitionState.ONLINE] * 3
    assert [s for r, s in rsm.states.items() if r.topic == "test"] == [ReplicaState.ONLINE] * 9
    sent = controller.controller.sent_requests
    assert all(sent[(ApiKeys.LEADER_AND_ISR, b)] >= 1 and sent[(ApiKeys.UPDATE_METADATA, b)] >= 1 for b in range(3))


def test_controller_failover_after_session_expiry(cluster):
    """T2: one /controller, epoch 1; expire its session -> another broker wins with epoch 2 and
    every broker's metadata cache names it."""
    first = cluster.controller()
    assert json.loads(cluster.zk_utils.zk.get("/controller")[0])["brokerid"] == first.broker_id
    assert cluster.zk_utils.zk.get("/controller_epoch")[0] == b"1"
    cluster.zk_utils.create_topic_assignment("t2", {0: [first.broker_id, (first.broker_id + 1) % 3]})
    wait_for(lambda: all(s.metadata_cache.contains_topic("t2") for s in cluster.servers.values()), what="t2")
    cluster.zookeeper.expire_session(first.zk_client.session_id)
    wait_for(lambda: cluster.zk_utils.get_controller_epoch()[0] == 2, what="epoch 2")
    second = cluster.controller()
    assert second.controller.context.epoch == 2
    assert sum(s.controller.is_active for s in cluster.servers.values()) == 1
    wait_for(lambda: all(s.metadata_cache.controller_id == second.broker_id for s in cluster.servers.values()),
             what="every cache naming the new controller")
    wait_for(lambda: all(s.replica_manager.controller_epoch == 2 for s in cluster.servers.values()
                         if s.replica_manager.all_partitions), what="partition hosts at epoch 2")


def test_broker_failure_moves_leadership_and_shrinks_isr(cluster):
    controller = cluster.controller()
    victim = next(b for b in (1, 2) if b != controller.broker_id)
    cluster.zk_utils.create_topic_assignment("f", {0: [victim, controller.broker_id], 1: [controller.broker_id, victim]})
    agreed_views(cluster, "f", 2)
    cluster.stop(victim)
    def moved():
        state = cluster.zk_utils.get_leader_and_isr("f", 0)
        other = cluster.zk_utils.get_leader_and_isr("f", 1)
        return state.leader_and_isr.leader == controller.broker_id and victim not in state.leader_and_isr.isr \
            and victim not in other.leader_and_isr.isr
    wait_for(moved, what="leader moved and ISR shrunk")
    expected = (controller.broker_id, 1, (controller.broker_id,))
    wait_for(lambda: all(partition_views(s, "f")["cache"][0][:3] == expected for s in cluster.servers.values()),
             what="every cache showing the new leader")
    wait_for(lambda: roles_match(cluster, "f", 2), what="new leader made")


def test_restarted_broker_gets_metadata_before_leader_and_isr(cluster):
    """T21: the returning broker's first controller request is UpdateMetadata with every partition."""
    controller = cluster.controller()
    victim = next(b for b in (0, 1, 2) if b != controller.broker_id)
    cluster.zk_utils.create_topic_assignment("r", {0: [victim, controller.broker_id], 1: [controller.broker_id, victim]})
    agreed_views(cluster, "r", 2)
    cluster.stop(victim)
    wait_for(lambda: victim not in controller.controller.context.live_or_shutting_down_broker_ids, what="failure seen")
    before = controller.controller.state_changes_recorded
    cluster.start(victim)

    def sends_to_victim():
        since = controller.controller.state_changes_recorded - before
        return [line for line in list(controller.controller.state_change_log)[-since:]
                if line.startswith("send ") and f"to broker {victim}:" in line]
    wait_for(lambda: any(line.startswith("send LEADER_AND_ISR") for line in sends_to_victim()),
             what="a LeaderAndIsr for the returning broker")
    wait_for(lambda: roles_match(cluster, "r", 2), what="the returning broker knowing its roles")
    sends = sends_to_victim()
    assert sends[0].startswith("send UPDATE_METADATA") and "r-0, r-1" in sends[0]
    assert any(line.startswith("send LEADER_AND_ISR") for line in sends[1:])
    partition = cluster.servers[victim].replica_manager.get_partition(("r", 1))
    assert not partition.is_leader and partition.leader_replica_id == controller.broker_id


def test_controlled_shutdown_moves_leadership_away(cluster):
    """T15 (controller side): broker 1 leads two RF=3 partitions; shutdown_broker moves them and takes
    1 out of every ISR; an RF=1 partition stays and is not reported."""
    controller = cluster.controller()
    target = next(b for b in (1, 2) if b != controller.broker_id)
    others = [b for b in (0, 1, 2) if b != target]
    cluster.zk_utils.create_topic_assignment("cs", {0: [target, *others], 1: [target, *others[::-1]],
                                                    2: [others[0], target, others[1]], 3: [target]})
    agreed_views(cluster, "cs", 4)
    remaining = controller.controller.shutdown_broker(target)
    assert remaining == set()
    for p in range(3):
        state = cluster.zk_utils.get_leader_and_isr("cs", p).leader_and_isr
        assert state.leader != target and target not in state.isr and state.leader in others
    assert cluster.zk_utils.get_leader_and_isr("cs", 3).leader_and_isr.leader == target
    assert target not in controller.controller.context.live_broker_ids
    wait_for(lambda: roles_match(cluster, "cs", 4, leaving=[target]), what="brokers told about the new leaders")


def test_broker_shutdown_asks_for_controlled_shutdown(cluster):
    """T15 end to end: a broker stopping with controlled.shutdown.enable has, before it exits, handed
    over every partition it led and left every ISR; the controller answered over the wire."""
    controller = cluster.controller()
    target = next(b for b in (1, 2) if b != controller.broker_id)
    others = [b for b in (0, 1, 2) if b != target]
    cluster.zk_utils.create_topic_assignment("bye", {0: [target, *others], 1: [others[0], target, others[1]]})
    agreed_views(cluster, "bye", 2)
    handled = controller.apis.request_counts[ApiKeys.CONTROLLED_SHUTDOWN]
    cluster.stop(target, controlled=True)
    assert controller.apis.request_counts[ApiKeys.CONTROLLED_SHUTDOWN] == handled + 1
    for p in range(2):
        state = cluster.zk_utils.get_leader_and_isr("bye", p).leader_and_isr
        assert state.leader in others and target not in state.isr


def test_isr_change_notification_refreshes_every_cache(cluster):
    """A leader that changed an ISR writes /isr_change_notification/isr_change_N; the controller re-reads
    the partition, sends UpdateMetadata to all brokers and deletes the notification."""
    controller = cluster.controller()
    cluster.zk_utils.create_topic_assignment("isr", {0: [1, 2, 0]})
    agreed_views(cluster, "isr", 1)
    current = cluster.zk_utils.get_leader_and_isr("isr", 0).leader_and_isr
    shrunk = LeaderAndIsr(current.leader, current.leader_epoch, (1, 0), current.zk_version)
    assert cluster.zk_utils.update_leader_and_isr("isr", 0, shrunk, controller.controller.context.epoch)[0]
    cluster.zk_utils.propagate_isr_changes([TopicPartition("isr", 0)])
    wait_for(lambda: all(s.metadata_cache.get_partition_info("isr", 0).isr == (1, 0) for s in cluster.servers.values()),
             what="every cache showing the smaller ISR")
    wait_for(lambda: cluster.zk_utils.zk.get_children("/isr_change_notification") == [], what="notification deleted")


def test_deleted_controller_znode_means_a_new_election(cluster):
    """Figure 4-65's second trigger: /controller disappears (an operator deleted it); the controller
    resigns, every broker runs, one wins with the next epoch and every broker hears of it."""
    first = cluster.controller()
    cluster.zk_utils.zk.delete("/controller")
    wait_for(lambda: cluster.zk_utils.get_controller_epoch()[0] == 2, what="epoch 2")
    second = cluster.controller()
    # the old controller resigns on its own ZooKeeper event thread, maybe after the new one has won
    wait_for(lambda: sum(s.controller.is_active for s in cluster.servers.values()) == 1, what="one active controller")
    assert second.controller.context.epoch == 2
    if second is not first:
        wait_for(lambda: first.controller.channel_manager is None
                 and not first.controller.partition_state_machine.has_started, what="the old controller resigned")
    wait_for(lambda: all(s.metadata_cache.controller_id == second.broker_id for s in cluster.servers.values()),
             what="every cache naming the controller")
