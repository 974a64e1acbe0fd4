"""What the Spark tests share besides fixtures: the Spark requirement, an in-process broker and
deleting a topic.

Test modules import these from here, never from conftest (several conftest modules exist, and
which one `import conftest` finds depends on the order pytest loaded them)."""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import shutil
from pathlib import Path

from external import require, wait_for
from kafka_edu.clients.admin import ClusterAdmin, NewTopic, UnknownTopicOrPartitionError
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

ROOT = Path(__file__).resolve().parents[2]
BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


def require_spark() -> None:
    require(importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None,
            "pyspark/pyarrow not installed (pip install -e '.[spark]')")
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")


def start_broker(log_dir: Path, port: int = 0, embedded_zookeeper: EmbeddedZooKeeper | None = None,
                 **props) -> KafkaServer:
    """A broker in this process; pass the same `embedded_zookeeper` to restart one with its data."""
    server = KafkaServer(KafkaConfig({"broker.id": 0, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                      "log.dirs": str(log_dir), "num.io.threads": 2, "num.network.threads": 2,
                                      "log.cleaner.enable": "false", **props}),
                         embedded_zookeeper=embedded_zookeeper or EmbeddedZooKeeper())
    server.startup()
    return server


def delete_topic(servers: str, name: str) -> None:
    """Delete a topic and wait until metadata no longer lists it."""
    with ClusterAdmin(servers) as admin:
        admin.delete_topics([name])

        def gone() -> bool:
            try:
                admin.describe_topics([name])
            except UnknownTopicOrPartitionError:
                return True
            return False
        wait_for(gone, timeout=30, what=f"{name} deleted")


@contextlib.contextmanager
def trailing_high_watermark(data_dir: Path, topic: str = "trailing", records: int = 100):
    """Three in-process brokers; broker 1 has taken `topic`-0 over from broker 0 (killed) with all
    `records` records but a high watermark of 0, which stays there while the other member of the ISR,
    broker 2, has its fetchers paused: what a reader sees for a moment after a leader change. Yields
    the cluster and the records' values; `cluster.resume_fetchers(2)` lets the watermark move."""
    from kafka_edu.server.cluster import InProcessCluster
    logging.getLogger("kafka_edu").setLevel(logging.CRITICAL)
    cluster = InProcessCluster(3, {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": 60_000},
                               data_dir=str(data_dir)).start()
    try:
        with ClusterAdmin(cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, replica_assignment={0: [0, 1, 2]})])
        cluster.wait_until(lambda: (s := cluster.partition_state(topic, 0)) is not None
                           and sorted(s.leader_and_isr.isr) == [0, 1, 2], what="a full ISR")
        assert cluster.pause_fetchers(1) and cluster.pause_fetchers(2)
        values = [str(i).encode() for i in range(records)]
        with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1",
                            "key.serializer": BYTES, "value.serializer": BYTES}) as producer:
            for value in values:
                producer.send(topic, value, partition=0)
        cluster.resume_fetchers(1)                     # broker 1 copies them all; broker 2 holds the watermark at 0
        follower = cluster.broker(1).replica_manager.get_partition((topic, 0))
        cluster.wait_until(lambda: follower.local_replica.log_end_offset == records, what="broker 1 level")
        cluster.kill(0)
        cluster.wait_until(lambda: cluster.partition_state(topic, 0).leader_and_isr.leader == 1,
                           what="broker 1 leading")
        assert follower.local_replica.high_watermark == 0
        yield cluster, values
    finally:
        cluster.shutdown()
