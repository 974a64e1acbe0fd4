"""Producer and consumer metrics under Kafka's names, from a real producer and consumer against an in-process broker."""
import logging

import pytest

from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.metrics.jmx_reporter import PLATFORM_MBEAN_SERVER as JMX
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    server = KafkaServer(KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "num.partitions": 1,
                                      "log.dirs": str(tmp_path_factory.mktemp("broker")), "message.max.bytes": 1000,
                                      "log.cleaner.enable": "false"}), embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield f"127.0.0.1:{server.bound_port()}"
    server.shutdown()


def values(metrics, group, tags):
    return {n.name: m.value() for n, m in metrics.metrics().items() if n.group == group and n.tags == tags}


def test_producer_metrics(bootstrap):
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "client.id": "metrics-p", "linger.ms": 60_000},
                             ByteArraySerializer(), ByteArraySerializer())
    bean = "kafka.producer:type=producer-metrics,client-id=metrics-p"
    try:
        futures = [producer.send("metered", b"v%d" % i, partition=0) for i in range(10)]
        producer.flush()
        assert all(f.get(10).offset >= 0 for f in futures)
        too_large = producer.send("metered", bytes(2000), partition=0)         # the broker takes 1000 bytes
        producer.flush()
        assert too_large.exception(10) is not None
        tags = {"client-id": "metrics-p"}
        overall = values(producer.metrics, "producer-metrics", tags)
        assert overall["records-per-request-avg"] == pytest.approx(11 / 2)     # one request of 10, one of 1
        assert overall["batch-size-max"] > 2000 > overall["batch-size-avg"] / 2
        assert overall["record-error-rate"] > 0 and overall["record-retry-rate"] == 0
        assert overall["request-latency-max"] >= overall["request-latency-avg"] >= 0
        assert overall["requests-in-flight"] == 0
        assert overall["request-rate"] > 0 and overall["connection-count"] >= 1      # the selector's, same group
        topic = values(producer.metrics, "producer-topic-metrics", {**tags, "topic": "metered"})
        same = lambda a, b: a == pytest.approx(b, rel=0.05)      # noqa: E731  (read a few µs apart, real clock)
        assert same(topic["record-send-rate"], overall["record-send-rate"])
        assert same(topic["record-error-rate"], overall["record-error-rate"])
        node = values(producer.metrics, "producer-node-metrics", {**tags, "node-id": "node-0"})
        assert node["request-latency-max"] == overall["request-latency-max"]
        assert {"record-send-rate", "request-latency-avg", "outgoing-byte-rate", "io-wait-ratio"} \
            <= set(JMX.get_attributes(bean))
    finally:
        producer.close()
    assert not JMX.is_registered(bean)


def test_consumer_fetch_metrics(bootstrap):
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}, ByteArraySerializer(),
                       ByteArraySerializer()) as producer:
        for i in range(6):
            producer.send("lagging", b"r%d" % i, partition=0).get(10)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "metrics-c", "auto.offset.reset": "earliest",
                              "max.partition.fetch.bytes": 1})        # one batch per fetch: a lag after each
    bean = "kafka.consumer:type=consumer-fetch-manager-metrics,client-id=metrics-c"
    try:
        tp = TopicPartition("lagging", 0)
        consumer.assign([tp])
        read = []
        for _ in range(100):
            read += [r.value for rs in consumer.poll(200).values() for r in rs]
            if len(read) == 6:
                break
        assert read == [b"r%d" % i for i in range(6)]
        tags = {"client-id": "metrics-c"}
        overall = values(consumer.metrics, "consumer-fetch-manager-metrics", tags)
        assert overall["records-lag-max"] == 5                  # after the first batch of one record
        assert overall["records-per-request-avg"] == 1 and overall["fetch-rate"] > 0
        assert overall["fetch-latency-max"] >= overall["fetch-latency-avg"] >= 0
        partition = values(consumer.metrics, "consumer-fetch-manager-metrics",
                           {**tags, "topic": "lagging", "partition": "0"})
        assert partition == {"records-lag": 0}
        topic = values(consumer.metrics, "consumer-fetch-manager-metrics", {**tags, "topic": "lagging"})
        assert topic["records-consumed-rate"] == pytest.approx(overall["records-consumed-rate"], rel=0.05)
        assert JMX.get_attribute(bean, "records-lag-max") == 5
        assert JMX.get_attribute("kafka.consumer:type=consumer-metrics,client-id=metrics-c", "response-rate") > 0
    finally:
        consumer.close()
    assert not JMX.is_registered(bean)


def test_consumer_coordinator_metrics(bootstrap):
    with KafkaProducer({"bootstrap.servers": bootstrap}, ByteArraySerializer(), ByteArraySerializer()) as producer:
        producer.send("grouped", b"one", partition=0).get(10)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "metrics-g", "group.id": "metered-group",
                              "auto.offset.reset": "earliest", "enable.auto.commit": False,
                              "session.timeout.ms": 6000, "heartbeat.interval.ms": 100})
    try:
        consumer.subscribe(["grouped"])
        for _ in range(100):
            consumer.poll(100)
            if consumer.assignment():
                break
        consumer.commit_sync()
        tags = {"client-id": "metrics-g"}
        group = values(consumer.metrics, "consumer-coordinator-metrics", tags)
        assert group["assigned-partitions"] == 1
        assert group["join-rate"] > 0 and group["sync-rate"] > 0 and group["commit-rate"] > 0
        assert group["join-time-max"] >= group["join-time-avg"] >= 0
        assert group["commit-latency-max"] >= 0
        for _ in range(50):                           # the heartbeat thread answers every 100 ms
            if values(consumer.metrics, "consumer-coordinator-metrics", tags)["heartbeat-rate"] > 0:
                break
            consumer.poll(50)
        assert values(consumer.metrics, "consumer-coordinator-metrics", tags)["heartbeat-rate"] > 0
    finally:
        consumer.close()
