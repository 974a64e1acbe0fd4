"""Our producer against kafka-python's and confluent-kafka's, all writing to the same kafka-edu broker.

One kafka-edu broker runs as its own process (`kafka-edu server-start`). For each value size, each
repeat has every client send N records (no key, one-partition topic, acks=1) to a fresh topic, one
client after the other, timed from the first send to the end of flush(); topic metadata is fetched
before the clock starts. All three clients get the same batching settings (linger.ms=5,
batch.size=262144). The printed figure per client is the median records/s over the repeats, and the
ratios are ours / theirs.

    python benchmarks/producer.py [--records 100000] [--sizes 100,1024] [--repeats 3]

Targets (notes/performance.md): ours >= 5x kafka-python and >= 0.25x confluent-kafka.
The first repeat warms connections and the page cache and is discarded.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from _timed_send import time_confluent_produces, time_sends  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from confluent_kafka import Producer as ConfluentProducer  # noqa: E402
from kafka import KafkaProducer as KafkaPythonProducer  # noqa: E402

from kafka_edu.clients.producer.kafka_producer import KafkaProducer  # noqa: E402
from kafka_edu.clients.producer.serializers import ByteArraySerializer  # noqa: E402

LINGER_MS = 5
BATCH_SIZE = 262_144


def run_ours(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    return time_sends(KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": ByteArraySerializer,
                                     "value.serializer": ByteArraySerializer, "acks": "1", "linger.ms": LINGER_MS,
                                     "batch.size": BATCH_SIZE}), topic, records, value)


def run_kafka_python(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    return time_sends(KafkaPythonProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                                          batch_size=BATCH_SIZE), topic, records, value)


def run_confluent(bootstrap: str, topic: str, records: int, value: bytes) -> float:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS,
                                  "batch.size": BATCH_SIZE, "queue.buffering.max.messages": 2_000_000,
                                  "queue.buffering.max.kbytes": 2_000_000})
    return time_confluent_produces(producer, topic, records, value)


CLIENTS = {"ours": run_ours, "kafka-python": run_kafka_python, "confluent": run_confluent}


def measure(bootstrap: str, records: int, size: int, repeats: int) -> dict[str, float]:
    """Median records/s per client; clients take turns within every repeat."""
    value = b"x" * size
    rates: dict[str, list[float]] = {name: [] for name in CLIENTS}
    for repeat in range(repeats + 1):
        for name, run in CLIENTS.items():
            elapsed = run(bootstrap, f"bench-{name}-{size}-{repeat}", records, value)
            if repeat:
                rates[name].append(records / elapsed)
    return {name: statistics.median(r) for name, r in rates.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        try:
            print(f"{'size':>6}{'ours rec/s':>12}{'kafka-python':>14}{'confluent':>12}"
                  f"{'ours/kafka-python':>19}{'ours/confluent':>16}{'ours MB/s':>11}")
            for size in (int(s) for s in args.sizes.split(",")):
                rate = measure(broker.bootstrap, args.records, size, args.repeats)
                print(f"{size:>5}B{rate['ours']:>12,.0f}{rate['kafka-python']:>14,.0f}{rate['confluent']:>12,.0f}"
                      f"{rate['ours'] / rate['kafka-python']:>19.2f}{rate['ours'] / rate['confluent']:>16.2f}"
                      f"{rate['ours'] * size / 1e6:>11.1f}", flush=True)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
