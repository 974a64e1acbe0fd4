"""`kafka-edu zookeeper-start/-stop` and `server-start --daemon` as a user runs them: exit codes,
one-line errors, pid files."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from broker_process import KAFKA_EDU
from external import ZOOKEEPER_JARS, free_port, require

from kafka_edu.tools.process import (SERVER_PID_FILE, SERVER_PROCESS, ZOOKEEPER_PID_FILE, ZOOKEEPER_PROCESS, read_pid,
                                     running)


def kafka_edu(*args, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def zookeeper_config(tmp_path) -> Path:
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")
    require(all(Path(j).exists() for j in ZOOKEEPER_JARS), "Debian's zookeeper package is not installed")
    config = tmp_path / "zookeeper.properties"
    config.write_text(f"dataDir=./zk-data\nclientPort={free_port()}\nclientPortAddress=127.0.0.1\n"
                      "admin.enableServer=false\ntickTime=500\n")
    return config


@pytest.mark.zookeeper
def test_zookeeper_start_and_stop_in_the_background(zookeeper_config, tmp_path):
    started = kafka_edu("zookeeper-start", "--daemon", "zookeeper.properties", cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        pid = read_pid(tmp_path / "zk-data" / ZOOKEEPER_PID_FILE)
        assert f"(pid {pid}," in started.stdout
        again = kafka_edu("zookeeper-start", "--daemon", "zookeeper.properties", cwd=tmp_path)
        assert again.returncode == 1
        assert again.stderr.strip() == f"kafka-edu zookeeper-start: ZooKeeper is already running (pid {pid})"
    finally:
        stopped = kafka_edu("zookeeper-stop", "zookeeper.properties", cwd=tmp_path)
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"stopped ZooKeeper (pid {pid})"
    gone = kafka_edu("zookeeper-stop", "zookeeper.properties", cwd=tmp_path)
    assert gone.returncode == 1 and len(gone.stderr.strip().splitlines()) == 1


def test_zookeeper_start_without_java_or_settings_is_one_line_and_status_1(tmp_path):
    config = tmp_path / "zookeeper.properties"
    config.write_text("dataDir=./zk-data\nclientPort=2999\n")
    no_java = kafka_edu("zookeeper-start", "zookeeper.properties", cwd=tmp_path, env={"JAVA_HOME": "/nonexistent"})
    assert no_java.returncode == 1
    assert no_java.stderr.strip().splitlines() == [
        "kafka-edu zookeeper-start: no Java runtime: install one (apt: openjdk-17-jre-headless) or set JAVA_HOME"]
    config.write_text("clientPort=2999\n")
    no_data_dir = kafka_edu("zookeeper-start", "zookeeper.properties", cwd=tmp_path)
    assert no_data_dir.returncode == 1 and "sets no dataDir" in no_data_dir.stderr
    missing = kafka_edu("zookeeper-start", "nonexistent.properties", cwd=tmp_path)
    assert missing.returncode == 1 and "cannot read nonexistent.properties" in missing.stderr
    assert kafka_edu("zookeeper-start", "a.properties", "b.properties", cwd=tmp_path).returncode == 2


@pytest.mark.zookeeper
def test_server_start_daemon_reports_the_brokers_own_error(zookeeper, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=logs\n"
                      f"zookeeper.connect={zookeeper.connect}/daemon-test\noffsets.topic.replication.factor=1\n")
    started = kafka_edu("server-start", "--daemon", "--log-file", "broker.log", "server.properties", cwd=tmp_path)
    pid = read_pid(tmp_path / "logs" / SERVER_PID_FILE)
    try:
        assert started.returncode == 0, started.stderr
        assert running(pid, SERVER_PROCESS) and f"(pid {pid}," in started.stdout
        (tmp_path / "twin.properties").write_text(config.read_text().replace("log.dirs=logs", "log.dirs=twin"))
        twin = kafka_edu("server-start", "--daemon", "--log-file", "twin.log", "twin.properties", cwd=tmp_path)
        assert twin.returncode == 1
        assert twin.stderr.strip().splitlines() == [
            "kafka-edu server-start: broker.id 0 is already registered in ZooKeeper by another session "
            "(/brokers/ids/0): another broker uses this id, or this broker restarted before its previous "
            "session expired"]
    finally:
        stopped = kafka_edu("server-stop", "--config", "server.properties", cwd=tmp_path)
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"stopped broker process {pid}"
    assert not running(pid, SERVER_PROCESS) and not (tmp_path / "logs" / SERVER_PID_FILE).exists()


@pytest.mark.zookeeper
def test_zookeeper_start_without_a_file_runs_the_packaged_default(zookeeper_config, tmp_path):
    """No config/: port 2181 on loopback, data under ./data/zookeeper, the written file named on stdout."""
    started = kafka_edu("zookeeper-start", "--daemon", cwd=tmp_path)
    written = tmp_path / "data" / "zookeeper" / "zookeeper.properties"
    try:
        assert started.returncode == 0, started.stderr
        assert f"packaged default, written to {written}" in started.stdout
        assert "serving on 127.0.0.1:2181" in started.stdout
        assert running(read_pid(tmp_path / "data" / "zookeeper" / ZOOKEEPER_PID_FILE), ZOOKEEPER_PROCESS)
    finally:
        stopped = kafka_edu("zookeeper-stop", str(written), cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
