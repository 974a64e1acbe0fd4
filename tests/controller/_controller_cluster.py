"""A small in-process cluster for the controller tests: N KafkaServers sharing one embedded ZooKeeper."""
from __future__ import annotations

import logging

from external import wait_for

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils

# A killed broker's session times out after 2 s (Kafka: 6), as in the other harnesses.
CLUSTER_DEFAULTS = {"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 1, "num.io.threads": 2,
                    "log.cleaner.enable": "false",
                    "auto.leader.rebalance.enable": "false", "offsets.topic.replication.factor": 1,
                    "controlled.shutdown.retry.backoff.ms": 100, "zookeeper.session.timeout.ms": 2000}


class Cluster:
    """Brokers 0..n-1 with their own log directories under `tmp_path`."""

    def __init__(self, tmp_path, size: int = 3, **props):
        logging.getLogger("kafka_edu").setLevel(logging.WARNING)
        self.tmp_path = tmp_path
        self.props = props
        self.zookeeper = EmbeddedZooKeeper()
        self.zk_utils = ZkUtils(self.zookeeper.connect("test"))
        self.servers: dict[int, KafkaServer] = {}
        for broker_id in range(size):
            self.start(broker_id)

    def config(self, broker_id: int) -> KafkaConfig:
        return KafkaConfig({**CLUSTER_DEFAULTS, "broker.id": broker_id,
                            "log.dirs": str(self.tmp_path / f"broker-{broker_id}"), **self.props})

    def start(self, broker_id: int) -> KafkaServer:
        server = KafkaServer(self.config(broker_id), embedded_zookeeper=self.zookeeper)
        server.startup()
        self.servers[broker_id] = server
        return server

    def stop(self, broker_id: int, controlled: bool = False) -> None:
        """Stop a broker; without `controlled` the controller only sees its registration vanish."""
        self.servers.pop(broker_id).shutdown(controlled=controlled)

    def controller(self) -> KafkaServer:
        wait_for(lambda: self.zk_utils.get_controller_id() is not None, what="a controller")
        controller_id = self.zk_utils.get_controller_id()
        return wait_for(lambda: self.servers.get(controller_id) if self.servers[controller_id].controller.is_active
                        else None, what=f"broker {controller_id} acting as controller")

    def shutdown(self) -> None:
        for broker_id in list(self.servers):
            self.stop(broker_id)
        self.zk_utils.zk.close()


def partition_views(server, topic: str) -> dict:
    """What one broker believes about a topic: cache entries and its own partitions' roles."""
    cache = server.metadata_cache.get_partitions(topic) or {}
    roles = {}
    for p in cache:
        partition = server.replica_manager.get_partition((topic, p))
        if partition is not None and partition.leader_replica_id is not None:
            roles[p] = ("leader" if partition.is_leader else "follower", partition.leader_replica_id,
                        partition.leader_epoch)
    return {"cache": {p: (s.leader, s.leader_epoch, s.isr, s.replicas) for p, s in cache.items()}, "roles": roles}
