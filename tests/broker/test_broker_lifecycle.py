"""KafkaServer start-up and shutdown: files, registration, restarts, identity checks, the figure, and
`kafka-edu server-start` as a process (signals and exit codes)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _broker_client import BrokerClient, records, start_broker, values_of
from external import free_port, made_dir, wait_for

from kafka_edu.server.broker_states import BrokerStates
from kafka_edu.server.kafka_server import BrokerIdentityError
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.viz.broker_request_path import broker_request_path

REPO = Path(__file__).resolve().parents[2]
KAFKA_EDU = str(Path(sys.executable).parent / "kafka-edu")


def kafka_threads(besides: set[threading.Thread] = frozenset()) -> list[str]:
    return sorted(t.name for t in threading.enumerate()
                  if t.name.startswith(("kafka-", "ExpirationReaper", "executor-")) and t.is_alive()
                  and t not in besides)


def test_startup_registers_and_shutdown_leaves_clean_state(tmp_path):
    others = set(threading.enumerate())          # another module's broker may still run (its own ids)
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper, **{"broker.id": 5})
    zk = zookeeper.connect()
    try:
        registration = json.loads(zk.get("/brokers/ids/5")[0])
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{server.bound_port()}"]
        assert (registration["version"], registration["host"], registration["port"]) == (3, "127.0.0.1", server.bound_port())
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 5 and zk.get("/controller_epoch")[0] == b"1"
        meta = (tmp_path / "meta.properties").read_text().splitlines()
        assert "version=0" in meta and "broker.id=5" in meta and f"cluster.id={server.cluster_id}" in meta
        assert json.loads(zk.get("/cluster/id")[0]) == {"version": "1", "id": server.cluster_id}
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("kept", 2)
            client.produce("kept", 1, records(b"one", b"two"))
        assert server.broker_state.current_state == BrokerStates.RUNNING_AS_BROKER
    finally:
        server.shutdown()
    assert server.broker_state.current_state == BrokerStates.NOT_RUNNING
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert "kept 1 2" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert "kept 1 2" in (tmp_path / "replication-offset-checkpoint").read_text()
    assert zk.get_children("/brokers/ids") == []
    assert kafka_threads(besides=others) == []
    zk.close()


@pytest.mark.parametrize("same_tree", [True, False], ids=["same-zookeeper", "fresh-zookeeper"])
def test_restart_keeps_data_without_recovery(tmp_path, same_tree):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper)
    with BrokerClient(server.bound_port()) as client:
        client.create_topic("durable")
        client.produce("durable", 0, records(b"a", b"b", b"c"))
    cluster_id = server.cluster_id
    server.shutdown()
    server = start_broker(tmp_path, zookeeper if same_tree else EmbeddedZooKeeper())
    try:
        assert BrokerStates.RECOVERING_FROM_UNCLEAN_SHUTDOWN not in server.broker_state.history
        assert not (tmp_path / ".kafka_cleanshutdown").exists()          # consumed by the start
        assert server.cluster_id == cluster_id
        partition = server.replica_manager.get_partition(("durable", 0))
        assert partition.high_watermark == 3 and partition.leader_epoch == 1
        with BrokerClient(server.bound_port()) as client:
            assert values_of(client.fetch("durable", 0, 0).records) == [b"a", b"b", b"c"]
            assert client.produce("durable", 0, records(b"d")).base_offset == 3
    finally:
        server.shutdown()


def test_logs_without_znodes_are_registered_again(tmp_path):
    server = start_broker(tmp_path)
    with BrokerClient(server.bound_port()) as client:
        client.create_topic("orphan", 2)
        client.produce("orphan", 1, records(b"x"))
    server.shutdown()
    (tmp_path / "embedded-zookeeper.json").unlink()                      # as after a crash
    server = start_broker(tmp_path)
    try:
        with BrokerClient(server.bound_port()) as client:
            assert [p.partition_index for p in client.metadata(["orphan"]).topics[0].partitions] == [0, 1]
            assert values_of(client.fetch("orphan", 1, 0).records) == [b"x"]
    finally:
        server.shutdown()


def test_identity_mismatch_refuses_to_start_and_stops_everything(tmp_path):
    start_broker(tmp_path).shutdown()
    before = kafka_threads()
    with pytest.raises(BrokerIdentityError, match="does not match the stored broker.id 0"):
        start_broker(tmp_path, **{"broker.id": 7})
    assert kafka_threads() == before


def test_generated_broker_id_is_kept_across_restarts(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper, **{"broker.id": -1})
    assert server.broker_id == 1001
    server.shutdown()
    server = start_broker(tmp_path, zookeeper, **{"broker.id": -1})
    try:
        assert server.broker_id == 1001 and server.controller.is_active
    finally:
        server.shutdown()


def test_request_path_figure_is_drawn_from_the_live_broker(broker, client):
    client.create_topic("figure")
    client.produce("figure", 0, records(b"x"))
    source = broker_request_path(broker, ("figure", 0)).source
    for text in ("Acceptor (PLAINTEXT)", "2 Processors", "of 500 slots used", "4 KafkaRequestHandler threads",
                 "PRODUCE: 1", "CREATE_TOPICS: 1", "Partition figure-0", "log end offset 1"):
        assert text in source
    assert source == broker_request_path(broker, ("figure", 0)).source


def _start_cli(tmp_path, *extra):
    port = free_port()
    proc = subprocess.Popen([KAFKA_EDU, "server-start", str(REPO / "config" / "server.properties"),
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"log.dirs={tmp_path}", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, port


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_server_start_shuts_down_cleanly_on_signals(tmp_path, signum):
    proc, port = _start_cli(tmp_path)
    try:
        def answering():
            try:
                with BrokerClient(port, timeout=2) as client:
                    return client.call(18, 0, {}).error_code == 0
            except OSError:
                return False

        wait_for(answering, timeout=30, what="the broker process")
        proc.send_signal(signum)
        assert proc.wait(30) == 0
        assert (tmp_path / ".kafka_cleanshutdown").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_server_start_exit_codes():
    config = str(REPO / "config" / "server.properties")
    bad_value = subprocess.run([KAFKA_EDU, "server-start", config, "--override", "num.io.threads=many"],
                               capture_output=True, text=True, timeout=60)
    assert bad_value.returncode == 1 and "num.io.threads" in bad_value.stderr
    assert len(bad_value.stderr.strip().splitlines()) == 1
    bad_override = subprocess.run([KAFKA_EDU, "server-start", config, "--override", "no-equals-sign"],
                                  capture_output=True, text=True, timeout=60)
    assert bad_override.returncode == 2 and "KEY=VALUE" in bad_override.stderr
    missing = subprocess.run([KAFKA_EDU, "server-start", "/nonexistent/server.properties"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "/nonexistent/server.properties" in missing.stderr


def test_a_taken_port_fails_start_up_with_one_line(tmp_path):
    blocker = start_broker(tmp_path / "first")
    try:
        result = subprocess.run([KAFKA_EDU, "server-start", str(REPO / "config" / "server.properties"),
                                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{blocker.bound_port()}",
                                 "--override", f"log.dirs={tmp_path / 'second'}"], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1
        assert f"127.0.0.1:{blocker.bound_port()}" in result.stderr.strip().splitlines()[-1]
    finally:
        blocker.shutdown()
    assert os.path.exists(tmp_path / "second" / "meta.properties")


def test_a_halt_during_a_clean_shutdown_leaves_the_logs_as_a_kill_does(tmp_path):
    """In one process the halt hook returns: the shutdown it interrupted must not then write the
    clean-shutdown marker a halted process never would, and the next start recovers the logs."""
    zookeeper = EmbeddedZooKeeper()
    halts = []
    server = start_broker(tmp_path, zookeeper, halt=halts.append)
    with BrokerClient(server.bound_port()) as client:
        client.create_topic("kept", 1)
        client.produce("kept", 0, records(b"one", b"two"))
    refused = tmp_path / "replication-offset-checkpoint.tmp"
    wait_for(lambda: made_dir(refused), 10, "a moment with no checkpoint being written")
    server.shutdown()
    assert halts and halts[0].startswith("error writing the high-watermark checkpoint")
    assert server.broker_state.current_state == BrokerStates.NOT_RUNNING
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    refused.rmdir()
    server = start_broker(tmp_path, zookeeper)
    try:
        assert BrokerStates.RECOVERING_FROM_UNCLEAN_SHUTDOWN in server.broker_state.history
        assert server.replica_manager.get_partition(("kept", 0)).local_replica.log_end_offset == 2
    finally:
        server.shutdown()
