"""Fixtures for the Spark chapter: one in-process broker and one local SparkSession per test session.

Both are expensive to start (the JVM alone takes about 5 s), so every test module shares them and
works on topics of its own.
"""
from __future__ import annotations

import importlib.util
import itertools
import logging
import shutil
from pathlib import Path

import pytest

from external import require
from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

ROOT = Path(__file__).resolve().parents[2]
BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"
_topics = itertools.count()


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


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    server = start_broker(tmp_path_factory.mktemp("spark-broker"))
    yield server
    server.shutdown()


@pytest.fixture(scope="session")
def servers(broker) -> str:
    return f"127.0.0.1:{broker.bound_port()}"


@pytest.fixture(scope="session")
def spark():
    require_spark()
    from kafka_edu.spark.source import spark_session
    session = spark_session("kafka-edu-tests", local_dir=ROOT / "_build" / "spark-local")
    yield session
    session.stop()


@pytest.fixture
def topic(servers):
    """A factory: a new topic with `partitions` partitions (and topic configs), named uniquely."""
    def create(partitions: int = 1, **configs) -> str:
        name = f"spark-{next(_topics)}"
        with ClusterAdmin(servers) as admin:
            admin.create_topics([NewTopic(name, partitions, 1, configs={k.replace("_", "."): str(v) for k, v in configs.items()})])
        return name
    return create


@pytest.fixture
def produce(servers):
    """A factory: send values (bytes) to a topic's partition with kafka-edu's producer, then flush."""
    producers = []

    def send(topic: str, values, partition: int | None = None, keys=None, headers=None, timestamps=None):
        if not producers:
            producers.append(KafkaProducer({"bootstrap.servers": servers, "key.serializer": BYTES,
                                            "value.serializer": BYTES, "linger.ms": 2}))
        producer = producers[0]
        for i, value in enumerate(values):
            producer.send(topic, value, keys[i] if keys else None, partition,
                          timestamp=timestamps[i] if timestamps else None, headers=headers[i] if headers else None)
        producer.flush()
    yield send
    for producer in producers:
        producer.close()
