"""The broker configuration that ships inside the package: Kafka 0.10's config/server.properties
values on loopback and under ./data, on the embedded ZooKeeper, read when `server-start` is given no file."""
from __future__ import annotations

import signal
import subprocess

import pytest
from compat.broker_process import KAFKA_EDU
from external import wait_for

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.tools.process import DEFAULT_SERVER_PROPERTIES, SERVER_PID_FILE, read_pid, server_properties


def test_the_packaged_default_is_kafkas_server_properties_on_the_embedded_zookeeper():
    config = KafkaConfig(server_properties(None))
    assert config["broker.id"] == 0
    assert [(e.protocol, e.host, e.port) for e in config.listeners] == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.log_dirs == ["./data/kafka-logs"]
    assert (config["num.partitions"], config["log.retention.hours"], config["log.segment.bytes"]) == (1, 168, 1 << 30)
    assert config["zookeeper.connect"] is None and "zookeeper.connect=" not in DEFAULT_SERVER_PROPERTIES


def test_a_named_file_replaces_the_default(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=7\nlog.dirs=./data\n")
    assert server_properties(str(path)) == {"broker.id": "7", "log.dirs": "./data"}
    with pytest.raises(OSError):
        server_properties(str(tmp_path / "missing.properties"))


def test_server_start_without_a_file_runs_a_broker_and_says_where_its_data_lives(tmp_path):
    """`kafka-edu server-start` with no file (the port and directory overridden so the test can run anywhere)."""
    proc = subprocess.Popen([str(KAFKA_EDU), "server-start", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                             "--override", "log.dirs=logs"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("no server.properties given: kafka-edu's packaged default, broker 0 on "
                                "PLAINTEXT://127.0.0.1:0, data in "), first
        assert first.rstrip().endswith(str(tmp_path / "logs"))
        wait_for(lambda: read_pid(tmp_path / "logs" / SERVER_PID_FILE) == proc.pid, timeout=60,
                 what="the broker's pid file")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, proc.stderr.read()
