"""What a controller left unfinished, its successor finishes (onControllerFailover reads
/admin/reassign_partitions and /admin/preferred_replica_election): a reassignment cut off in phase A
by a hard kill of the controller, and requests written while no broker was acting as controller."""
from __future__ import annotations

import json

import pytest
from _controller_cluster import Cluster
from external import wait_for

from kafka_edu.server.zk.zk_utils import CONTROLLER_PATH, PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path, size=4)
    yield cluster
    cluster.shutdown()


def state(cluster, topic, partition):
    return cluster.zk_utils.get_leader_and_isr(topic, partition).leader_and_isr


def assignment(cluster, topic):
    return cluster.zk_utils.get_partition_assignment_for_topics([topic])[topic]


def leads(cluster, broker_id, tp) -> bool:
    partition = cluster.servers[broker_id].replica_manager.get_partition(tp)
    return partition is not None and partition.is_leader


def test_reassignment_interrupted_by_a_controller_kill_is_finished_by_the_next_one(cluster):
    first = cluster.controller()
    a, b, c = (i for i in range(4) if i != first.broker_id)
    zk = cluster.zk_utils
    zk.create_topic_assignment("moving", {0: [a, b]})
    wait_for(lambda: leads(cluster, a, ("moving", 0)), what="moving-0 led by its first replica")
    cluster.servers[c].replica_manager.replica_fetcher_manager.pause()    # the new replica cannot catch up yet
    zk.update_partition_reassignment_data({("moving", 0): [b, c]})
    wait_for(lambda: assignment(cluster, "moving")[0] == [a, b, c], what="phase A: AR = old + new")
    assert c not in state(cluster, "moving", 0).isr

    cluster.servers.pop(first.broker_id).kill()          # its session times out, then /controller goes
    wait_for(lambda: zk.get_controller_id() not in (None, first.broker_id), timeout=20, what="a new controller")
    second = cluster.controller()
    assert second.broker_id != first.broker_id
    assert ("moving", 0) in second.controller.context.partitions_being_reassigned
    cluster.servers[c].replica_manager.replica_fetcher_manager.resume()

    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, timeout=20, what="reassignment finished")
    assert assignment(cluster, "moving")[0] == [b, c]
    finished = state(cluster, "moving", 0)
    assert finished.leader in (b, c) and set(finished.isr) == {b, c}
    assert not second.controller.context.partitions_being_reassigned
    assert any("reassignment completed" in line for line in second.controller.state_change_log)
    wait_for(lambda: not (cluster.tmp_path / f"broker-{a}" / "moving-0").exists(), what="the old replica's log deleted")


def test_requests_written_while_no_controller_acts_are_carried_out_by_the_next_one(cluster):
    """/controller names a broker that does not exist (the controller moved and went silent): nobody
    acts on the admin znodes; once that node goes, the elected controller carries both out."""
    first = cluster.controller()
    x, y, z = (i for i in range(4) if i != first.broker_id)
    zk = cluster.zk_utils
    zk.create_topic_assignment("pref", {0: [x, y]})
    zk.create_topic_assignment("move", {0: [x, y]})
    wait_for(lambda: leads(cluster, x, ("pref", 0)) and leads(cluster, x, ("move", 0)), what="both led by x")
    cluster.stop(x)
    wait_for(lambda: state(cluster, "pref", 0).leader == y, what="pref-0 led by y")
    cluster.start(x)
    wait_for(lambda: x in state(cluster, "pref", 0).isr and x in state(cluster, "move", 0).isr, timeout=20,
             what="x back in the ISRs")
    before = state(cluster, "pref", 0)
    assert before.leader == y

    zk.zk.set(CONTROLLER_PATH, json.dumps({"version": 1, "brokerid": 99, "timestamp": "0"}).encode())
    wait_for(lambda: not any(s.controller.is_active for s in cluster.servers.values()), what="the controller resigned")
    zk.write_preferred_replica_election([("pref", 0)])
    zk.update_partition_reassignment_data({("move", 0): [y, z]})
    assert state(cluster, "pref", 0) == before and assignment(cluster, "move")[0] == [x, y]

    zk.zk.delete(CONTROLLER_PATH)
    successor = cluster.controller()
    wait_for(lambda: zk.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None, what="preferred election done")
    after = state(cluster, "pref", 0)
    assert (after.leader, after.leader_epoch, sorted(after.isr)) == (x, before.leader_epoch + 1, sorted(before.isr))
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, timeout=20, what="reassignment finished")
    assert assignment(cluster, "move")[0] == [y, z]
    assert set(state(cluster, "move", 0).isr) == {y, z}
    assert successor.controller.context.epoch == 2
    wait_for(lambda: leads(cluster, x, ("pref", 0)), what="x leading pref-0 again")
