"""InProcessCluster: hard kills, restarts, clean stops and the halt hook, on real sockets and files."""
from __future__ import annotations

import os
import time

import pytest
from _broker_client import BrokerClient, records, values_of
from external import refused

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.server.kafka_server import BrokerRegistrationError, KafkaServer
from kafka_edu.server.log.offset_checkpoint import OffsetCheckpoint

ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}


def create(cluster, name: str, assignment: dict[int, list[int]]) -> None:
    with ClusterAdmin(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(name, replica_assignment=assignment)]) == {name: None}
    cluster.wait_until(lambda: all(cluster.partition_state(name, p) for p in assignment), what=f"{name}'s leaders")


def leader(cluster, topic: str, partition: int) -> int:
    return cluster.partition_state(topic, partition).leader_and_isr.leader


def test_kill_drops_sockets_and_registration_and_leaves_no_marker(make_cluster):
    cluster = make_cluster(3, **{"replica.lag.time.max.ms": 2000})
    create(cluster, "k", ASSIGNMENT)
    victim = cluster.broker(2)
    with BrokerClient(cluster.ports[2]) as client:
        cluster.kill(2)
        assert client.closed_by_peer(timeout=5)
    assert refused("127.0.0.1", cluster.ports[2])
    assert cluster.zk.get_children("/brokers/ids") == ["0", "1"]
    assert cluster.live_brokers == [0, 1]
    log_dir = victim.config.log_dirs[0]
    assert not os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    cluster.wait_until(lambda: leader(cluster, "k", 2) == 0, what="k-2's leader moving to broker 0")
    # the controller takes it out of the ISRs; a fetch it sent just before dying that reaches a leader
    # afterwards does not put it back (Beyond 0.10: it is not alive, and its fetch's leader epoch has ended)
    cluster.wait_until(lambda: all(2 not in cluster.partition_state("k", p).leader_and_isr.isr for p in range(3)),
                       what="broker 2 out of every ISR")


def test_a_killed_broker_is_found_out_only_when_its_session_times_out(make_cluster):
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000})
    create(cluster, "late", ASSIGNMENT)
    killed_at = time.monotonic()
    cluster.kill(2, wait=False)
    assert cluster.zk.get_children("/brokers/ids") == ["0", "1", "2"]     # a killed process says nothing
    assert leader(cluster, "late", 2) == 2
    cluster.await_session_end(2)
    assert time.monotonic() - killed_at >= 2.9                          # not before the timeout
    cluster.wait_until(lambda: leader(cluster, "late", 2) == 0, what="late-2's leader moving to broker 0")
    cluster.kill(1, wait=False)
    server = cluster.restart(1)            # waits for the old session to end instead of being refused
    assert "RECOVERING_FROM_UNCLEAN_SHUTDOWN" in [s.name for s in server.broker_state.history]
    assert cluster.zk.get("/brokers/ids/1")[1].ephemeral_owner == server.zk_client.session_id


def test_killing_the_controller_elects_another(make_cluster):
    cluster = make_cluster(3)
    assert cluster.controller().broker_id == 0
    create(cluster, "c", ASSIGNMENT)
    cluster.kill(0)
    successor = cluster.wait_until(cluster.controller, what="a new controller")
    assert successor.broker_id in (1, 2)
    assert cluster.zk.get("/controller_epoch")[0] == b"2"
    cluster.wait_until(lambda: leader(cluster, "c", 0) == 1, what="c-0's leader moving to broker 1")
    state = cluster.partition_state("c", 0)
    assert state.controller_epoch == 2 and state.leader_and_isr.leader_epoch >= 1


