"""Operator requests the controller carries out: preferred-replica election (T16), automatic leader
rebalance (T17), topic deletion with a broker down (T20), and unclean election per topic (T10)."""
from __future__ import annotations

import errno
import os
import threading
import time

import pytest
from _controller_cluster import Cluster
from external import refused, wait_for

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.controller.replica_state_machine import ReplicaState
from kafka_edu.server.zk.zk_utils import PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH


def state(cluster, topic, partition):
    return cluster.zk_utils.get_leader_and_isr(topic, partition).leader_and_isr


def bounce(cluster, broker_id, topic, partitions):
    """Stop and restart a broker, then wait until it is back in the ISR of `partitions`."""
    cluster.stop(broker_id)
    wait_for(lambda: all(state(cluster, topic, p).leader != broker_id for p in partitions), what="leaders moved")
    cluster.start(broker_id)
    wait_for(lambda: all(broker_id in state(cluster, topic, p).isr for p in partitions), timeout=20,
             what=f"broker {broker_id} back in the ISR")


@pytest.fixture
def cluster(tmp_path, request):
    props = getattr(request, "param", {})
    cluster = Cluster(tmp_path, **props)
    yield cluster
    cluster.shutdown()


def test_preferred_replica_election(cluster):
    """T16: leadership moved off AR[0]; the election znode gives it back (ISR kept, epoch + 1) and is
    deleted; a partition whose preferred replica is not in the ISR keeps its leader, and the znode goes too."""
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("pre", {0: [2, 0, 1], 1: [1, 2, 0]})
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("pre", 1) is not None, what="the partitions")
    bounce(cluster, 2, "pre", [0])
    before = state(cluster, "pre", 0)
    assert before.leader == 0
    cluster.zk_utils.write_preferred_replica_election([("pre", 0)])
    wait_for(lambda: cluster.zk_utils.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None, what="znode deleted")
    after = state(cluster, "pre", 0)
    assert (after.leader, after.leader_epoch, sorted(after.isr)) == (2, before.leader_epoch + 1, sorted(before.isr))
    assert controller.preferred_replica_selector.elections == 1

    cluster.stop(1)                          # the preferred replica of pre-1 is gone from the ISR
    wait_for(lambda: 1 not in state(cluster, "pre", 1).isr, what="broker 1 out of the ISR")
    unchanged = state(cluster, "pre", 1)
    cluster.zk_utils.write_preferred_replica_election([("pre", 1)])
    wait_for(lambda: cluster.zk_utils.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None, what="znode deleted")
    assert state(cluster, "pre", 1) == unchanged


@pytest.mark.parametrize("cluster", [{"leader.imbalance.per.broker.percentage": 50}], indirect=True)
def test_rebalance_only_above_the_imbalance_ratio(cluster):
    """T17, the ratio: broker 2 is preferred for three partitions. Not leading one of them (33 %) is
    within 50 %: nothing happens. Not leading any (100 %) elects all three back."""
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("bal", {0: [2, 0, 1], 1: [2, 1, 0], 2: [2, 0, 1]})
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("bal", 2) is not None, what="the partitions")
    bounce(cluster, 2, "bal", [0, 1, 2])
    cluster.zk_utils.write_preferred_replica_election([("bal", 0), ("bal", 1)])
    wait_for(lambda: cluster.zk_utils.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None, what="znode deleted")
    assert [state(cluster, "bal", p).leader for p in range(3)] == [2, 2, 0]
    controller.check_and_trigger_partition_rebalance()
    assert [state(cluster, "bal", p).leader for p in range(3)] == [2, 2, 0]
    assert controller.preferred_replica_selector.elections == 2
    bounce(cluster, 2, "bal", [0, 1, 2])
    controller.check_and_trigger_partition_rebalance()
    assert [state(cluster, "bal", p).leader for p in range(3)] == [2, 2, 2]
    assert controller.preferred_replica_selector.elections == 5


@pytest.mark.parametrize("cluster", [{"auto.leader.rebalance.enable": "true",
                                      "leader.imbalance.check.interval.seconds": 1}], indirect=True)
