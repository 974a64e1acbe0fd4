"""KafkaProducer end to end against an in-process kafka-edu broker; a confluent-kafka consumer reads back.

Every codec with keys, headers and timestamps; acks 0/1/-1; callbacks in order per partition;
retriable (NOT_ENOUGH_REPLICAS) and fatal (MESSAGE_TOO_LARGE) errors from a real broker; many
threads through one producer; flush and close (graceful and forced); metadata waits.
"""
from __future__ import annotations

import logging
import threading
import uuid

import pytest

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.partitioner import DefaultPartitioner, murmur2, to_positive
from kafka_edu.clients.producer.serializers import ByteArraySerializer, IntegerSerializer, StringSerializer
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    config = KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                          "num.io.threads": 4, "log.cleaner.enable": "false", "num.partitions": 3,
                          "auto.create.topics.enable": "false", "message.max.bytes": 20_000,
                          "log.dirs": str(tmp_path_factory.mktemp("producer-broker"))})
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield f"127.0.0.1:{server.bound_port()}"
    server.shutdown()


def new_topic(bootstrap: str, partitions: int = 3, **configs) -> str:
    name = f"p-{uuid.uuid4().hex[:10]}"
    with ClusterAdmin(bootstrap) as admin:
        errors = admin.create_topics([NewTopic(name, partitions, 1, configs=configs)])
    assert not any(errors.values()), errors
    return name


def producer(bootstrap: str, **configs) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": ByteArraySerializer,
                          "value.serializer": ByteArraySerializer, **configs})


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got, idle = [], 0
        while len(got) < count and idle < 40:
            message = consumer.poll(0.25)
            if message is None:
                idle += 1
                continue
            assert message.error() is None, message.error()
            got.append(message)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_through_a_real_consumer(broker, codec):
    topic = new_topic(broker)
    rows = [(b"key-%d" % (i % 7) if i % 5 else None, b"value-%03d-" % i + b"z" * (i * 13 % 300),
             1_700_000_000_000 + i, [("seq", b"%d" % i), ("empty", None)] if i % 3 == 0 else [])
            for i in range(120)]
    with producer(broker, **{"compression.type": codec, "linger.ms": 20, "batch.size": 4096}) as p:
        futures = [p.send(topic, value, key=key, timestamp=ts, headers=headers) for key, value, ts, headers in rows]
        p.flush()
        metadata = [f.get(0) for f in futures]
    for (key, _, _, _), m in zip(rows, metadata, strict=True):
        if key is not None:
            assert m.partition == to_positive(murmur2(key)) % 3
    messages = consume(broker, topic, 3, len(rows))
    got = {(m.partition(), m.offset()): (m.key(), m.value(), m.timestamp()[1], list(m.headers() or []))
           for m in messages}
    expected = {(m.partition, m.offset): (key, value, ts, headers)
                for (key, value, ts, headers), m in zip(rows, metadata, strict=True)}
    assert got == expected


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_settings_deliver(broker, acks):
    topic = new_topic(broker, partitions=1)
    with producer(broker, acks=acks) as p:
        futures = [p.send(topic, b"m%d" % i) for i in range(50)]
        p.flush()
        offsets = [f.get(0).offset for f in futures]
    assert offsets == ([-1] * 50 if acks == "0" else list(range(50)))
    assert [m.value() for m in consume(broker, topic, 1, 50)] == [b"m%d" % i for i in range(50)]


def test_callbacks_fire_in_order_per_partition(broker):
    topic = new_topic(broker)
    seen: dict[int, list] = {0: [], 1: [], 2: []}
    with producer(broker, **{"linger.ms": 2, "batch.size": 512}) as p:
        for i in range(600):
            p.send(topic, b"%d" % i, partition=i % 3,
                   callback=lambda m, e, i=i: seen[m.partition].append((i, m.offset)))
    for partition, events in seen.items():
        assert len(events) == 200
        assert [i for i, _ in events] == sorted(i for i, _ in events)
        assert [o for _, o in events] == list(range(200)), partition


def test_retriable_broker_errors_are_retried_until_retries_run_out(broker, caplog):
    topic = new_topic(broker, partitions=1, **{"min.insync.replicas": "2"})
    with producer(broker, acks="all", retries=2, **{"retry.backoff.ms": 20}) as p:
        error = p.send(topic, b"needs two replicas").exception(10)
    assert error.error is Errors.NOT_ENOUGH_REPLICAS
    assert caplog.text.count("retrying") == 2                     # three attempts in all
    with producer(broker, acks="1") as p:                          # the leader alone may acknowledge
        assert p.send(topic, b"acks=1 does not care").get(10).offset == 0


def test_a_record_too_large_for_the_broker_fails_without_retries(broker):
    topic = new_topic(broker, partitions=1)
    with producer(broker, retries=3) as p:
        error = p.send(topic, b"x" * 50_000).exception(10)
        assert p.send(topic, b"small").get(10).offset == 0
    assert error.error is Errors.MESSAGE_TOO_LARGE


def test_a_record_larger_than_max_request_size_fails_before_sending(broker):
    topic = new_topic(broker, partitions=1)
    with producer(broker, **{"max.request.size": 1000}) as p:
        error = p.send(topic, b"x" * 2000).exception(0)
        assert error.error is Errors.MESSAGE_TOO_LARGE and "max.request.size" in str(error)