def test_restart_recovers_the_same_directories_on_the_same_port(make_cluster):
    cluster = make_cluster(1)
    create(cluster, "r", {0: [0]})
    port = cluster.ports[0]
    with BrokerClient(port) as client:
        assert client.produce("r", 0, records(b"a", b"b", b"c")).error_code == 0
    cluster.kill(0)
    server = cluster.restart(0)
    assert cluster.ports[0] == port and server.bound_port() == port
    assert "RECOVERING_FROM_UNCLEAN_SHUTDOWN" in [s.name for s in server.broker_state.history]
    assert cluster.zk.get_children("/brokers/ids") == ["0"]
    assert server.replica_manager.get_partition(("r", 0)).is_leader
    with BrokerClient(port) as client:
        assert values_of(client.fetch("r", 0, 0).records) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_kill_writes_no_high_watermark_checkpoint_a_clean_stop_does(make_cluster, how):
    """The checkpoint is written on its schedule (not within this test) and by a clean stop, never by a kill."""
    cluster = make_cluster(1, **{"replica.high.watermark.checkpoint.interval.ms": 600_000})
    create(cluster, "hw", {0: [0]})
    path = os.path.join(cluster.broker(0).config.log_dirs[0], "replication-offset-checkpoint")
    with BrokerClient(cluster.ports[0]) as client:
        assert client.produce("hw", 0, records(b"a", b"b", b"c")).error_code == 0
    assert cluster.broker(0).replica_manager.get_partition(("hw", 0)).high_watermark == 3
    assert not os.path.exists(path)
    getattr(cluster, how)(0)
    if how == "kill":
        assert not os.path.exists(path)
    else:
        assert OffsetCheckpoint(path).read()[("hw", 0)] == 3


def test_stop_is_a_clean_shutdown(make_cluster):
    cluster = make_cluster(2)
    cluster.stop(1)
    assert os.path.exists(os.path.join(cluster.broker(1).config.log_dirs[0], ".kafka_cleanshutdown"))
    assert cluster.live_brokers == [0] and cluster.zk.get_children("/brokers/ids") == ["0"]
    cluster.restart(1)
    assert "RECOVERING_FROM_UNCLEAN_SHUTDOWN" not in [s.name for s in cluster.broker(1).broker_state.history]


def test_halt_kills_only_that_broker(make_cluster):
    cluster = make_cluster(2)
    cluster.broker(1).replica_manager.halt("leader's log is shorter than ours")
    cluster.wait_until(lambda: cluster.live_brokers == [0], what="broker 1 halted")
    assert cluster.halted == {1: "leader's log is shorter than ours"}
    cluster.await_session_end(1)            # a halted process says no goodbye: its session times out
    assert cluster.zk.get_children("/brokers/ids") == ["0"]


def test_a_taken_broker_id_is_refused_and_leaves_nothing_running(make_cluster, tmp_path):
    cluster = make_cluster(1)
    twin = KafkaServer(cluster.config(0).__class__({**cluster.config(0).originals, "log.dirs": str(tmp_path / "twin"),
                                                    "listeners": "PLAINTEXT://127.0.0.1:0"}),
                       embedded_zookeeper=cluster.zookeeper)
    with pytest.raises(BrokerRegistrationError, match=r"broker\.id 0 is already registered"):
        twin.startup()
    assert twin.broker_state.current_state.name == "NOT_RUNNING"
    assert cluster.zk.get("/brokers/ids/0")[1].ephemeral_owner == cluster.broker(0).zk_client.session_id


def test_session_expiry_registers_the_broker_again(make_cluster):
    cluster = make_cluster(2)
    server = cluster.broker(1)
    old_session = server.zk_client.session_id
    cluster.zookeeper.expire_session(old_session)
    cluster.wait_until(lambda: (stat := server.zk_client.exists("/brokers/ids/1")) is not None
                       and stat.ephemeral_owner == server.zk_client.session_id != old_session,
                       what="a registration by the new session")
    assert cluster.zk.get_children("/brokers/ids") == ["0", "1"]


def test_kill_and_restart_leave_no_threads_behind(make_cluster):
    import threading

    def settled() -> list[str]:
        """The thread names once they stop changing (the controller adds a send thread per broker it hears of)."""
        names = None
        while names != (names := sorted(t.name for t in threading.enumerate())):
            time.sleep(0.5)
        return names

    cluster = make_cluster(2)
    cluster.kill(1)
    cluster.restart(1)
    running = settled()
    for _ in range(3):
        cluster.kill(1)
        cluster.restart(1)
    try:
        cluster.wait_until(lambda: threading.active_count() == len(running), timeout_s=10, what="as many threads")
    except TimeoutError:
        pass
    assert settled() == running


