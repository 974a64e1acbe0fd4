"""The timed read pass the confluent-kafka consumer figures share, so each is taken the same way."""
from __future__ import annotations

import time

from confluent_kafka import TopicPartition


def time_confluent_consume(consumer, topic: str, starts: dict[int, int], count: int, stall_seconds: float) -> float:
    """Seconds for a fresh confluent-kafka consumer to read `count` records from the given start offset
    of each partition, timed from assign() to its last record; the consumer is closed afterwards.

    A watermark query connects to the leader before the clock starts. A consume() that returns
    nothing for `stall_seconds` means records that cannot come: an error, not a figure.
    """
    try:
        consumer.get_watermark_offsets(TopicPartition(topic, next(iter(starts))), timeout=10)
        seen = 0
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
        while seen < count:
            batch = consumer.consume(min(10_000, count - seen), stall_seconds)
            if not batch:
                raise RuntimeError(f"consumer stalled at {seen}/{count}")
            seen += sum(1 for m in batch if not m.error())
        return time.perf_counter() - started
    finally:
        consumer.close()
