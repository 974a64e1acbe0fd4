"""What benchmarks/producer.py and consumer.py share: ours, kafka-python's and confluent-kafka's client
taking turns against one kafka-edu broker process, and the table of their medians."""
from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from broker_process import BrokerProcess

NAMES = ("ours", "kafka-python", "confluent")


def median_rates(runs: dict[str, Callable[[int], float]], records: int, repeats: int) -> dict[str, float]:
    """Median records/s per client. `runs[name](repeat)` returns seconds for `records` records; the
    clients take turns within every repeat, so load from elsewhere falls on all of them, and the
    first repeat (connections and page cache warming) is discarded."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(repeats + 1):
        for name, run in runs.items():
            elapsed = run(repeat)
            if repeat:
                rates[name].append(records / elapsed)
    return {name: statistics.median(r) for name, r in rates.items()}


def main(doc: str, default_records: int, measure: Callable[[str, int, int, int], dict[str, float]]) -> int:
    """Parse --records/--sizes/--repeats, start a broker, and print one row per value size."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--records", type=int, default=default_records)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        try:
            print(f"{'size':>6}" + "".join(f"{name + ' rec/s':>20}{'MB/s':>7}" for name in NAMES)
                  + f"{'ours/kafka-python':>19}{'ours/confluent':>16}")
            for size in (int(s) for s in args.sizes.split(",")):
                rate = measure(broker.bootstrap, args.records, size, args.repeats)
                print(f"{size:>5}B" + "".join(f"{rate[name]:>20,.0f}{rate[name] * size / 1e6:>7.1f}" for name in NAMES)
                      + f"{rate['ours'] / rate['kafka-python']:>19.2f}{rate['ours'] / rate['confluent']:>16.2f}",
                      flush=True)
        finally:
            broker.stop()
    return 0
