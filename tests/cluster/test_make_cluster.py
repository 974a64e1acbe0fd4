"""`make cluster` and `make cluster-stop` as the README gives them (issue 8, 3(b)): the Makefile's own
targets and the shipped `config/zookeeper.properties` and `config/server-{0,1,2}.properties`, run in
a copy of the repository's Makefile and config/ that reuses this virtual environment, on the fixed
ports the files name (2181, 9092 to 9094)."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from external import ZOOKEEPER_JARS, require, wait_for

from kafka_edu.tools.process import (SERVER_PID_FILE, SERVER_PROCESS, ZOOKEEPER_PID_FILE, ZOOKEEPER_PROCESS, read_pid,
                                     running)

pytestmark = pytest.mark.zookeeper

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
PORTS = (2181, 9092, 9093, 9094)
BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"


def free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def make(target: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", target, f"VENV={VENV}"], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def checkout(tmp_path) -> Path:
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")
    require(all(Path(j).exists() for j in ZOOKEEPER_JARS), "Debian's zookeeper package is not installed")
    require(shutil.which("kcat") is not None, "kcat is not installed (apt: kcat)")
    require(all(free(p) for p in PORTS), f"ports {PORTS} must be free for the shipped configuration")
    for name in ("Makefile", "pyproject.toml"):          # copy2 keeps pyproject older than the venv's stamp
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def test_make_cluster_starts_zookeeper_and_three_brokers_that_replicate_and_make_cluster_stop_ends_them(checkout):
    started = make("cluster", checkout)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"Cluster running: bootstrap servers {BOOTSTRAP}" in started.stdout
        zookeeper_pid = read_pid(checkout / "data" / "zookeeper" / ZOOKEEPER_PID_FILE)
        broker_pids = [read_pid(checkout / "data" / f"kafka-logs-{b}" / SERVER_PID_FILE) for b in range(3)]
        assert running(zookeeper_pid, ZOOKEEPER_PROCESS)
        assert all(running(pid, SERVER_PROCESS) for pid in broker_pids)
        assert all((checkout / "data" / "logs" / f"server-{b}.log").exists() for b in range(3))

        def listed():
            out = subprocess.run(["kcat", "-b", "127.0.0.1:9092", "-L", "-J", "-m", "10"], capture_output=True,
                                 text=True, timeout=30)
            brokers = json.loads(out.stdout)["brokers"] if out.returncode == 0 else []
            return sorted((b["id"], b["name"]) for b in brokers)
        wait_for(lambda: listed() == [(0, "127.0.0.1:9092"), (1, "127.0.0.1:9093"), (2, "127.0.0.1:9094")], 60,
                 "three brokers in the metadata")
        created = subprocess.run([str(VENV / "bin" / "kafka-edu"), "topics", "--bootstrap-server", BOOTSTRAP,
                                  "--create", "--topic", "made", "--partitions", "3", "--replication-factor", "3"],
                                 capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stderr
        produced = subprocess.run(["kcat", "-b", BOOTSTRAP, "-P", "-t", "made", "-p", "1", "-X", "acks=all"],
                                  input="one\ntwo\nthree\n", capture_output=True, text=True, timeout=60)
        assert produced.returncode == 0, produced.stderr
        # every broker holds a copy of partition 1: the replicas were placed and the followers fetched
        def copied(broker_id: int) -> int:
            log = checkout / "data" / f"kafka-logs-{broker_id}" / "made-1"
            return sum(f.stat().st_size for f in log.glob("*.log"))
        wait_for(lambda: all(copied(b) > 0 for b in range(3)), 30, "three copies of made-1")
        consumed = subprocess.run(["kcat", "-b", "127.0.0.1:9094", "-C", "-t", "made", "-p", "1", "-o", "beginning",
                                   "-e", "-q"], capture_output=True, text=True, timeout=60)
        assert consumed.stdout.splitlines() == ["one", "two", "three"], consumed.stderr
    finally:
        stopped = make("cluster-stop", checkout)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not running(zookeeper_pid, ZOOKEEPER_PROCESS)
    assert not any(running(pid, SERVER_PROCESS) for pid in broker_pids)
    assert all((checkout / "data" / f"kafka-logs-{b}" / ".kafka_cleanshutdown").exists() for b in range(3))
