"""Figure 4-65's recording and tables 4-6/4-7's ratio on a live in-process cluster: the
ElectionRecorder names each election's trigger (startup, session expiry, /controller deleted) and the
epoch its winner wrote, whoever wins the race; leader_imbalance is the controller's per-broker ratio."""
from __future__ import annotations

from kafka_edu.viz.elections import (CONTROLLER_DELETED, SESSION_EXPIRY, STARTUP, ElectionRecorder, election_timeline,
                                     leader_imbalance)


def test_each_election_is_recorded_with_its_trigger_and_epoch(tmp_path):
    from kafka_edu.server.cluster import InProcessCluster
    cluster = InProcessCluster(3, data_dir=str(tmp_path))
    recorder = ElectionRecorder(cluster.zk_utils)
    try:
        cluster.start()
        first = recorder.wait_for(1)[0]
        assert first == {"controller": 0, "trigger": STARTUP, "epoch": 1}

        cluster.kill(first["controller"])                                        # a crash ends the session
        second = recorder.wait_for(2)[-1]
        assert second["trigger"] == SESSION_EXPIRY and second["epoch"] == 2 and second["controller"] != 0

        cluster.broker(second["controller"]).zk_client.expire_session()          # alive, but its session expired
        third = recorder.wait_for(3)[-1]
        assert third["trigger"] == SESSION_EXPIRY and third["epoch"] == 3

        cluster.wait_until(lambda: third["controller"] in cluster.zk_utils.get_all_broker_ids(), what="re-registration")
        cluster.zk.delete("/controller")                                          # by hand: the winner may be the same
        fourth = recorder.wait_for(4)[-1]
        assert fourth["trigger"] == CONTROLLER_DELETED and fourth["epoch"] == 4
        assert cluster.wait_until(lambda: cluster.zk_utils.get_controller_id() == fourth["controller"])
        assert len(recorder.elections) == 4
        svg = election_timeline(recorder.elections, [0, 1, 2], ["a", "b", "c", "d"]).pipe(format="svg").decode()
        assert svg.count(">controller<") == 4 and "/controller deleted" in svg and "startup" in svg
    finally:
        recorder.close()
        cluster.shutdown()


def test_leader_imbalance_is_the_share_of_preferred_partitions_not_led():
    assignment = {p: [(p + 2) % 3, p % 3, (p + 1) % 3] for p in range(15)}
    leaders = {p: replicas[0] for p, replicas in assignment.items()}
    assert leader_imbalance(assignment, leaders) == {0: 0.0, 1: 0.0, 2: 0.0}
    leaders.update({p: 2 for p in (5, 8, 11, 14)})                               # the book's table 4-6
    assert leader_imbalance(assignment, leaders) == {0: 0.0, 1: 0.8, 2: 0.0}
