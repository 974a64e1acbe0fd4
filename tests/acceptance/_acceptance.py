"""What the acceptance tests share: creating topics through the admin client, reading the
partition state znode, producing acknowledged records and reading a partition back, all over sockets."""
from __future__ import annotations

import threading

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition

STRING_SERIALIZER = "kafka_edu.clients.producer.serializers.StringSerializer"
STRING_DESERIALIZER = "kafka_edu.clients.producer.serializers.StringDeserializer"


def create_topic(cluster, name: str, assignment: dict[int, list[int]], **configs) -> None:
    """Create `name` through CreateTopics and wait for every replica of it to be in its ISR."""
    with ClusterAdmin(cluster.bootstrap_servers) as admin:
        topic = NewTopic(name, replica_assignment=assignment, configs={k: str(v) for k, v in configs.items()})
        assert admin.create_topics([topic]) == {name: None}
    cluster.wait_until(lambda: all((s := cluster.partition_state(name, p)) is not None
                                   and sorted(s.leader_and_isr.isr) == sorted(replicas)
                                   for p, replicas in assignment.items()), what=f"{name}'s full ISRs")


def state(cluster, topic: str, partition: int = 0):
    """(leader, leader epoch, ISR) from the partition's state znode."""
    s = cluster.partition_state(topic, partition).leader_and_isr
    return s.leader, s.leader_epoch, list(s.isr)


def produce(cluster, topic: str, values: list[str], partition: int = 0, acks: str = "all", **extra) -> list[int]:
    """Send `values` with our KafkaProducer; return their offsets (every send must be acknowledged)."""
    producer = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks, "linger.ms": 5,
                              "key.serializer": STRING_SERIALIZER, "value.serializer": STRING_SERIALIZER, **extra})
    try:
        futures = [producer.send(topic, value, partition=partition) for value in values]
        producer.flush()
        return [f.get(timeout=15).offset for f in futures]
    finally:
        producer.close()


def consume(cluster, topic: str, count: int, partition: int = 0, timeout_s: float = 15) -> list[str]:
    """Read the partition from offset 0 with our KafkaConsumer until `count` records came (no group),
    then keep polling briefly: a record beyond `count` would be returned too."""
    consumer = KafkaConsumer({"bootstrap.servers": cluster.bootstrap_servers, "enable.auto.commit": False,
                              "value.deserializer": STRING_DESERIALIZER, "fetch.max.wait.ms": 50})
    tp = TopicPartition(topic, partition)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[str] = []

        def more() -> bool:
            for records in consumer.poll(100).values():
                values.extend(r.value for r in records)
            return len(values) >= count
        cluster.wait_until(more, timeout_s=timeout_s, what=f"{count} records of {topic}-{partition}")
        for _ in range(3):
            more()
        return values
    finally:
        consumer.close()


class BackgroundProducer:
    """A thread sending one record every few milliseconds, round robin over `partitions`, with
    acks=all and endless retries; `acknowledged` maps each partition to the values the cluster acked."""

    def __init__(self, cluster, topic: str, partitions: list[int], interval_s: float = 0.005):
        self.topic, self.partitions, self.interval_s = topic, partitions, interval_s
        self.producer = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                       "retries": 1_000_000, "retry.backoff.ms": 50, "metadata.max.age.ms": 1000,
                                       "max.in.flight.requests.per.connection": 1, "request.timeout.ms": 20_000,
                                       "key.serializer": STRING_SERIALIZER, "value.serializer": STRING_SERIALIZER})
        self.acknowledged: dict[int, list[str]] = {p: [] for p in partitions}
        self.failed: list[tuple[int, str, Exception]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"acceptance-producer-{topic}", daemon=True)

    def __enter__(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(self.interval_s):
            partition, value = self.partitions[i % len(self.partitions)], f"v{i}"
            self.producer.send(self.topic, value, partition=partition,
                               callback=lambda metadata, error, p=partition, v=value:
                               self.failed.append((p, v, error)) if error else self.acknowledged[p].append(v))
            i += 1

    def count(self) -> int:
        return sum(len(values) for values in self.acknowledged.values())

    def progressing(self, cluster, records: int = 30) -> bool:
        """Wait until `records` more records were acknowledged."""
        target = self.count() + records
        cluster.wait_until(lambda: self.count() >= target, what=f"{records} more acknowledgements")
        return True

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.producer.flush()
            self.producer.close()
