"""`make cluster` and `make cluster-stop` as the README gives them (issue 8, 3(b)): the Makefile's own
targets and the shipped `config/zookeeper.properties` and `config/server-{0,1,2}.properties`, run in
a copy of the repository's Makefile and config/ on the fixed ports the files name (2181, 9092 to
9094). The copy uses this virtual environment and skips `install` (`make -o install`): installing is
what the whole suite's `make test` has just done, and a copy must not re-point the environment."""
from __future__ import annotations

import json
import os
import shutil
import signal
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


def make(target: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-o", "install", target, f"VENV={VENV}"], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def pids(checkout: Path) -> list[tuple[int | None, str]]:
    """(pid from its pid file, process kind) of ZooKeeper and the three brokers of the copy."""
    data = checkout / "data"
    return [(read_pid(data / "zookeeper" / ZOOKEEPER_PID_FILE), ZOOKEEPER_PROCESS),
            *((read_pid(data / f"kafka-logs-{b}" / SERVER_PID_FILE), SERVER_PROCESS) for b in range(3))]


def stop_all(checkout: Path) -> tuple[subprocess.CompletedProcess | None, list[int]]:
    """`make cluster-stop`, and the pids that still ran after it (or after it timed out), now killed so
    that no process keeps the fixed ports from the next run."""
    try:
        stopped = make("cluster-stop", checkout, timeout=200)
    except subprocess.TimeoutExpired:
        stopped = None
    killed = [pid for pid, kind in pids(checkout) if running(pid, kind)]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    return stopped, killed


@pytest.fixture
def checkout(tmp_path) -> Path:
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")
    require(all(Path(j).exists() for j in ZOOKEEPER_JARS), "Debian's zookeeper package is not installed")
    require(shutil.which("kcat") is not None, "kcat is not installed (apt: kcat)")
    require(shutil.which("make") is not None, "make is not installed (apt: make)")
    require(all(free(p) for p in PORTS), f"ports {PORTS} must be free for the shipped configuration")
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def test_make_cluster_starts_zookeeper_and_three_brokers_that_replicate_and_make_cluster_stop_ends_them(checkout):
    try:
        started = make("cluster", checkout)
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"Cluster running: bootstrap servers {BOOTSTRAP}" in started.stdout
        processes = pids(checkout)
        assert all(running(pid, kind) for pid, kind in processes)
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
        stopped, killed = stop_all(checkout)
        assert stopped is not None and stopped.returncode == 0, stopped and stopped.stdout + stopped.stderr
        assert killed == []                         # cluster-stop alone ended every process
    finally:
        stop_all(checkout)
    assert all((checkout / "data" / f"kafka-logs-{b}" / ".kafka_cleanshutdown").exists() for b in range(3))
