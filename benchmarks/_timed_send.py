"""The timed send loops the benchmarks share: one per client API, so every figure is taken the same way."""
from __future__ import annotations

import itertools
import time

# librdkafka's "unassigned partition": produce() with it lets the client's partitioner choose.
PARTITION_UA = -1

# The confluent-kafka producer settings of the throughput figures: large batches, a deep local queue.
BULK_PRODUCER = {"acks": 1, "linger.ms": 50, "batch.size": 1_000_000,
                 "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000}


def time_sends(producer, topic: str, records: int, value: bytes) -> float:
    """Seconds for a KafkaProducer-style client (ours, kafka-python) to send and flush `records` values.

    Topic metadata is fetched before the clock starts, and the producer is closed afterwards.
    """
    try:
        producer.partitions_for(topic)
        send = producer.send
        started = time.perf_counter()
        for _ in range(records):
            send(topic, value)
        producer.flush()
        return time.perf_counter() - started
    finally:
        producer.close()


def time_confluent_produces(producer, topic: str, records: int, value: bytes, *, partition: int = PARTITION_UA,
                            round_robin: int = 0, metadata_timeout: float = 10) -> float:
    """Seconds for a confluent-kafka producer to take `records` values and deliver them all.

    Every record goes to `partition` (by default the client's partitioner chooses), or with
    `round_robin` = N to partitions 0..N-1 in turn. librdkafka refuses a record while its local
    queue is full (BufferError): serving delivery reports with poll() makes room, then the same
    record is offered again. Metadata (and topic auto-creation) happens before the clock starts;
    undelivered records are an error, not a figure.
    """
    producer.list_topics(topic, timeout=metadata_timeout)
    partitions = (itertools.islice(itertools.cycle(range(round_robin)), records) if round_robin
                  else itertools.repeat(partition, records))
    produce = producer.produce
    started = time.perf_counter()
    for target in partitions:
        while True:
            try:
                produce(topic, value, partition=target)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed
