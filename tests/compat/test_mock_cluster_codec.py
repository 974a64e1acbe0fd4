"""Our wire codec and record formats against librdkafka's mock cluster, a broker we did not write.

(a) Produce requests built with our schemas, carrying v2 batches built with our record builder
    (each codec, with headers), go to the partition leader we found with our own Metadata request;
    a confluent-kafka consumer must read back exactly those keys, values, headers and timestamps.
(b) A confluent-kafka producer writes records with each codec; our Fetch request reads them from
    the leader and our MemoryRecords decodes the batches exactly.
The mock auto-creates topics (4 partitions, replication factor 3) on the first Metadata request.
"""
from __future__ import annotations

import time
import uuid

import pytest
from blocking_client import CodecConnection

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder

pytestmark = pytest.mark.mock_cluster

PRODUCE_VERSION = 8      # the highest both sides serve: ours 0-8, the mock's 0-10
FETCH_VERSION = 11       # ours 0-11, the mock's 0-16
METADATA_VERSION = 8
BASE_TIMESTAMP = 1_700_000_000_000


def leader_of(cluster, topic: str, partition: int = 0) -> tuple[str, int]:
    """Ask the cluster (our Metadata request) for the partition's leader, waiting for auto-creation."""
    host, port = cluster.addresses[0]
    conn = CodecConnection(port, host, timeout=15)
    try:
        for _ in range(50):
            md = conn.call(ApiKeys.METADATA, METADATA_VERSION,
                           {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
            brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
            (found,) = [t for t in md.topics if t.name == topic]
            parts = {p.partition_index: p for p in found.partitions}
            if found.error_code == 0 and partition in parts and parts[partition].leader_id in brokers:
                assert len(parts) == 4
                return brokers[parts[partition].leader_id]
            time.sleep(0.1)
    finally:
        conn.close()
    raise AssertionError(f"{topic} never got a leader for partition {partition}")


def sample(codec: CompressionType, n: int = 5) -> list[tuple]:
    """(timestamp, key, value, headers) with a null key, an empty value and a header with a null value."""
    rows = []
    for i in range(n):
        key = None if i == 1 else f"key-{i}".encode()
        value = b"" if i == 2 else f"{codec.config_name}-value-{i}-".encode() * (i + 1)
        headers = (("trace", f"t{i}".encode()), ("empty", None)) if i % 2 == 0 else ()
        rows.append((BASE_TIMESTAMP + i, key, value, headers))
    return rows


def consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"h1-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_our_produce_request_read_by_confluent_consumer(mock_cluster, codec):
    topic = f"h1-ours-{codec.config_name}-{uuid.uuid4().hex[:6]}"
    rows = sample(codec)
    builder = MemoryRecordsBuilder(magic=2, compression=codec)
    for timestamp, key, value, headers in rows:
        builder.append(timestamp, key, value, headers)
    batch = builder.build()
    assert next(batch.batches()).compression_type is codec

    host, port = leader_of(mock_cluster, topic)
    conn = CodecConnection(port, host, timeout=15)
    try:
        response = conn.call(ApiKeys.PRODUCE, PRODUCE_VERSION, {
            "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    finally:
        conn.close()
    (result,) = response.responses[0].partition_responses
    assert Errors.for_code(result.error_code) is Errors.NONE, result
    assert result.base_offset == 0 and result.record_errors == [] and result.error_message is None

    messages = consume(mock_cluster.bootstrap, topic, len(rows))
    got = [(m.timestamp()[1], m.key(), m.value(), tuple(m.headers() or ())) for m in messages]
    assert got == rows
    assert [m.offset() for m in messages] == list(range(len(rows)))


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_confluent_producer_batches_fetched_and_decoded_by_us(mock_cluster, codec):
    from confluent_kafka import Producer
    topic = f"h1-theirs-{codec.config_name}-{uuid.uuid4().hex[:6]}"
    address = leader_of(mock_cluster, topic)
    rows = sample(codec, n=8)
    # flush() sends at once whatever linger.ms says, so a long linger keeps every row in one batch however
    # slowly this loop runs: under load a 50 ms linger once let the first row leave alone, and librdkafka
    # sent that one-record batch uncompressed (compressing it would not have made it smaller).
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap, "compression.type": codec.config_name,
                         "linger.ms": 5000, "enable.idempotence": False})
    for timestamp, key, value, headers in rows:
        producer.produce(topic, value=value, key=key, partition=0, timestamp=timestamp, headers=list(headers))
    assert producer.flush(30) == 0

    host, port = address
    conn = CodecConnection(port, host, timeout=15)
    try:
        response = conn.call(ApiKeys.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                        "partition_max_bytes": 1 << 20}]}]})
    finally:
        conn.close()
    assert Errors.for_code(response.error_code) is Errors.NONE
    (part,) = response.responses[0].partitions
    assert Errors.for_code(part.error_code) is Errors.NONE and part.high_watermark == len(rows)

    records = MemoryRecords(part.records)
    batches = list(records.batches())
    assert batches and all(b.magic == 2 and b.compression_type is codec for b in batches)
    assert all(b.is_valid() for b in batches)
    got = [(r.timestamp, r.key, r.value, tuple(r.headers)) for r in records.records()]
    assert got == rows
    assert [r.offset for r in records.records()] == list(range(len(rows)))
