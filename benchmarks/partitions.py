"""Flat cost in partitions: 1,000 partitions against 1, the broker's memory, and its start-up and recovery.

One kafka-edu broker runs as its own process (`kafka-edu server-start`, as broker_vs_mock.py starts it).

1. Memory idle: the broker's VmRSS right after it serves, before any topic exists.
2. Throughput: a confluent-kafka producer (acks=1, linger.ms=50, batch.size=1000000) writes N records
   of 100 B to a fresh topic of one partition, and the same N round robin over a fresh topic of 1,000
   partitions; then a fresh consumer reads all N back, assigned every partition from offset 0. Each
   repeat measures both, taking turns going first; the first repeat is discarded (connections, page
   cache), and each ratio (1,000 partitions / 1 partition) is the median of the per-repeat ratios.
   Target >= 0.5 for produce and for consume. Both cases use the same client settings. N defaults to
   1,000,000 so that each case runs in steady state: with 200,000 the one-partition case lasts 0.2-0.3 s,
   of which the 50 ms linger before the first batch, the last flush and the consumer's first fetches
   are a third, and the 1,000-partition consumer's one-off start (librdkafka adds the partitions to
   its fetches over its first round trips, and a fetch of drained partitions waits fetch.wait.max.ms)
   is a large part of its time; `--records 200000` shows that short-run figure.
3. Memory with 1,000 partitions (and their records) after the throughput runs.
4. Start-up after a clean shutdown, and recovery after SIGKILL, of the broker now holding 1,000
   partitions and more: seconds from launching the process until it serves every partition of the big
   topic (its metadata names a leader for each, and one ListOffsets for all of them succeeds on each).

    python benchmarks/partitions.py [--records 1000000] [--size 100] [--partitions 1000] [--repeats 3]
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

from _flat import consume_spread, create_topic, produce_spread, rss_mib, wait_for_leaders  # noqa: E402
from _summary import report  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402


def measure(bootstrap: str, many: int, records: int, size: int, repeats: int) -> dict[str, list[tuple[float, float]]]:
    """(produce rec/s, consume rec/s) per kept repeat, for "1" partition and for `many`.

    Each repeat appends N more records to the same two topics (record i to partition i mod P, so each
    partition gets the same share every repeat) and reads back just those.
    """
    topics = {"1": 1, "many": many}
    for name, partitions in topics.items():
        create_topic(bootstrap, f"flat-{name}", partitions)
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in topics}
    for repeat in range(repeats + 1):
        order = list(topics) if repeat % 2 else list(reversed(topics))
        for name in order:
            partitions, topic = topics[name], f"flat-{name}"
            share = {p: len(range(p, records, partitions)) for p in range(partitions)}
            produced = records / produce_spread(bootstrap, topic, partitions, records, size)
            starts = {p: repeat * n for p, n in share.items() if n}
            consumed = records / consume_spread(bootstrap, topic, starts, records)
            if repeat:
                rates[name].append((produced, consumed))
    return rates


def timed_start(broker: BrokerProcess, topic: str, partitions: int) -> float:
    """Seconds from launching the broker until it serves every partition of `topic`: its metadata
    names a leader for each, and one ListOffsets for all of them succeeds on every partition."""
    started = time.perf_counter()
    broker.start(timeout=300)
    wait_for_leaders(broker.bootstrap, topic, partitions, timeout=300)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-restart"})
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                found = consumer.offsets_for_times([TopicPartition(topic, p, 0) for p in range(partitions)], 60)
                failing = sum(bool(tp.error) for tp in found)
            except KafkaException as exc:               # the request as a whole failed (not led yet)
                failing = str(exc)
            if not failing:
                return time.perf_counter() - started
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: ListOffsets still fails: {failing}")
            time.sleep(0.05)
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="kept repeats (one more runs first, discarded)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        try:
            time.sleep(2)                              # let start-up garbage settle before reading RSS
            idle = rss_mib(broker.proc.pid)
            rates = measure(broker.bootstrap, args.partitions, args.records, args.size, args.repeats)
            loaded = rss_mib(broker.proc.pid)
            print(f"{'case':<22}{'1 partition rec/s':>19}{f'{args.partitions} partitions rec/s':>24}{'ratio':>8}")
            for phase, i in (("produce", 0), ("consume", 1)):
                one = statistics.median(r[i] for r in rates["1"])
                many = statistics.median(r[i] for r in rates["many"])
                ratio = statistics.median(m[i] / o[i] for m, o in zip(rates["many"], rates["1"], strict=True))
                print(f"{phase + f' {args.size} B':<22}{one:>19,.0f}{many:>24,.0f}{ratio:>8.2f}", flush=True)
                report("partitions", f"{phase} {args.partitions} partitions / 1", ratio, 0.5,
                       one_partition_rate=one, many_partitions_rate=many, records=args.records)
            print(f"broker RSS: idle {idle:.0f} MiB, with {args.partitions + 1} partitions "
                  f"holding {2 * (args.repeats + 1) * args.records:,} records {loaded:.0f} MiB")
            report("memory", "broker RSS idle", idle, 200, unit="MiB", higher_is_better=False)
            report("memory", f"broker RSS with {args.partitions} partitions", loaded, 256, unit="MiB",
                   higher_is_better=False)

            held, big = args.partitions + 1, "flat-many"
            broker.stop()
            clean = timed_start(broker, big, args.partitions)
            broker.kill()
            recovery = timed_start(broker, big, args.partitions)
            print(f"start-up with {held} partitions: after a clean shutdown {clean:.1f} s, "
                  f"after SIGKILL (recovery) {recovery:.1f} s")
            report("restart", f"start-up, {held} partitions, clean shutdown", clean, None, unit="s")
            report("restart", f"recovery, {held} partitions, after SIGKILL", recovery, None, unit="s")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
