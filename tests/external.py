"""External components the suite relies on: free loopback ports, Debian's ZooKeeper started
standalone, librdkafka's mock cluster held by a child process, and `require()`.

Components the suite cannot provide itself are checked with `require()`: a developer's machine
without them skips with the reason, but CI (`CI=true`) fails, so a missing install step can never
hide behind a green run. Fixtures wrapping these live in conftest.py.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
ZOOKEEPER_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"]
CHROMIUM = "/usr/bin/chromium"              # Debian's chromium
CHROMEDRIVER = "/usr/bin/chromedriver"      # Debian's chromium-driver


def require(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI, when a component the test needs is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def require_chromium() -> None:
    """Debian's chromium with its WebDriver, for the test of the rendered book."""
    require(os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK),
            f"{CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)")


_handed_out: set[int] = set()


def _port_range() -> tuple[int, int]:
    """Ports 20000 to 32000, below Linux's ephemeral range (32768 and up), split between pytest-xdist's
    workers (gw0, gw1, ...): a broker stopped for a restart keeps its port, and no other worker may take it."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    # a worker xdist starts in place of a crashed one (gw2 of two) shares the last range
    worker = min(int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]), workers - 1)
    width = 12000 // workers
    return 20000 + worker * width, 20000 + (worker + 1) * width - 1


def free_port() -> int:
    """A loopback port free right now, where no outgoing connection of a busy test run can take it
    before its server binds it; never the same port twice in one run, nor on two workers."""
    low, high = _port_range()
    while True:
        port = random.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port


def interruptible(argv: list[str]) -> list[str]:
    """`argv` started with SIGINT at its default, so that Ctrl-C raises KeyboardInterrupt in it. A suite
    started in the background of a non-interactive shell (`make test &`, a CI runner) ignores SIGINT,
    every child inherits that, and a test that interrupts a command must not depend on how it was started."""
    reset = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", reset, *argv]


def wait_for(predicate, timeout: float = 10.0, what: str = "condition", interval: float = 0.01):
    """Poll `predicate` until it returns something true (returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"{what} not ready after {timeout}s")


def refused(host: str, port: int) -> bool:
    """Nothing listens at host:port (the connection is refused)."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:      # a listener closing as the probe connects: not refused yet, ask again
        pass
    return False


def made_dir(path: Path) -> bool:
    """mkdir; False while something stands at `path` (a checkpoint write's temporary file, say)."""
    try:
        path.mkdir()
        return True
    except FileExistsError:
        return False


def four_letter(port: int, word: bytes, limit: int = 64) -> bytes:
    """Send a four-letter word and read the answer until the server closes (or `limit` bytes)."""
    answer = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(word)
            while len(answer) < limit and (chunk := s.recv(limit - len(answer))):
                answer += chunk
    except OSError:
        pass
    return answer


def stop(proc: subprocess.Popen, grace: float = 10) -> None:
    """Terminate a child and wait for it, killing it if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class ZooKeeperServer:
    """Debian's ZooKeeper started standalone on a free port.

    It is ready once `srvr` reports a mode: `ruok` answers `imok` as soon as the port accepts,
    before the database is loaded, so a client connecting then can hang or be dropped.
    Test data needs no durability, so `forceSync=no` keeps a slow disk's fsync (which on
    ext4 waits for every dirty page other tests left behind) off the session-creation path.
    """

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.workdir = workdir
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        self.config = workdir / "zoo.cfg"
        self.config.write_text(textwrap.dedent(f"""\
            tickTime=500
            dataDir={workdir / 'data'}
            clientPort={self.port}
            clientPortAddress=127.0.0.1
            admin.enableServer=false
            4lw.commands.whitelist=ruok,srvr,stat,mntr
            minSessionTimeout=1000
            """))
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ZooKeeperServer":
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", ":".join(ZOOKEEPER_JARS),
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.forceSync=no",
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.config)],
            stdout=subprocess.DEVNULL, stderr=open(self.workdir / "zookeeper.log", "wb"))
        try:
            wait_for(lambda: self.proc.poll() is not None or self.serving(), 60, "ZooKeeper")
        except TimeoutError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError("ZooKeeper exited: " + (self.workdir / "zookeeper.log").read_text()[-2000:])
        return self

    def serving(self) -> bool:
        return b"Mode: " in four_letter(self.port, b"srvr", 4096)

    def stop(self) -> None:
        if self.proc:
            stop(self.proc)



MOCK_HOLDER = textwrap.dedent("""\
    import sys
    from confluent_kafka import Producer
    holder = Producer({"test.mock.num.brokers": int(sys.argv[1])})
    md = holder.list_topics(timeout=10)
    print(",".join(f"{b.host}:{b.port}" for b in sorted(md.brokers.values(), key=lambda b: b.id)),
          flush=True)
    sys.stdin.read()      # hold the cluster until the parent closes our stdin
    """)


class MockCluster:
    """librdkafka's mock cluster, kept alive by a child process that holds a Producer."""

    def __init__(self, brokers: int = 3):
        self.proc = subprocess.Popen([sys.executable, "-c", MOCK_HOLDER, str(brokers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line:
            stop(self.proc)
            raise RuntimeError("mock cluster holder exited before printing its bootstrap servers")
        self.bootstrap = line

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in self.bootstrap.split(","))]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                stop(self.proc)
