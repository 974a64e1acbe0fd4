"""Shared by the consumer tests: an in-process kafka-edu broker and a topic filled with records."""
from __future__ import annotations

import logging
import threading

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

BROKER = {"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
          "num.io.threads": 4, "log.cleaner.enable": "false", "offsets.topic.num.partitions": 1,
          "offsets.topic.replication.factor": 1}


def start_broker(log_dir, **props) -> KafkaServer:
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    config = {**BROKER, "log.dirs": str(log_dir), **props}
    server = KafkaServer(KafkaConfig(config), embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    return server


def create_topic(server: KafkaServer, topic: str, partitions: int) -> None:
    from kafka_edu.server.admin_manager import NewTopic
    done = threading.Event()
    server.admin_manager.create_topics(10_000, False, [NewTopic(topic, partitions, 1)], lambda results: done.set())
    assert done.wait(10), "topic creation timed out"
