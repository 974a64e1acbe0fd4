"""A cluster whose ZooKeeper and brokers sit at addresses other than 127.0.0.1, started the way a
user starts one across machines (issue 8, 3(c)): `kafka-edu zookeeper-start` and `server-start`
with properties that name hosts, `topics`, `server-stop`, and real clients.

One machine cannot be three, but it can withhold the one address a hidden assumption would use.
ZooKeeper listens only on this machine's network interface (a loopback address of its own where
there is none), brokers 0 and 1 only on loopback addresses of their own (127.0.0.11, 127.0.0.12), so
nothing answers at 127.0.0.1 or `localhost` on their ports. Broker 2 listens on every interface and
advertises the interface's address, as a broker on another host would (it does answer at 127.0.0.1).
A connection to ZooKeeper, to broker 0 or to broker 1 (brokers to ZooKeeper, the controller to each
broker, followers to leaders, clients after their bootstrap) that did not take its address from
configuration or from ZooKeeper would fail the test.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from broker_process import KAFKA_EDU
from external import ZOOKEEPER_JARS, free_port, refused, require, wait_for

from kafka_edu.server.zk.zk_utils import ZkUtils, create_zk_client
from kafka_edu.tools.process import (SERVER_PID_FILE, SERVER_PROCESS, ZOOKEEPER_PID_FILE, ZOOKEEPER_PROCESS, read_pid,
                                     running)

pytestmark = pytest.mark.zookeeper

SIOCGIFADDR = 0x8915


def interface_address() -> str | None:
    """The IPv4 address of this machine's first network interface other than loopback, if any."""
    for _, name in socket.if_nameindex():
        if name == "lo":
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:                     # an interface without an IPv4 address
                continue
        return socket.inet_ntoa(answer[20:24])
    return None