def test_automatic_rebalance_gives_leadership_back(cluster):
    """T17: with the check every second, partitions preferred by a returning broker are led by it again."""
    cluster.controller()
    cluster.zk_utils.create_topic_assignment("auto", {0: [2, 0, 1], 1: [2, 1, 0], 2: [0, 1, 2]})
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("auto", 2) is not None, what="the partitions")
    bounce(cluster, 2, "auto", [0, 1])
    wait_for(lambda: [state(cluster, "auto", p).leader for p in range(3)] == [2, 2, 0], timeout=10,
             what="the preferred leaders restored")


@pytest.mark.parametrize("cluster", [{"delete.topic.enable": "true"}], indirect=True)
def test_topic_deletion_waits_for_a_dead_replica(cluster):
    """T20: a topic with a replica on a stopped broker stays queued (Ineligible) until that broker
    returns; then every broker forgets it, its logs and znodes are gone."""
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("doomed", {0: [1, 2], 1: [2, 0]})
    cluster.zk_utils.create_topic_assignment("kept", {0: [0, 1]})
    wait_for(lambda: all(s.metadata_cache.contains_topic("doomed") for s in cluster.servers.values()), what="created")
    cluster.stop(2)
    wait_for(lambda: 2 not in controller.context.live_or_shutting_down_broker_ids, what="broker 2 seen dead")
    cluster.zk_utils.mark_topic_for_deletion("doomed")
    rsm = controller.replica_state_machine
    wait_for(lambda: rsm.is_any_replica_in_state("doomed", ReplicaState.DELETION_INELIGIBLE)
             and not rsm.is_any_replica_in_state("doomed", ReplicaState.DELETION_STARTED), what="deletion blocked")
    assert "doomed" in cluster.zk_utils.get_all_topics() and "doomed" in controller.topic_deletion_manager.topics_to_be_deleted
    assert not any(s.metadata_cache.contains_topic("doomed") for s in cluster.servers.values())
    # gone from every metadata cache, not yet from ZooKeeper: the name is still taken, and the error says why
    with ClusterAdmin(f"127.0.0.1:{cluster.controller().bound_port()}") as admin:
        refused_again = admin.create_topics([NewTopic("doomed", 1, 1)])["doomed"]
    assert refused_again.error is Errors.TOPIC_ALREADY_EXISTS and "is marked for deletion" in str(refused_again)
    cluster.start(2)
    wait_for(lambda: "doomed" not in cluster.zk_utils.get_all_topics()
             and cluster.zk_utils.zk.exists("/admin/delete_topics/doomed") is None, what="deletion finished")
    assert not any(s.metadata_cache.contains_topic("doomed") for s in cluster.servers.values())
    for broker_id in range(3):
        logs = os.listdir(cluster.tmp_path / f"broker-{broker_id}")
        assert not [d for d in logs if d.startswith("doomed-")], (broker_id, logs)
    assert all(s.metadata_cache.contains_topic("kept") for s in cluster.servers.values())


@pytest.mark.parametrize("cluster", [{"delete.topic.enable": "true"}], indirect=True)
def test_a_replica_whose_deletion_failed_is_retried_when_its_broker_returns(cluster):
    """A broker whose disk refuses to delete a log answers StopReplica with an error: its replica goes to
    ReplicaDeletionIneligible and the topic waits, as in 0.10, until that broker starts again."""
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("flaky", {0: [1, 2]})
    wait_for(lambda: all(s.metadata_cache.contains_topic("flaky") for s in cluster.servers.values()), what="created")
    log_manager = cluster.servers[1].replica_manager.log_manager

    def refuse(topic, partition):
        raise OSError(errno.EIO, "Input/output error", f"{topic}-{partition}")

    log_manager.delete_log = refuse
    cluster.zk_utils.mark_topic_for_deletion("flaky")
    rsm, deletion = controller.replica_state_machine, controller.topic_deletion_manager
    wait_for(lambda: {r.replica for r in rsm.replicas_in_state("flaky", ReplicaState.DELETION_INELIGIBLE)} == {1}
             and {r.replica for r in rsm.replicas_in_state("flaky", ReplicaState.DELETION_SUCCESSFUL)} == {2}
             and "flaky" in deletion.topics_ineligible_for_deletion,
             what="broker 1's replica ineligible, broker 2's deleted, the topic waiting")
    assert "flaky" in cluster.zk_utils.get_all_topics()
    assert os.path.isdir(cluster.tmp_path / "broker-1" / "flaky-0")
    assert not os.path.exists(cluster.tmp_path / "broker-2" / "flaky-0")
    cluster.stop(1)
    cluster.start(1)                            # its start resumes the deletions it holds up
    wait_for(lambda: "flaky" not in cluster.zk_utils.get_all_topics()
             and cluster.zk_utils.zk.exists("/admin/delete_topics/flaky") is None, what="deletion finished")
    wait_for(lambda: not os.path.exists(cluster.tmp_path / "broker-1" / "flaky-0"), what="broker 1's log deleted")