def test_paused_fetchers_send_nothing_until_resumed(make_cluster):
    cluster = make_cluster(3)
    create(cluster, "paused", {0: [0, 1, 2]})
    cluster.wait_until(lambda: len(cluster.partition_state("paused", 0).leader_and_isr.isr) == 3, what="full ISR")
    leader_partition = cluster.broker(0).replica_manager.get_partition(("paused", 0))
    cluster.wait_until(lambda: leader_partition.assigned_replica_map[1].log_end_offset == 0, what="broker 1 fetching")
    follower = cluster.broker(1).replica_manager.get_partition(("paused", 0))
    assert cluster.pause_fetchers(1) is True
    with BrokerClient(cluster.ports[0]) as client:
        assert client.produce("paused", 0, records(b"x", b"y"), acks=1).error_code == 0
        cluster.wait_until(lambda: leader_partition.assigned_replica_map[2].log_end_offset == 2, what="broker 2")
        time.sleep(1.0)   # twice replica.fetch.wait.max.ms: a running fetcher would have fetched by now
        assert follower.local_replica.log_end_offset == 0
        assert leader_partition.assigned_replica_map[1].log_end_offset == 0 and leader_partition.high_watermark == 0
        assert values_of(client.fetch("paused", 0, 0).records) == []      # nothing above the high watermark
        cluster.resume_fetchers(1)
        cluster.wait_until(lambda: leader_partition.high_watermark == 2, what="the high watermark after resuming")
        assert follower.local_replica.log_end_offset == 2
        assert values_of(client.fetch("paused", 0, 0).records) == [b"x", b"y"]


def test_controlled_shutdown_moves_leadership_while_the_broker_still_runs(make_cluster):
    cluster = make_cluster(3, **{"replica.lag.time.max.ms": 2000})
    create(cluster, "moving", {0: [1, 0, 2], 1: [1, 2, 0], 2: [1, 0, 2]})
    create(cluster, "single", {0: [1]})
    cluster.wait_until(lambda: all(len(cluster.partition_state("moving", p).leader_and_isr.isr) == 3
                                   for p in range(3)), what="full ISRs")
    assert cluster.broker(1).controlled_shutdown() is True
    assert cluster.zk.get_children("/brokers/ids") == ["0", "1", "2"]        # it has not gone yet
    assert all(leader(cluster, "moving", p) in (0, 2) for p in range(3))
    # the controller also took broker 1 out of the ISRs, but a fetch broker 1 sent before its StopReplica
    # arrived can put it back into one (a 0.10 race) until the leader's ISR expiry drops it again
    cluster.wait_until(lambda: all(1 not in cluster.partition_state("moving", p).leader_and_isr.isr for p in range(3)),
                       what="broker 1 out of every ISR")
    assert leader(cluster, "single", 0) == 1                                # one replica: nowhere to move
    cluster.stop(1)
    assert cluster.live_brokers == [0, 2]


def test_a_restarted_follower_catches_up_and_rejoins_the_isr(make_cluster):
    cluster = make_cluster(3, **{"replica.lag.time.max.ms": 2000})
    create(cluster, "rejoin", {0: [0, 1, 2]})
    with BrokerClient(cluster.ports[0]) as client:
        assert client.produce("rejoin", 0, records(b"a", b"b"), acks=-1).error_code == 0
        cluster.kill(2)
        cluster.wait_until(lambda: 2 not in cluster.partition_state("rejoin", 0).leader_and_isr.isr, what="ISR shrink")
        assert client.produce("rejoin", 0, records(b"c", b"d", b"e"), acks=-1).error_code == 0
    server = cluster.restart(2)
    cluster.wait_until(lambda: 2 in cluster.partition_state("rejoin", 0).leader_and_isr.isr, what="broker 2 back in the ISR")
    log = server.log_manager.get_log("rejoin", 0)
    assert log.log_end_offset == 5
    with BrokerClient(cluster.ports[0]) as client:
        assert values_of(client.fetch("rejoin", 0, 0).records) == [b"a", b"b", b"c", b"d", b"e"]


def test_a_late_halt_leaves_the_restarted_broker_alone(make_cluster):
    cluster = make_cluster(2)
    old_halt = cluster.broker(1).replica_manager.halt
    old_halt("first")
    cluster.wait_until(lambda: cluster.live_brokers == [0], what="broker 1 halted")
    cluster.restart(1)
    old_halt("late: queued behind the first")           # the killed server's hook, called once more
    time.sleep(0.5)
    assert cluster.live_brokers == [0, 1] and cluster.halted == {}
