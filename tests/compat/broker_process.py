"""A kafka-edu broker started as its own process, the way a user starts it (`kafka-edu server-start`)."""
from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from external import free_port, stop
from kafka_edu.clients.admin import ClusterAdmin
from kafka_edu.common.protocol.errors import KafkaError
from kafka_edu.tools.process import SERVER_PID_FILE, read_pid

KAFKA_EDU = Path(sys.executable).with_name("kafka-edu")


class BrokerProcess:
    """`kafka-edu server-start` on a free loopback port with its own log directory.

    Without `zookeeper_connect` the broker runs alone on its embedded ZooKeeper. With it, it joins
    the cluster of that ZooKeeper as `broker_id`. The port and directory stay the same across
    `kill()` and `start()`, so a restart finds its data and its clients find it.
    """

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, broker_id: int = 0,
                 zookeeper_connect: str | None = None, extra_listeners: tuple[str, ...] = ()):
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = free_port()
        self.log_dir = workdir / "kafka-logs"
        props = {
            "broker.id": str(broker_id),
            "listeners": ",".join([f"PLAINTEXT://127.0.0.1:{self.port}", *extra_listeners]),
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "delete.topic.enable": "true",
            "offsets.topic.replication.factor": "1",
        }
        if zookeeper_connect:
            props["zookeeper.connect"] = zookeeper_connect
        props.update(overrides or {})
        self.clustered = bool(props.get("zookeeper.connect"))
        self.config = workdir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> "BrokerProcess":
        """Start the process and return at once (see `start` to wait until it serves)."""
        self.log = open(self.workdir / "broker.log", "ab")
        self.proc = subprocess.Popen([str(KAFKA_EDU), "server-start", str(self.config)],
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=self.workdir)
        return self

    def start(self, timeout: float = 60) -> "BrokerProcess":
        """Start the broker and return once it serves.

        Alone, that is once it lists itself and a controller: like Kafka, a broker listens before it
        registers, and a metadata answer listing no broker and no controller then can leave a client
        (librdkafka's admin client, for one) waiting on its slow metadata refresh. In a cluster, it is
        once it has started (registered, pid file written); what its metadata says then depends on the
        controller, which the cluster tests wait for themselves.
        """
        self.launch()
        return self.wait_started(timeout)

    def wait_started(self, timeout: float = 60) -> "BrokerProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output()}")
            if self.started() if self.clustered else self.registered():
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"broker was not registered within {timeout}s:\n{self.output()}")

    def started(self) -> bool:
        return self.proc is not None and read_pid(self.log_dir / SERVER_PID_FILE) == self.proc.pid

    def registered(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            with ClusterAdmin(self.bootstrap, request_timeout_ms=1000) as probe:
                cluster = probe.describe_cluster()
                return cluster.controller is not None and bool(cluster.nodes)
        except (OSError, TimeoutError, KafkaError):
            return False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        return (self.workdir / "broker.log").read_text(errors="replace")[-4000:]

    def stop(self) -> int | None:
        if self.proc is not None:
            stop(self.proc, grace=20)
            self.log.close()
            return self.proc.returncode
        return None

    def limit_file_size(self, limit: int) -> None:
        """A disk that refuses writes: from now on, any write of this process that would take a file past
        `limit` bytes fails (RLIMIT_FSIZE, soft limit only; Python turns it into EFBIG, not a signal)."""
        _, hard = resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (limit, hard))

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.log.close()
