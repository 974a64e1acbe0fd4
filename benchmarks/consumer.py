"""Our consumer against kafka-python's and confluent-kafka's, all reading the same records from a kafka-edu broker.

One kafka-edu broker runs as its own process (`kafka-edu server-start`). For each value size, N
records (no key) are produced once into partition 0 of a one-partition topic by confluent-kafka's
producer. Then each repeat has every client read all N from the first offset, one client after the
other. Every pass is a fresh consumer without a group (assign, no commits) that has already connected
to the leader. It is timed from its first poll to its last record.

Each client keeps its defaults. Ours and kafka-python's return at most max.poll.records = 500 records
per poll() and check CRCs. confluent-kafka's consume() takes up to 10,000 messages, does not check
CRCs by default, and runs with fetch.queue.backoff.ms=0 (the same pass as broker_vs_mock.py). The
printed figure per client is the median records/s over the repeats; the ratios are ours / theirs.

    python benchmarks/consumer.py [--records 200000] [--sizes 100,1024] [--repeats 3]

Targets (notes/performance.md): ours >= 3x kafka-python and >= 0.3x confluent-kafka.
The first repeat warms connections and the page cache and is discarded.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from broker_process import BrokerProcess  # noqa: E402
from broker_vs_mock import consume_pass, produce  # noqa: E402
from kafka import KafkaConsumer as KafkaPythonConsumer  # noqa: E402
from kafka import TopicPartition as KafkaPythonTopicPartition  # noqa: E402

from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer  # noqa: E402
from kafka_edu.common.cluster import TopicPartition  # noqa: E402


def time_polls(consumer, tp, start: int, count: int) -> float:
    """Seconds for a KafkaConsumer-style client (ours, kafka-python) to read `count` records from `start`.

    position() looks an offset up at the leader, so the connection exists before the clock starts;
    the consumer is closed afterwards.
    """
    try:
        consumer.assign([tp])
        consumer.position(tp)
        consumer.seek(tp, start)
        seen = 0
        started = time.perf_counter()
        while seen < count:
            batch = consumer.poll(timeout_ms=5_000)        # never wait for records that cannot come
            if not batch:
                raise RuntimeError(f"consumer stalled at {seen}/{count}")
            seen += sum(map(len, batch.values()))
        return time.perf_counter() - started
    finally:
        consumer.close()


def run_ours(bootstrap: str, topic: str, start: int, count: int) -> float:
    return time_polls(KafkaConsumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False}),
                      TopicPartition(topic, 0), start, count)


def run_kafka_python(bootstrap: str, topic: str, start: int, count: int) -> float:
    return time_polls(KafkaPythonConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False),
                      KafkaPythonTopicPartition(topic, 0), start, count)


CLIENTS = {"ours": run_ours, "kafka-python": run_kafka_python, "confluent": consume_pass}


def measure(bootstrap: str, records: int, size: int, repeats: int) -> dict[str, float]:
    """Median records/s per client reading the same `records` values; clients take turns within every repeat."""
    topic = f"bench-consume-{size}"
    produce(bootstrap, topic, records, size)
    rates: dict[str, list[float]] = {name: [] for name in CLIENTS}
    for repeat in range(repeats + 1):
        for name, run in CLIENTS.items():
            elapsed = run(bootstrap, topic, 0, records)
            if repeat:
                rates[name].append(records / elapsed)
    return {name: statistics.median(r) for name, r in rates.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        try:
            print(f"{'size':>6}{'ours rec/s':>12}{'MB/s':>7}{'kafka-python':>14}{'MB/s':>7}{'confluent':>12}{'MB/s':>7}"
                  f"{'ours/kafka-python':>19}{'ours/confluent':>16}")
            for size in (int(s) for s in args.sizes.split(",")):
                rate = measure(broker.bootstrap, args.records, size, args.repeats)
                mb = {name: r * size / 1e6 for name, r in rate.items()}
                print(f"{size:>5}B{rate['ours']:>12,.0f}{mb['ours']:>7.1f}{rate['kafka-python']:>14,.0f}"
                      f"{mb['kafka-python']:>7.1f}{rate['confluent']:>12,.0f}{mb['confluent']:>7.1f}"
                      f"{rate['ours'] / rate['kafka-python']:>19.2f}{rate['ours'] / rate['confluent']:>16.2f}",
                      flush=True)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