def kafka_edu(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), *argv], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def hosts():
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")
    require(all(Path(j).exists() for j in ZOOKEEPER_JARS), "Debian's zookeeper package is not installed")
    pytest.importorskip("confluent_kafka")
    outside = interface_address() or "127.0.0.10"
    return {"zookeeper": outside, 0: "127.0.0.11", 1: "127.0.0.12", 2: outside}


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def test_a_cluster_across_addresses_serves_replicates_and_fails_over(hosts, tmp_path, kcat):
    zk_port, ports = free_port(), {b: free_port() for b in range(3)}
    zk_config = write_properties(tmp_path / "zookeeper.properties", {
        "dataDir": "./zk-data", "clientPort": str(zk_port), "clientPortAddress": hosts["zookeeper"],
        "tickTime": "500", "admin.enableServer": "false"})
    connect = f"{hosts['zookeeper']}:{zk_port}/kafka-edu"
    configs = {}
    for b in range(3):
        listener = f"PLAINTEXT://{hosts[b]}:{ports[b]}"
        configs[b] = write_properties(tmp_path / f"server-{b}.properties", {
            "broker.id": str(b), "log.dirs": f"./kafka-logs-{b}", "zookeeper.connect": connect,
            "listeners": f"PLAINTEXT://:{ports[b]}" if b == 2 else listener,
            **({"advertised.listeners": listener} if b == 2 else {}),
            "zookeeper.session.timeout.ms": "2000", "replica.fetch.wait.max.ms": "100",
            "replica.lag.time.max.ms": "3000", "offsets.topic.replication.factor": "3",
            "min.insync.replicas": "2", "unclean.leader.election.enable": "false", "delete.topic.enable": "true"})
    bootstrap = {b: f"{hosts[b]}:{ports[b]}" for b in range(3)}
    started = kafka_edu("zookeeper-start", "--daemon", zk_config.name, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    zk = None
    try:
        for b in range(3):
            launched = kafka_edu("server-start", "--daemon", configs[b].name, cwd=tmp_path)
            assert launched.returncode == 0, launched.stderr
        zk = create_zk_client({"zookeeper.connect": connect}, name="across-addresses-observer")
        zk_utils = ZkUtils(zk)
        wait_for(lambda: zk_utils.get_all_broker_ids() == [0, 1, 2] and zk_utils.get_controller_id() is not None,
                 60, "three registered brokers and a controller")
        registered = {b: zk_utils.get_broker_info(b) for b in range(3)}
        assert {b: (info.host, info.port) for b, info in registered.items()} == \
            {b: (hosts[b], ports[b]) for b in range(3)}
        # Nothing of this cluster answers where a hidden "localhost" would look.
        assert refused("127.0.0.1", ports[0]) and refused("127.0.0.1", ports[1]) and refused("127.0.0.1", zk_port)

        created = kafka_edu("topics", "--bootstrap-server", bootstrap[0], "--create", "--topic", "spread",
                            "--partitions", "3", "--replication-factor", "3", cwd=tmp_path)
        assert created.returncode == 0, created.stderr

        def full_isr():
            states = [zk_utils.get_leader_and_isr("spread", p) for p in range(3)]
            return all(s is not None and sorted(s.leader_and_isr.isr) == [0, 1, 2] for s in states)
        wait_for(full_isr, 60, "spread: every ISR complete")

        # Every broker describes the same cluster, under the addresses it registered.
        for b in range(3):
            listed = json.loads(subprocess.run([kcat, "-b", bootstrap[b], "-L", "-J", "-t", "spread", "-m", "10"],
                                               capture_output=True, text=True, timeout=30, check=True).stdout)
            assert sorted((x["id"], x["name"]) for x in listed["brokers"]) == sorted(bootstrap.items())
            assert sorted(len(p["isrs"]) for t in listed["topics"] for p in t["partitions"]) == [3, 3, 3]

        acked = produce(bootstrap[1], range(300))
        victim = zk_utils.get_leader_and_isr("spread", 0).leader_and_isr.leader
        os.kill(read_pid(tmp_path / f"kafka-logs-{victim}" / SERVER_PID_FILE), signal.SIGKILL)
        wait_for(lambda: victim not in zk_utils.get_all_broker_ids(), 30, f"broker {victim}'s session expiry")
        wait_for(lambda: zk_utils.get_leader_and_isr("spread", 0).leader_and_isr.leader not in (victim, -1), 30,
                 "a new leader of spread-0")
        survivor = next(b for b in range(3) if b != victim)
        acked += produce(bootstrap[survivor], range(300, 600))
        restarted = kafka_edu("server-start", "--daemon", configs[victim].name, cwd=tmp_path)
        assert restarted.returncode == 0, restarted.stderr
        wait_for(full_isr, 60, f"broker {victim} back in every ISR")     # it fetched from leaders by address
        assert consume(bootstrap[2], len(acked)) == sorted(acked)

        for b in range(3):
            stopped = kafka_edu("server-stop", "--config", configs[b].name, cwd=tmp_path)
            assert stopped.returncode == 0, stopped.stderr          # ControlledShutdown to the controller
    finally:
        if zk is not None:
            zk.close()
        for b in range(3):              # whatever a failure left running (a stale pid file is skipped)
            pid = read_pid(tmp_path / f"kafka-logs-{b}" / SERVER_PID_FILE)
            if running(pid, SERVER_PROCESS):
                os.kill(pid, signal.SIGKILL)
        kafka_edu("zookeeper-stop", zk_config.name, cwd=tmp_path)
        pid = read_pid(tmp_path / "zk-data" / ZOOKEEPER_PID_FILE)
        if running(pid, ZOOKEEPER_PROCESS):
            os.kill(pid, signal.SIGKILL)


def produce(bootstrap: str, numbers: range) -> list[tuple[int, bytes]]:
    """(partition, value) of every record acknowledged with acks=all, dealt to the three partitions in turn."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 60_000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000})
    acked: list[tuple[int, bytes]] = []

    def delivered(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.value()))

    for i in numbers:
        producer.produce("spread", f"r{i}".encode(), partition=i % 3, on_delivery=delivered)
    assert producer.flush(90) == 0
    assert len(acked) == len(numbers)
    return acked


def consume(bootstrap: str, expected: int) -> list[tuple[int, bytes]]:
    """Every record of the topic, read with kafka-python from one bootstrap broker."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        partitions = [TopicPartition("spread", p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        found: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(found) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                found.extend((record.partition, record.value) for record in batch)
        return sorted(found)
    finally:
        consumer.close()
