"""What the flat-cost benchmarks (partitions.py, large_log.py, connections.py) share: a broker's memory,
topics of many partitions, and confluent-kafka produce/consume loops that spread over partitions."""
from __future__ import annotations

import time

from _timed_consume import time_confluent_consume
from _timed_send import BULK_PRODUCER, time_confluent_produces
from confluent_kafka import Consumer, Producer

from kafka_edu.clients.admin import ClusterAdmin, NewTopic


def rss_mib(pid: int) -> float:
    """Resident set size of a process (VmRSS in /proc/<pid>/status), in MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 120) -> None:
    """Create `topic` and wait until every partition has a leader (the controller elects them after the reply)."""
    with ClusterAdmin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    wait_for_leaders(bootstrap, topic, partitions, timeout)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 120) -> None:
    probe = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        found = probe.list_topics(topic, timeout=timeout).topics[topic].partitions
        if len(found) == partitions and all(p.leader >= 0 for p in found.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: {sum(p.leader >= 0 for p in found.values())}/{partitions} led")
        time.sleep(0.1)


def produce_spread(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    """Seconds for a confluent-kafka producer to deliver `records` values, round robin over `partitions`."""
    producer = Producer({"bootstrap.servers": bootstrap, **BULK_PRODUCER})
    return time_confluent_produces(producer, topic, records, b"x" * size, round_robin=partitions, metadata_timeout=30)


def consume_spread(bootstrap: str, topic: str, starts: dict[int, int], count: int) -> float:
    """Seconds for a fresh confluent-kafka consumer to read `count` records from the given start
    offsets of each partition, timed from assign() to the last record (connected beforehand)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-flat", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 0})
    return time_confluent_consume(consumer, topic, starts, count, stall_seconds=10)
