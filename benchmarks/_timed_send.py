"""The timed send loops the benchmarks share: one per client API, so every figure is taken the same way."""
from __future__ import annotations

import time


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


def time_confluent_produces(producer, topic: str, records: int, value: bytes, **produce_args) -> float:
    """Seconds for a confluent-kafka producer to take `records` values and deliver them all.

    librdkafka refuses a record while its local queue is full (BufferError): serving delivery
    reports with poll() makes room, then the same record is offered again. Metadata (and topic
    auto-creation) happens before the clock starts; undelivered records are an error, not a figure.
    """
    producer.list_topics(topic, timeout=10)
    produce = producer.produce
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                produce(topic, value, **produce_args)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed
