"""Fixtures for the Spark chapter: one in-process broker and one local SparkSession per test session.

Both are expensive to start (the JVM alone takes about 5 s), so every test module shares them and
works on topics of its own.
"""
from __future__ import annotations

import itertools
import logging

import pytest
from _spark_helpers import BYTES, ROOT, require_spark, start_broker
from external import wait_for

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.producer.kafka_producer import KafkaProducer

_topics = itertools.count()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    server = start_broker(tmp_path_factory.mktemp("spark-broker"), **{"delete.topic.enable": "true"})
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
    """A factory: a new topic with `partitions` partitions (and topic configs), named uniquely unless
    `name` recreates a deleted one."""
    def create(partitions: int = 1, name: str | None = None, **configs) -> str:
        recreate, name = name is not None, name or f"spark-{next(_topics)}"
        new_topic = NewTopic(name, partitions, 1, configs={k.replace("_", "."): str(v) for k, v in configs.items()})

        def created() -> bool:
            error = admin.create_topics([new_topic])[name]
            # a deleted topic leaves metadata before its deletion ends; until then the name is taken
            if recreate and error is not None and "is marked for deletion" in str(error):
                return False
            if error is not None:
                raise error
            return True

        with ClusterAdmin(servers) as admin:
            wait_for(created, timeout=30, what=f"{name} created", interval=0.1)
        return name
    return create


@pytest.fixture
def produce(servers):
    """A factory: send values (bytes) to a topic's partition with kafka-edu's producer, then flush."""
    producers = []

    def send(topic: str, values, partition: int | None = None, keys=None, headers=None, timestamps=None):
        if not producers:
            producers.append(KafkaProducer({"bootstrap.servers": servers, "key.serializer": BYTES,
                                            "value.serializer": BYTES, "linger.ms": 2,
                                            "retries": 10}))   # a topic just created may not be hosted yet
        producer = producers[0]
        for i, value in enumerate(values):
            producer.send(topic, value, keys[i] if keys else None, partition,
                          timestamp=timestamps[i] if timestamps else None, headers=headers[i] if headers else None)
        producer.flush()
    yield send
    for producer in producers:
        producer.close()
