"""Flat cost in log size: consuming from the start of a large log against its tail, and index lookups.

1. The log: a kafka-edu broker (its own process, as broker_vs_mock.py starts it) creates a topic of one
   partition and stops cleanly; the partition's directory is then filled to --log-gb gigabytes through
   our own `LogManager` (1 KiB records in 256 KiB batches, appended in this process, which is much
   faster than any client), which shuts down cleanly too, and the broker is started again on it.
2. Consume: a fresh confluent-kafka consumer (fetch.queue.backoff.ms=0, the pass of broker_vs_mock.py)
   reads --consume-mb megabytes from offset 0, and another the same amount ending at the log's end.
   Each repeat measures both, taking turns going first; the first repeat is discarded (page cache,
   connections); the ratio start / tail is the median of the per-repeat ratios. Target >= 0.9.
3. Index lookups: `OffsetIndex.lookup` and `TimeIndex.lookup` on index files of 2^8 to 2^20 entries,
   timed over many random targets in rounds in which the sizes take turns. A binary search costs
   about log2(n) probes, so the cost per lookup divided by log2 n should stay flat: its ratio 2^20 /
   2^8 within a round (median over the rounds) is about 1, below it when the fixed part of a lookup
   dominates; a linear scan would give 1,638. Target <= 1.5: the probes of an index of megabytes miss
   the CPU caches more often than those of a small one, which is memory, not the algorithm.

    python benchmarks/large_log.py [--log-gb 10] [--consume-mb 512] [--repeats 3]

The write runs at the speed of the page cache on this machine (performance.md: about 0.43 GB/s into
memory the host has reclaimed), so --log-gb sets most of the run time.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import random
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from _flat import create_topic  # noqa: E402
from _summary import report  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from broker_vs_mock import consume_pass, watermarks  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from kafka_edu.common.record.compression import CompressionType  # noqa: E402
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder  # noqa: E402
from kafka_edu.server.log.log_manager import LogManager  # noqa: E402
from kafka_edu.server.log.offset_index import OffsetIndex  # noqa: E402
from kafka_edu.server.log.time_index import TimeIndex  # noqa: E402

RECORD_SIZE = 1024
BATCH_SIZE = 256 * 1024
TOPIC = "large-log"


def make_batch() -> bytes:
    """A v2 batch of 1 KiB records stamped now (retention would delete older ones at once)."""
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, 0, write_limit=BATCH_SIZE)
    value = random.Random(7).randbytes(RECORD_SIZE)
    now = int(time.time() * 1000)
    while builder.has_room_for(None, value, timestamp=now):
        builder.append(now, None, value)
    return bytes(builder.build())


def fill(log_dir: Path, gigabytes: float) -> tuple[int, float]:
    """Append `gigabytes` to the topic's partition directly; (records, seconds)."""
    batch = make_batch()
    batches = max(1, int(gigabytes * 1e9) // len(batch))
    manager = LogManager([str(log_dir)])
    try:
        log = manager.get_log(TOPIC, 0)
        started = time.perf_counter()
        for _ in range(batches):
            log.append(batch)
        elapsed = time.perf_counter() - started
        return log.log_end_offset, elapsed
    finally:
        manager.shutdown()


def consume_rates(bootstrap: str, records: int, repeats: int) -> list[tuple[float, float]]:
    """(start rec/s, tail rec/s) for every kept repeat."""
    low, high = watermarks(bootstrap, TOPIC)
    runs = []
    for repeat in range(repeats + 1):
        places = [("start", low), ("tail", high - records)]
        if repeat % 2:
            places.reverse()
        rate = {name: records / consume_pass(bootstrap, TOPIC, start, records) for name, start in places}
        if repeat:
            runs.append((rate["start"], rate["tail"]))
    return runs


def index_lookup_costs(directory: Path, sizes: list[int], lookups: int,
                       rounds: int = 7) -> tuple[dict[str, dict[int, float]], dict[str, float]]:
    """Seconds per lookup (best round), per index kind and number of entries, and per kind the median
    over rounds of (cost / log2 n) at the largest size over the same at the smallest.

    Every round times every index once (index files written directly), so a moment when the machine
    is busy or quiet falls on all sizes of that round, and the per-round ratio cancels it.
    """
    rng = random.Random(1)
    indexes = []
    for n in sizes:
        offsets = directory / f"{n}.index"
        offsets.write_bytes(b"".join(struct.pack(">ii", 8 * i + 3, 1024 * i) for i in range(n)))
        times = directory / f"{n}.timeindex"
        times.write_bytes(b"".join(struct.pack(">qi", 1_000 * i + 1, 8 * i + 3) for i in range(n)))
        for kind, index, span in (("OffsetIndex", OffsetIndex(str(offsets), 0), 8 * n),
                                  ("TimeIndex", TimeIndex(str(times), 0), 1_000 * n)):
            indexes.append((kind, n, index, [rng.randrange(span) for _ in range(lookups)]))
    costs: dict[str, dict[int, float]] = {"OffsetIndex": {}, "TimeIndex": {}}
    ratios: dict[str, list[float]] = {kind: [] for kind in costs}
    small, large = min(sizes), max(sizes)
    for _ in range(rounds):
        this_round: dict[tuple[str, int], float] = {}
        for kind, n, index, targets in indexes:
            lookup = index.lookup
            started = time.perf_counter()
            for target in targets:
                lookup(target)
            this_round[kind, n] = (time.perf_counter() - started) / lookups
            costs[kind][n] = min(this_round[kind, n], costs[kind].get(n, math.inf))
        for kind in costs:
            growth = this_round[kind, large] / this_round[kind, small]
            ratios[kind].append(growth / (math.log2(large) / math.log2(small)))
    for _, _, index, _ in indexes:
        index.close()
        os.remove(index.path)
    return costs, {kind: statistics.median(r) for kind, r in ratios.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-gb", type=float, default=10, help="size of the log (default 10)")
    parser.add_argument("--consume-mb", type=int, default=512, help="megabytes read per pass (default 512)")
    parser.add_argument("--repeats", type=int, default=3, help="kept repeats (one more runs first, discarded)")
    parser.add_argument("--lookups", type=int, default=10_000, help="index lookups per size and round (default 10000)")
    parser.add_argument("--dir", default=None, help="where the log goes (default: a temporary directory)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    sizes = [4 ** k for k in range(4, 11)]            # 256 .. 1,048,576 entries
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        costs, per_log = index_lookup_costs(Path(tmp), sizes, args.lookups)
        print(f"{'index entries':>14}{'log2 n':>8}" + "".join(f"{k + ' us':>16}" for k in costs))
        for n in sizes:
            print(f"{n:>14,}{math.log2(n):>8.0f}" + "".join(f"{c[n] * 1e6:>16.2f}" for c in costs.values()))
        small, large = sizes[0], sizes[-1]
        for kind, cost in costs.items():
            print(f"{kind}: {large:,} entries cost {cost[large] / cost[small]:.2f}x {small:,} entries "
                  f"(n grew {large // small:,}x, log2 n {math.log2(large) / math.log2(small):.2f}x); "
                  f"cost per log2 n at 2^20 / at 2^8 = {per_log[kind]:.2f}, median over rounds "
                  f"(1 is logarithmic, {large / small / (math.log2(large) / math.log2(small)):,.0f} would be linear)")
            report("large_log", f"{kind}.lookup (cost / log2 n) 2^20 / 2^8", per_log[kind], 1.5,
                   higher_is_better=False, cost_small_us=cost[small] * 1e6, cost_large_us=cost[large] * 1e6)

        broker = BrokerProcess(Path(tmp) / "broker", {"num.partitions": "1"}).start()
        try:
            create_topic(broker.bootstrap, TOPIC, 1)
            broker.stop()
            records, seconds = fill(broker.log_dir, args.log_gb)
            size = sum(f.stat().st_size for f in (broker.log_dir / f"{TOPIC}-0").iterdir())
            print(f"\nwrote {size / 1e9:.2f} GB ({records:,} records of {RECORD_SIZE} B) through LogManager "
                  f"in {seconds:.1f} s ({size / seconds / 1e9:.2f} GB/s)")
            broker.start(timeout=300)
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            producer.produce(TOPIC, b"last", partition=0)       # a leader's append moves the high watermark up
            if producer.flush(30):
                raise RuntimeError("the last record was not delivered")
            del producer                                        # no reconnect attempts once the broker stops
            count = args.consume_mb * 1_000_000 // RECORD_SIZE
            runs = consume_rates(broker.bootstrap, count, args.repeats)
            start = statistics.median(r[0] for r in runs)
            tail = statistics.median(r[1] for r in runs)
            ratio = statistics.median(s / t for s, t in runs)
            print(f"consume {count:,} records of {RECORD_SIZE} B: from the start {start:,.0f} rec/s "
                  f"({start * RECORD_SIZE / 1e6:.0f} MB/s), from the tail {tail:,.0f} rec/s "
                  f"({tail * RECORD_SIZE / 1e6:.0f} MB/s), ratio start / tail {ratio:.2f}")
            report("large_log", f"consume start / tail of {size / 1e9:.1f} GB log", ratio, 0.9,
                   start_rate=start, tail_rate=tail, log_bytes=size)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
