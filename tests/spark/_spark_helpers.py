"""What the Spark tests share besides fixtures: the Spark requirement, an in-process broker and
deleting a topic.

Test modules import these from here, never from conftest (several conftest modules exist, and
which one `import conftest` finds depends on the order pytest loaded them)."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from external import require, wait_for
from kafka_edu.clients.admin import ClusterAdmin, UnknownTopicOrPartitionError
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