@pytest.mark.parametrize("cluster", [{"delete.topic.enable": "true"}], indirect=True)
def test_a_broker_that_dies_while_deleting_holds_the_deletion_until_it_returns(cluster):
    """A broker dies (killed) while its StopReplica is in flight: its replica goes from
    ReplicaDeletionStarted to ReplicaDeletionIneligible, and the deletion resumes when it starts again."""
    controller = cluster.controller().controller
    victim = max(b for b in range(3) if b != controller.broker_id)      # not the controller
    keeper = min(b for b in range(3) if b != victim)
    cluster.zk_utils.create_topic_assignment("halfway", {0: [keeper, victim]})
    wait_for(lambda: all(s.metadata_cache.contains_topic("halfway") for s in cluster.servers.values()),
             what="created")
    slow_disk = threading.Event()
    log_manager = cluster.servers[victim].replica_manager.log_manager
    delete_log = log_manager.delete_log

    def stuck(topic, partition):
        slow_disk.wait(20)
        delete_log(topic, partition)

    log_manager.delete_log = stuck
    cluster.zk_utils.mark_topic_for_deletion("halfway")
    rsm, deletion = controller.replica_state_machine, controller.topic_deletion_manager
    wait_for(lambda: {r.replica for r in rsm.replicas_in_state("halfway", ReplicaState.DELETION_STARTED)} == {victim},
             what="the victim's deletion under way, the other one done")
    dying = cluster.servers.pop(victim)
    port = dying.bound_port()
    killer = threading.Thread(target=dying.kill)       # it waits for the handler stuck on the disk
    killer.start()
    wait_for(lambda: refused("127.0.0.1", port) and victim not in cluster.zk_utils.get_all_broker_ids(),
             what="the victim's sockets and registration gone")
    slow_disk.set()                                      # too late: nobody can read its answer
    killer.join(20)
    wait_for(lambda: {r.replica for r in rsm.replicas_in_state("halfway", ReplicaState.DELETION_INELIGIBLE)}
             == {victim} and "halfway" in deletion.topics_ineligible_for_deletion,
             what="the victim's replica ineligible")
    assert "halfway" in cluster.zk_utils.get_all_topics()
    cluster.start(victim)
    wait_for(lambda: "halfway" not in cluster.zk_utils.get_all_topics()
             and cluster.zk_utils.zk.exists("/admin/delete_topics/halfway") is None, what="deletion finished")
    wait_for(lambda: not any((cluster.tmp_path / f"broker-{b}" / "halfway-0").exists() for b in range(3)),
             what="every log deleted")


