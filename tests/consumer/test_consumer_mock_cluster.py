"""Our consumer against a broker we did not write: librdkafka's mock cluster (3 brokers, groups served)."""
from __future__ import annotations

import re
import uuid

import pytest

from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.consumer.subscription_state import OffsetAndMetadata
from kafka_edu.common.cluster import TopicPartition

pytestmark = pytest.mark.mock_cluster


def produce(bootstrap: str, topic: str, count: int, partitions: int = 4) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"%d-%d" % (i % partitions, i // partitions), partition=i % partitions)
    assert producer.flush(20) == 0


def test_group_consumer_reads_everything_in_order_and_commits(mock_cluster):
    topic, group = f"c-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(mock_cluster.bootstrap, topic, 200)
    settings = {"bootstrap.servers": mock_cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "max.poll.records": 33, "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500, "max.poll.interval.ms": 6000}      # the mock waits up to these on joins
    with KafkaConsumer(settings) as consumer:
        consumer.subscribe([topic])
        seen: dict[int, list[bytes]] = {}
        for _ in range(300):
            for tp, records in consumer.poll(100).items():
                seen.setdefault(tp.partition, []).extend(r.value for r in records)
            if sum(map(len, seen.values())) >= 200:
                break
        assert {p: v for p, v in seen.items()} == {p: [b"%d-%d" % (p, i) for i in range(50)] for p in range(4)}
        consumer.commit_sync()
        assert consumer.committed(TopicPartition(topic, 3)) == OffsetAndMetadata(50)
    with KafkaConsumer(settings) as again:                     # a new member resumes at the commits
        again.subscribe(re.compile(re.escape(topic)))
        for _ in range(20):
            assert again.poll(50) == {}
        assert {tp.partition for tp in again.assignment()} == set(range(4))
        assert all(again.position(tp) == 50 for tp in again.assignment())
