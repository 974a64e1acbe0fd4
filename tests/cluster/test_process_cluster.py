"""Broker processes on Debian's ZooKeeper: registration, controller failover after SIGKILL, a taken
broker.id, an unreachable ZooKeeper, session expiry, and `kafka-edu server-stop`."""
from __future__ import annotations

import logging
import subprocess
import threading
import time

import pytest
from broker_process import KAFKA_EDU, BrokerProcess
from external import free_port
from process_cluster import ProcessCluster

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.zk_utils import ZkUtils, create_zk_client

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def make_cluster(zookeeper, tmp_path, request):
    clusters = []

    def make(size: int = 3, **overrides) -> ProcessCluster:
        chroot = f"{request.node.name}-{len(clusters)}".replace("[", "-").replace("]", "")
        cluster = ProcessCluster(tmp_path / f"cluster{len(clusters)}", zookeeper.connect, chroot, size, overrides)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.shutdown()


def test_three_brokers_register_one_controller_and_a_sigkill_moves_it(make_cluster):
    cluster = make_cluster(3)
    assert cluster.registered() == [0, 1, 2]
    first = cluster.controller_id()
    assert first in (0, 1, 2)
    assert cluster.zk.get("/controller_epoch")[0] == b"1"
    cluster.kill(first)
    cluster.wait_until(lambda: cluster.controller_id() not in (None, first), what="another controller")
    second = cluster.controller_id()
    assert second in {0, 1, 2} - {first}
    # the new controller writes /controller first and /controller_epoch just after: wait for both
    cluster.wait_until(lambda: cluster.zk.get("/controller_epoch")[0] == b"2", what="controller epoch 2")
    assert cluster.zk.get("/controller_epoch")[0] == b"2"
    assert sorted(cluster.registered()) == sorted({0, 1, 2} - {first})


