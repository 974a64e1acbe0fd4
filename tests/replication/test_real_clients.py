"""acks=all from an unmodified client (librdkafka) against three brokers with RF=3."""
from __future__ import annotations

from _cluster import wait_until
from external import require

from kafka_edu.common.protocol.api_keys import ApiKeys


def test_confluent_acks_all_is_acknowledged_once_every_replica_has_the_records(make_cluster):
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
    except ImportError:
        require(False, "confluent-kafka is not installed (pip install -e '.[dev]')")
    cluster = make_cluster(3)
    cluster.create_partition("rf3", 0, [0, 1, 2], config={"min.insync.replicas": 2})
    cluster.create_partition("rf3", 1, [1, 2, 0], config={"min.insync.replicas": 2})
    bootstrap = ",".join(f"127.0.0.1:{b.bound_port()}" for b in cluster.brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or (msg.partition(), msg.offset()))

    for i in range(200):
        producer.produce("rf3", value=f"v{i}".encode(), partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == [] and len(delivered) == 200
    for partition, leader in ((0, 0), (1, 1)):
        # acknowledged => the leader's HW passed it => every ISR replica holds it
        assert cluster.partition(leader, "rf3", partition).high_watermark == 100
        assert cluster.isr_in_zk("rf3", partition) == [0, 1, 2]
        for broker_id in range(3):
            assert cluster.partition(broker_id, "rf3", partition).local_replica.log_end_offset == 100
        wait_until(lambda p=partition: all(cluster.partition(b, "rf3", p).high_watermark == 100 for b in range(3)),
                   what="the followers' HWs")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rf3-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition("rf3", p, 0) for p in (0, 1)])
    values = []
    while len(values) < 200:
        message = consumer.poll(10)
        assert message is not None and message.error() is None, message and message.error()
        values.append(message.value().decode())
    consumer.close()
    assert sorted(values, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(200)]


def test_confluent_consumer_validates_its_position_after_a_leader_change(make_cluster):
    """librdkafka asks OffsetsForLeaderEpoch after a leader change (KIP-320) and keeps its position."""
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
    except ImportError:
        require(False, "confluent-kafka is not installed (pip install -e '.[dev]')")
    cluster = make_cluster(3)
    cluster.create_partition("moving", 0, [0, 1, 2])
    bootstrap = ",".join(f"127.0.0.1:{b.bound_port()}" for b in cluster.brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "topic.metadata.refresh.interval.ms": 200})

    def produce(values):
        for value in values:
            producer.produce("moving", value=value.encode(), partition=0)
        assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mover", "enable.auto.commit": False,
                         "auto.offset.reset": "error", "topic.metadata.refresh.interval.ms": 200})
    consumer.assign([TopicPartition("moving", 0, 0)])

    def read(count):
        values = []
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            values.append(message.value().decode())
        return values

    produce(["a", "b"])
    assert read(2) == ["a", "b"]
    cluster.elect("moving", 0, leader=1, isr=[0, 1, 2])
    leader_apis = cluster.brokers[1].apis.request_counts
    produce(["c"])
    assert read(1) == ["c"]
    wait_until(lambda: leader_apis[ApiKeys.OFFSET_FOR_LEADER_EPOCH] >= 1, what="the consumer's validation")
    consumer.close()
