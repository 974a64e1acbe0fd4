"""Unmodified Kafka clients against a kafka-edu broker started as its own process.

kafka-python 3.x, confluent-kafka (librdkafka) and kcat each produce with every compression type,
read back by assign/seek and from the beginning, list offsets (earliest, latest, by timestamp),
create and delete topics through their admin APIs, and read metadata. Records read back must equal
the records sent, in order, per partition.
"""
from __future__ import annotations

import subprocess
import time
import uuid
from collections import defaultdict

import pytest

from broker_process import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
PER_PARTITION = 40
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"), {"num.partitions": str(PARTITIONS)}).start()
    yield proc
    assert proc.stop() == 0, proc.output()


def expected_records(codec: str) -> dict[int, list[tuple[bytes, bytes, int]]]:
    return {p: [(f"k{p}-{i}".encode(), f"{codec}:{p}:{i}:".encode() + b"x" * (i % 7 * 30), BASE_TS + i)
                for i in range(PER_PARTITION)] for p in range(PARTITIONS)}


def topic_name(client: str, codec: str) -> str:
    return f"{client}-{codec}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------- confluent-kafka (librdkafka)

def confluent_admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def confluent_create(broker, topic, partitions=PARTITIONS):
    from confluent_kafka.admin import NewTopic
    admin = confluent_admin(broker)      # the futures need their client alive
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)[topic].result(15)


def confluent_read(broker, topic, partitions=PARTITIONS, total=PARTITIONS * PER_PARTITION):
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = defaultdict(list)
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < total and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert not msg.error(), msg.error()
        got[msg.partition()].append((msg.key(), msg.value(), msg.timestamp()[1]))
    consumer.close()
    return dict(got)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_and_assign_read(broker, codec):
    from confluent_kafka import Producer
    topic = topic_name("ck", codec)
    confluent_create(broker, topic)
    sent = expected_records(codec)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "linger.ms": 5, "acks": "all"})
    errors = []
    for p, records in sent.items():
        for key, value, ts in records:
            producer.produce(topic, value=value, key=key, partition=p, timestamp=ts,
                             on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert not errors
    assert confluent_read(broker, topic) == sent


def test_confluent_offsets_and_metadata(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = topic_name("ck", "offsets")
    confluent_create(broker, topic, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=BASE_TS + 1000 * i)
    assert producer.flush(30) == 0
    md = producer.list_topics(topic, timeout=10)
    assert list(md.brokers) == [0]
    assert sorted(md.topics[topic].partitions) == [0]
    assert md.topics[topic].partitions[0].leader == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets-probe"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 4500)], timeout=10)
    assert found[0].offset == 5
    beyond = consumer.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 10**9)], timeout=10)
    assert beyond[0].offset in (-1, 10)          # "no such record": librdkafka reports -1 (end)
    consumer.close()


def test_confluent_admin_create_and_delete(broker):
    from confluent_kafka.admin import NewTopic
    admin = confluent_admin(broker)
    topic = topic_name("ck", "admin")
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(15)
    assert sorted(admin.list_topics(timeout=10).topics[topic].partitions) == [0, 1]
    with pytest.raises(Exception) as info:
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    assert "TOPIC_ALREADY_EXISTS" in str(info.value) or "already exists" in str(info.value)
    admin.delete_topics([topic], operation_timeout=10)[topic].result(15)
    deadline = time.monotonic() + 15
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in admin.list_topics(timeout=10).topics


# ---------------------------------------------------------------- kafka-python 3.x

def kafka_python_read(broker, topic, total=PARTITIONS * PER_PARTITION):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=500)
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    for tp in partitions:
        consumer.seek(tp, 0)
    got = defaultdict(list)
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < total and time.monotonic() < deadline:
        for tp, messages in consumer.poll(timeout_ms=200).items():
            got[tp.partition] += [(m.key, m.value, m.timestamp) for m in messages]
    consumer.close()
    return dict(got)


@pytest.mark.parametrize("acks", ["all", 1])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_and_seek_read(broker, codec, acks):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    topic = topic_name("kp", codec)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    sent = expected_records(codec)
    options = {} if acks == "all" else {"acks": 1, "enable_idempotence": False}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             compression_type=None if codec == "none" else codec, linger_ms=5, **options)
    futures = [producer.send(topic, key=k, value=v, partition=p, timestamp_ms=ts)
               for p, records in sent.items() for k, v, ts in records]
    producer.flush(30)
    for f in futures:
        f.get(10)
    producer.close()
    assert kafka_python_read(broker, topic) == sent


def test_kafka_python_offsets_metadata_and_admin(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topic = topic_name("kp", "admin")
    admin.create_topics([NewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(topic, value=b"v%d" % i, partition=0, timestamp_ms=BASE_TS + 1000 * i)
    producer.flush(30)
    producer.close()
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    assert consumer.offsets_for_times({tp: BASE_TS + 4500})[tp].offset == 5
    assert consumer.partitions_for_topic(topic) == {0}
    consumer.close()
    admin.delete_topics([topic])
    deadline = time.monotonic() + 15
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in admin.list_topics()
    admin.close()


# ---------------------------------------------------------------- kcat

@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_and_read_from_beginning(broker, kcat, codec):
    topic = topic_name("kcat", codec)
    confluent_create(broker, topic, partitions=1)
    lines = [f"key{i}:{codec}-value-{i}" for i in range(50)]
    produced = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:",
                               "-z", codec], input="\n".join(lines) + "\n", capture_output=True, text=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                               "-q", "-f", "%p:%o %k=%s\n"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"0:{i} key{i}={codec}-value-{i}" for i in range(50)]


def test_kcat_metadata_and_offsets(broker, kcat):
    topic = topic_name("kcat", "md")
    confluent_create(broker, topic, partitions=2)
    listing = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-t", topic], capture_output=True,
                             text=True, timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert "1 brokers:" in listing.stdout and f"broker 0 at {broker.bootstrap}" in listing.stdout
    assert f'topic "{topic}" with 2 partitions' in listing.stdout
    subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "1"], input="a\nb\nc\n",
                   text=True, check=True, timeout=30)
    query = subprocess.run([kcat, "-b", broker.bootstrap, "-Q", "-t", f"{topic}:1:-1"],
                           capture_output=True, text=True, timeout=30)
    assert query.returncode == 0, query.stderr
    assert f"{topic} [1] offset 3" in query.stdout