@pytest.mark.parametrize("cluster", [{"delete.topic.enable": "true"}], indirect=True)
def test_a_topic_under_reassignment_is_deleted_once_the_reassignment_completes(cluster):
    """A reassignment makes its topic ineligible for deletion (0.10): a deletion asked for meanwhile
    waits, starts no StopReplica, and goes ahead when the new replica has caught up."""
    controller = cluster.controller().controller
    zk = cluster.zk_utils
    zk.create_topic_assignment("moving", {0: [0, 1]})
    wait_for(lambda: all(s.metadata_cache.contains_topic("moving") for s in cluster.servers.values()), what="created")
    fetchers = cluster.servers[2].replica_manager.replica_fetcher_manager
    assert fetchers.pause(timeout_s=5)                  # the new replica cannot catch up yet
    zk.update_partition_reassignment_data({("moving", 0): [1, 2]})
    wait_for(lambda: ("moving", 0) in controller.context.partitions_being_reassigned, what="reassignment under way")
    zk.mark_topic_for_deletion("moving")
    deletion, rsm = controller.topic_deletion_manager, controller.replica_state_machine
    wait_for(lambda: "moving" in deletion.topics_to_be_deleted, what="deletion queued")
    time.sleep(0.5)
    assert "moving" in deletion.topics_ineligible_for_deletion and "moving" in zk.get_all_topics()
    assert not rsm.replicas_in_state("moving", ReplicaState.DELETION_STARTED)
    assert (cluster.tmp_path / "broker-0" / "moving-0").is_dir()
    fetchers.resume()
    wait_for(lambda: "moving" not in zk.get_all_topics() and zk.zk.exists("/admin/delete_topics/moving") is None
             and zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, timeout=20, what="reassigned, then deleted")
    wait_for(lambda: not any((cluster.tmp_path / f"broker-{b}" / "moving-0").exists() for b in range(3)),
             what="every log deleted")


def test_deletion_disabled_keeps_the_topic(cluster):
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("stays", {0: [0]})
    wait_for(lambda: cluster.servers[0].metadata_cache.contains_topic("stays"), what="created")
    cluster.zk_utils.mark_topic_for_deletion("stays")
    wait_for(lambda: cluster.zk_utils.zk.exists("/admin/delete_topics/stays") is None, what="request dropped")
    assert "stays" in cluster.zk_utils.get_all_topics() and not controller.topic_deletion_manager.topics_to_be_deleted


def test_unclean_election_follows_the_topic_override(cluster):
    """T10 (controller side): with unclean election off for the topic (broker default on), a partition
    whose only ISR member died stays offline, and its old leader leads again when it returns."""
    controller = cluster.controller().controller
    cluster.zk_utils.change_entity_config("topics", "clean", {"unclean.leader.election.enable": "false"})
    cluster.zk_utils.create_topic_assignment("clean", {0: [2, 1]})
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("clean", 0) is not None, what="created")
    cluster.stop(1)
    wait_for(lambda: state(cluster, "clean", 0).isr == (2,), what="ISR of broker 2 alone")
    cluster.stop(2)
    wait_for(lambda: 2 not in controller.context.live_or_shutting_down_broker_ids, what="broker 2 seen dead")
    cluster.start(1)
    wait_for(lambda: 1 in controller.context.live_broker_ids, what="broker 1 back")
    offline = state(cluster, "clean", 0)
    assert offline.leader == -1 and offline.isr == (2,)              # the last ISR member is kept
    wait_for(lambda: (info := cluster.servers[1].metadata_cache.get_partition_info("clean", 0)) is not None
             and info.leader == -1, what="broker 1 told the partition has no leader")
    cluster.start(2)
    wait_for(lambda: state(cluster, "clean", 0).leader == 2, what="broker 2 leading again")


def test_added_partitions_come_online_and_removed_ones_are_ignored(cluster):
    """T19: a partition added to /brokers/topics/<t> gets its preferred leader; dropping one from the
    JSON changes nothing."""
    controller = cluster.controller().controller
    cluster.zk_utils.create_topic_assignment("grow", {0: [0, 1]})
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("grow", 0) is not None, what="grow-0")
    cluster.zk_utils.create_topic_assignment("grow", {0: [0, 1], 1: [2, 0]}, update=True)
    wait_for(lambda: all((info := s.metadata_cache.get_partition_info("grow", 1)) is not None and info.leader == 2
                         for s in cluster.servers.values()), what="grow-1 online everywhere")
    cluster.zk_utils.create_topic_assignment("grow", {1: [2, 0]}, update=True)
    cluster.zk_utils.zk.await_events()
    cluster.servers[controller.broker_id].zk_client.await_events()
    assert sorted(controller.context.partitions_for_topic("grow")) == [("grow", 0), ("grow", 1)]
    assert cluster.servers[0].metadata_cache.get_partition_info("grow", 0).leader == 0
