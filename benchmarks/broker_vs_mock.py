"""Our broker against librdkafka's mock cluster, driven by the same confluent-kafka client.

Both brokers are measured in this run: a kafka-edu broker started as its own process
(`kafka-edu server-start`) and a one-broker mock cluster held by a child process. For each value
size the producer (acks=1, linger.ms=50, batch.size=1000000) writes N records, then a consumer reads
back what the broker retains (the mock keeps only about 5 MiB per partition). Prints records/s and MB/s for both and the ratio ours/mock.

    python benchmarks/broker_vs_mock.py [--records 200000] [--sizes 100,1024] [--repeats 3]

The first repeat of each case warms the page cache and is discarded (performance.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from broker_process import BrokerProcess  # noqa: E402
from external import MockCluster  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 50,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 2_000_000})
    producer.list_topics(topic, timeout=10)          # metadata (and auto-creation) outside the timing
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed


def consume(bootstrap: str, topic: str) -> tuple[int, float]:
    """Read what the broker retains (the mock keeps only about 5 MiB per partition): (records, seconds)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 0})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    records = high - low
    consumer.assign([TopicPartition(topic, 0, low)])
    seen = 0
    started = time.perf_counter()
    while seen < records:
        batch = consumer.consume(min(10_000, records - seen), 5)   # never wait for records that cannot come
        if not batch:
            raise RuntimeError(f"consumer stalled at {seen}/{records}")
        seen += sum(1 for m in batch if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return records, elapsed


def measure(bootstrap: str, label: str, records: int, size: int, repeats: int) -> tuple[float, float]:
    """Median records/s of producing and of consuming."""
    produce_rates, consume_rates = [], []
    for repeat in range(repeats + 1):
        topic = f"bench-{label}-{size}-{repeat}"
        produce_s = produce(bootstrap, topic, records, size)
        retained, consume_s = consume(bootstrap, topic)
        if repeat:                       # the first repeat only warms caches
            produce_rates.append(records / produce_s)
            consume_rates.append(retained / consume_s)
    return statistics.median(produce_rates), statistics.median(consume_rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        mock = MockCluster(1)
        try:
            print(f"{'case':<18}{'ours rec/s':>12}{'ours MB/s':>11}{'mock rec/s':>12}{'mock MB/s':>11}{'ratio':>8}")
            for size in (int(s) for s in args.sizes.split(",")):
                results = {name: measure(bootstrap, name, args.records, size, args.repeats)
                           for name, bootstrap in (("ours", ours.bootstrap), ("mock", mock.bootstrap))}
                for phase, index in (("produce", 0), ("consume", 1)):
                    rate = {n: r[index] for n, r in results.items()}
                    mb = {n: rate[n] * size / 1e6 for n in rate}
                    print(f"{phase + ' ' + str(size) + ' B':<18}{rate['ours']:>12,.0f}{mb['ours']:>11.1f}"
                          f"{rate['mock']:>12,.0f}{mb['mock']:>11.1f}{rate['ours'] / rate['mock']:>8.2f}")
        finally:
            mock.stop()
            ours.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
