"""Broker processes (`kafka-edu server-start`) forming one cluster on a real ZooKeeper.

Each cluster gets its own chroot on the shared test ZooKeeper, so clusters of different tests never
see each other. The cluster reads ZooKeeper through a session of its own, as the brokers do.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker_process import BrokerProcess

from kafka_edu.server.zk.zk_utils import ZkUtils, create_zk_client

# Fast failure detection: a SIGKILLed broker's session ends 2 s after its last heartbeat.
CLUSTER_DEFAULTS = {"zookeeper.session.timeout.ms": "2000", "num.network.threads": "1", "num.io.threads": "4",
                    "log.cleaner.enable": "false", "controlled.shutdown.retry.backoff.ms": "200",
                    "replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "100",
                    "replica.high.watermark.checkpoint.interval.ms": "500"}


class ProcessCluster:
    """`size` broker processes, ids 0..size-1, sharing `connect` + a chroot of their own."""

    def __init__(self, workdir: Path, zookeeper_connect: str, chroot: str, size: int = 3,
                 overrides: dict[str, str] | None = None):
        self.connect = f"{zookeeper_connect}/{chroot}"
        props = {**CLUSTER_DEFAULTS, "offsets.topic.replication.factor": str(min(3, size)), **(overrides or {})}
        self.brokers = [BrokerProcess(workdir / f"broker-{i}", props, broker_id=i, zookeeper_connect=self.connect)
                        for i in range(size)]
        self.zk = create_zk_client({"zookeeper.connect": self.connect}, name="process-cluster-observer")
        self.zk_utils = ZkUtils(self.zk)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive)

    def start(self, timeout: float = 60) -> "ProcessCluster":
        for broker in self.brokers:
            broker.launch()
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.wait_started(timeout), self.brokers))
        self.wait_until(lambda: self.zk_utils.get_controller_id() is not None, what="a controller")
        return self

    def registered(self) -> list[int]:
        return self.zk_utils.get_all_broker_ids()

    def controller_id(self) -> int | None:
        return self.zk_utils.get_controller_id()

    def partition_state(self, topic: str, partition: int):
        return self.zk_utils.get_leader_and_isr(topic, partition)

    def kill(self, broker_id: int) -> None:
        """SIGKILL, then wait until ZooKeeper expired its session (its registration is gone)."""
        self.brokers[broker_id].kill()
        self.wait_until(lambda: broker_id not in self.registered(), timeout=20, what=f"broker {broker_id}'s session expiry")

    def restart(self, broker_id: int, timeout: float = 60) -> None:
        self.brokers[broker_id].start(timeout)

    @staticmethod
    def wait_until(condition, timeout: float = 30, what: str = "the condition", interval: float = 0.05):
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s")
            time.sleep(interval)

    def shutdown(self) -> None:
        for broker in self.brokers:
            broker.kill()
        self.zk.close()