def test_eight_threads_share_one_producer(broker):
    topic = new_topic(broker, partitions=4)
    sent: dict[bytes, list] = {}
    lock = threading.Lock()

    def worker(n):
        for i in range(1000):
            key = b"t%d-k%d" % (n, i % 16)
            future = p.send(topic, b"%d-%d" % (n, i), key=key)
            with lock:
                sent.setdefault(key, []).append(future)

    p = producer(broker, **{"linger.ms": 5})
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    assert sum(len(fs) for fs in sent.values()) == 8000
    assert all(f.done() for fs in sent.values() for f in fs)
    for fs in sent.values():
        offsets = [f.get(0).offset for f in fs]
        assert offsets == sorted(offsets) and len({f.get(0).partition for f in fs}) == 1
    assert not p.accumulator.has_unsent() and p.sender.client.in_flight_request_count() == 0


def test_flush_sends_lingering_records_now(broker):
    topic = new_topic(broker, partitions=1)
    with producer(broker, **{"linger.ms": 60_000}) as p:
        p.partitions_for(topic)
        futures = [p.send(topic, b"x") for _ in range(10)]
        assert not any(f.done() for f in futures)
        p.flush()
        assert all(f.done() for f in futures) and futures[-1].get(0).offset == 9


def test_close_waits_for_lingering_records(broker):
    topic = new_topic(broker, partitions=1)
    p = producer(broker, **{"linger.ms": 60_000})
    p.partitions_for(topic)
    futures = [p.send(topic, b"x") for _ in range(5)]
    p.close()
    assert [f.get(0).offset for f in futures] == list(range(5))
    with pytest.raises(IllegalStateError):
        p.send(topic, b"late")


def test_close_with_zero_timeout_fails_what_is_left(broker):
    topic = new_topic(broker, partitions=1)
    p = producer(broker, **{"linger.ms": 60_000})
    p.partitions_for(topic)
    futures = [p.send(topic, b"x") for _ in range(5)]
    p.close(0)
    assert all(isinstance(f.exception(0), IllegalStateError) for f in futures)
    assert not p.io_thread.is_alive()


def test_unknown_topic_without_auto_creation_times_out(broker):
    with producer(broker, **{"max.block.ms": 300}) as p:
        assert isinstance(p.send("never-created", b"x").exception(0), TimeoutError)


def test_partitions_for_and_typed_serializers(broker):
    topic = new_topic(broker, partitions=3)
    with KafkaProducer({"bootstrap.servers": broker, "key.serializer": IntegerSerializer,
                        "value.serializer": StringSerializer}) as p:
        assert [(i.partition, i.leader.id) for i in p.partitions_for(topic)] == [(0, 0), (1, 0), (2, 0)]
        metadata = p.send(topic, "héllo", key=7).get(10)
    [message] = consume(broker, topic, 3, 1)
    assert message.key() == b"\x00\x00\x00\x07" and message.value() == "héllo".encode()
    assert message.partition() == metadata.partition == to_positive(murmur2(b"\x00\x00\x00\x07")) % 3


class Upper(ByteArraySerializer):
    """A subclass changes what bytes become, so the producer must call it even for bytes."""

    def serialize(self, topic, data):
        return None if data is None else bytes(data).upper()


def test_bytes_pass_through_only_the_plain_byte_array_serializer(broker):
    topic = new_topic(broker, partitions=1)
    with producer(broker) as p:
        assert p._bytes_as_they_are
        for value in (b"plain", bytearray(b"array"), memoryview(b"view"), None):
            p.send(topic, value, key=b"k").get(10)
    with KafkaProducer({"bootstrap.servers": broker, "key.serializer": Upper, "value.serializer": Upper}) as p:
        assert not p._bytes_as_they_are
        p.send(topic, b"shout", key=b"k").get(10)
    got = consume(broker, topic, 1, 5)
    assert [(m.key(), m.value()) for m in got] == [
        (b"k", b"plain"), (b"k", b"array"), (b"k", b"view"), (b"k", None), (b"K", b"SHOUT")]


class OneTooFar(DefaultPartitioner):
    def partition(self, topic, key, key_bytes, value, value_bytes, cluster):
        return cluster.partition_count_for_topic(topic)


def test_a_partition_out_of_range_is_refused_whoever_chose_it(broker):
    topic = new_topic(broker, partitions=2)
    with producer(broker, **{"partitioner.class": OneTooFar, "max.block.ms": 300}) as p:
        p.partitions_for(topic)
        with pytest.raises(ValueError, match="invalid partition 2"):
            p.send(topic, b"x")
        with pytest.raises(ValueError, match="invalid partition -1"):
            p.send(topic, b"x", partition=-1)
        assert isinstance(p.send(topic, b"x", partition=2).exception(10), TimeoutError)


def test_partitions_added_later_are_used_after_the_metadata_update(broker):
    topic = new_topic(broker, partitions=1)
    with producer(broker) as p:
        assert p.send(topic, b"before").get(10).partition == 0
        with ClusterAdmin(broker) as admin:
            assert admin.create_partitions({topic: 3}) == {topic: None}
        assert p.send(topic, b"third", partition=2).get(10).partition == 2   # waits for the new metadata
        spread = {p.send(topic, b"after").get(10).partition for _ in range(6)}
    assert spread == {0, 1, 2}