def test_a_taken_broker_id_exits_with_one_line_naming_it(make_cluster, tmp_path):
    cluster = make_cluster(1)
    twin = BrokerProcess(tmp_path / "twin", {"zookeeper.session.timeout.ms": "2000"}, broker_id=0,
                         zookeeper_connect=cluster.connect)
    result = subprocess.run([str(KAFKA_EDU), "server-start", str(twin.config)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "broker.id 0 is already registered" in lines[0]
    assert cluster.registered() == [0] and cluster.brokers[0].alive


def test_an_unreachable_zookeeper_fails_start_up_after_the_connection_timeout(tmp_path):
    port = free_port()
    broker = BrokerProcess(tmp_path, {"zookeeper.connection.timeout.ms": "1500"},
                           zookeeper_connect=f"127.0.0.1:{port}")
    started = time.monotonic()
    result = subprocess.run([str(KAFKA_EDU), "server-start", str(broker.config)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"kafka-edu server-start: cannot connect to ZooKeeper at 127.0.0.1:{port} within 1500 ms "
        "(zookeeper.connection.timeout.ms)"]
    assert time.monotonic() - started >= 1.5


def test_session_expiry_on_a_real_zookeeper_registers_the_broker_again(zookeeper, tmp_path):
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    config = KafkaConfig({"broker.id": 4, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                          "zookeeper.connect": f"{zookeeper.connect}/session-expiry",
                          "zookeeper.session.timeout.ms": 2000, "offsets.topic.replication.factor": 1})
    server = KafkaServer(config)
    server.startup()
    try:
        old = server.zk_client.session_id
        assert server.zk_client.exists("/brokers/ids/4").ephemeral_owner == old
        server.zk_client.expire_session()
        ProcessCluster.wait_until(lambda: server.zk_client.session_id not in (0, old)
                                  and (stat := server.zk_client.exists("/brokers/ids/4")) is not None
                                  and stat.ephemeral_owner == server.zk_client.session_id,
                                  timeout=20, what="a registration by a new session")
        assert server.controller.is_active or server.zk_utils.get_controller_id() == 4
    finally:
        server.shutdown()


def test_the_controllers_session_expiry_on_a_real_zookeeper_elects_a_controller_and_keeps_both_brokers(
        zookeeper, tmp_path):
    """Two brokers on Debian's ZooKeeper; the controller's session is expired for real (a second client
    attaches to it and closes it): its ephemerals go, a controller is elected with the next epoch, the
    expired broker registers again under a new session, and a partition led by it gets a leader."""
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    connect = f"{zookeeper.connect}/controller-expiry"
    servers, observer = [], None
    try:
        for broker_id in (0, 1):
            config = KafkaConfig({"broker.id": broker_id, "listeners": "PLAINTEXT://127.0.0.1:0",
                                  "log.dirs": str(tmp_path / f"broker-{broker_id}"),
                                  "zookeeper.connect": connect, "zookeeper.session.timeout.ms": 2000,
                                  "offsets.topic.replication.factor": 1})
            servers.append(KafkaServer(config))
            servers[-1].startup()
        observer = create_zk_client({"zookeeper.connect": connect}, name="expiry-observer")
        zk_utils = ZkUtils(observer)
        ProcessCluster.wait_until(lambda: zk_utils.get_controller_id() is not None, what="a controller")
        controller_id, epoch = zk_utils.get_controller_id(), zk_utils.get_controller_epoch()[0]
        expired = servers[controller_id]
        zk_utils.create_topic_assignment("led", {0: [controller_id, 1 - controller_id]})
        ProcessCluster.wait_until(lambda: zk_utils.get_leader_and_isr("led", 0) is not None, what="led-0's leader")
        old_session = expired.zk_client.session_id
        expired.zk_client.expire_session()
        ProcessCluster.wait_until(lambda: zk_utils.get_controller_epoch()[0] > epoch
                                  and zk_utils.get_controller_id() is not None, timeout=20,
                                  what="a controller elected with the next epoch")
        ProcessCluster.wait_until(lambda: expired.zk_client.session_id not in (0, old_session)
                                  and (stat := zk_utils.zk.exists(f"/brokers/ids/{controller_id}")) is not None
                                  and stat.ephemeral_owner == expired.zk_client.session_id,
                                  timeout=20, what="the expired broker registered by its new session")
        assert sorted(zk_utils.get_all_broker_ids()) == [0, 1]
        # the new controller takes office after writing its epoch: wait for exactly one active, the one named
        ProcessCluster.wait_until(lambda: [s.broker_id for s in servers if s.controller.is_active]
                                  == [zk_utils.get_controller_id()], timeout=20, what="one active controller")
        ProcessCluster.wait_until(lambda: zk_utils.get_leader_and_isr("led", 0).leader_and_isr.leader in (0, 1),
                                  timeout=20, what="led-0 led by a live broker")
    finally:
        for server in servers:
            server.shutdown()
        if observer is not None:
            observer.close()


def test_server_stop_stops_the_configured_broker_with_exit_codes(make_cluster):
    cluster = make_cluster(2)
    one = cluster.brokers[1]
    stopped = subprocess.run([str(KAFKA_EDU), "server-stop", "--config", str(one.config)], capture_output=True,
                             text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"stopped broker process {one.proc.pid}"
    assert one.proc.wait(10) == 0 and (one.log_dir / ".kafka_cleanshutdown").exists()
    assert cluster.registered() == [0] and cluster.brokers[0].alive
    again = subprocess.run([str(KAFKA_EDU), "server-stop", "--config", str(one.config)], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1
    usage = subprocess.run([str(KAFKA_EDU), "server-stop"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2


def test_server_stop_moves_every_leadership_away_before_the_broker_leaves(make_cluster):
    """`server-stop` is a controlled shutdown (4.6.9): by the time the stopped broker's registration
    disappears from ZooKeeper, no partition it led is still led by it."""
    cluster = make_cluster(3)
    created = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", cluster.bootstrap, "--create",
                              "--topic", "moving", "--partitions", "3", "--replication-factor", "3"],
                             capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    cluster.wait_until(lambda: all((s := cluster.partition_state("moving", p)) is not None
                                   and len(s.leader_and_isr.isr) == 3 for p in range(3)), what="moving: full ISRs")
    victim = cluster.partition_state("moving", 0).leader_and_isr.leader
    led = [p for p in range(3) if cluster.partition_state("moving", p).leader_and_isr.leader == victim]
    samples: list[tuple[bool, list[int]]] = []
    done = threading.Event()

    def watch():        # (registered?, leaders of the victim's partitions) every 5 ms, until it is gone
        while not done.is_set():
            registered = victim in cluster.registered()
            samples.append((registered, [cluster.partition_state("moving", p).leader_and_isr.leader for p in led]))
            if not registered:
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        stopped = subprocess.run([str(KAFKA_EDU), "server-stop", "--config", str(cluster.brokers[victim].config)],
                                 capture_output=True, text=True, timeout=120)
        cluster.wait_until(lambda: not watcher.is_alive(), 20, what="the victim's registration to go")
    finally:
        done.set()
        watcher.join()
    assert stopped.returncode == 0, stopped.stderr
    assert samples[-1][0] is False                  # the watcher saw the registration go
    still_registered = [leaders for registered, leaders in samples if registered]
    assert still_registered[0] == [victim] * len(led)
    assert victim not in still_registered[-1], samples
