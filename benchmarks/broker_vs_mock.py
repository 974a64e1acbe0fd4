"""Our broker against librdkafka's mock cluster, driven by the same confluent-kafka client.

Both brokers are measured in this run: a kafka-edu broker started as its own process
(`kafka-edu server-start`) and a one-broker mock cluster held by a child process. Every repeat
measures ours and the mock back to back, so load from other processes on the machine falls on both.

Throughput, for each value size:
- produce: the producer (acks=1, linger.ms=50, batch.size=1000000) writes N records to partition 0.
- consume: both consumers read the same records. The mock keeps only about 5 MiB per partition, so
  the window is the newest W records that both brokers still hold; each pass is a fresh consumer
  (default settings plus fetch.queue.backoff.ms=0) that reads the window once, timed from assign()
  to its last record, and passes repeat until about N records have been read. A fresh consumer per
  pass is needed because a consumer at the end of its data has an empty Fetch parked on the broker
  for fetch.wait.max.ms, which a seek would have to wait out.

Latency: a producer (acks=1, linger.ms=0) sends one 100 B record every millisecond and a consumer
with the client's default fetch settings (fetch.wait.max.ms=500, fetch.min.bytes=1) reads them;
each record carries its send time, and p50/p99 of receive minus send are printed for both brokers.
The mock answers an empty Fetch only when fetch.wait.max.ms runs out, so its figure shows that wait.
During that traffic (one record per request) the CPU time of each broker's process, user plus system
from /proc, is divided by the wall time: the share of one core each broker needs for it. The mock's
process also holds the idle producer that keeps the cluster alive.

    python benchmarks/broker_vs_mock.py [--records 200000] [--sizes 100,1024] [--repeats 3]
                                        [--latency-seconds 3] [--latency-rate 1000] [--latency-repeats 3]
                                        [--broker-config key=value ...]

The first repeat of each case warms the page cache and connections and is discarded (performance.md).
Rates are medians over the kept repeats; the ratio is the median of the per-repeat ratios, each
taken from two measurements made back to back, which is steadier on a shared machine.
The latency and CPU runs alternate between the brokers too, and their medians are printed.
Each ratio, the CPU share and the p99 are also reported through `_summary.report` for `make bench`.

`--broker-config key=value` (repeatable) overrides our broker's configuration, e.g. to compare
Kafka's 100 KiB socket buffers (`socket.send.buffer.bytes`, `socket.receive.buffer.bytes`)
with the operating system's autotuned ones (-1), which the mock uses.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from _summary import report  # noqa: E402
from _timed_consume import time_confluent_consume  # noqa: E402
from _timed_send import BULK_PRODUCER, time_confluent_produces  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from external import MockCluster  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

STAMP = struct.Struct(">q")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, **BULK_PRODUCER})
    return time_confluent_produces(producer, topic, records, b"x" * size, partition=0)


def _consumer(bootstrap: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, **extra})


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = _consumer(bootstrap)
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def consume_pass(bootstrap: str, topic: str, start: int, count: int) -> float:
    """Seconds a fresh consumer takes to read `count` records from `start` (connections made beforehand)."""
    # a short stall limit: never wait for records that cannot come
    return time_confluent_consume(_consumer(bootstrap, **{"fetch.queue.backoff.ms": 0}), topic, {0: start}, count,
                                  stall_seconds=5)


def consume(bootstrap: str, topic: str, window: int, records: int) -> float:
    """Records/s reading the newest `window` records in fresh-consumer passes, about `records` in all."""
    high = watermarks(bootstrap, topic)[1]
    passes = max(1, math.ceil(records / window))
    elapsed = sum(consume_pass(bootstrap, topic, high - window, window) for _ in range(passes))
    return passes * window / elapsed


def measure(brokers: dict[str, str], records: int, size: int, repeats: int) -> dict[str, list[tuple[float, float]]]:
    """(produce records/s, consume records/s) of every kept repeat, per broker.

    The brokers take turns going first, so whatever the first of a pair pays (a cold page cache,
    another process's burst) falls on both alike over the run.
    """
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in brokers}
    for repeat in range(repeats + 1):
        topic = f"bench-{size}-{repeat}"
        order = list(brokers) if repeat % 2 else list(reversed(brokers))
        produced = {name: records / produce(brokers[name], topic, records, size) for name in order}
        window = min(high - low for low, high in (watermarks(b, topic) for b in brokers.values()))
        consumed = {name: consume(brokers[name], topic, window, records) for name in order}
        if repeat:                       # the first repeat only warms caches
            for name in brokers:
                rates[name].append((produced[name], consumed[name]))
    return rates


def await_leader(client, topic: str, timeout: float = 10) -> None:
    """Wait until partition 0 of `topic` has a leader: the first request auto-creates it, and a consumer
    asking for its watermarks in between would fail with UNKNOWN_PARTITION."""
    deadline = time.monotonic() + timeout
    while True:
        partitions = client.list_topics(topic, timeout=timeout).topics[topic].partitions
        if 0 in partitions and partitions[0].leader >= 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"partition 0 of {topic} has no leader after {timeout}s")
        time.sleep(0.05)


def latency(bootstrap: str, topic: str, seconds: float, rate: int, pid: int) -> tuple[float, float, float]:
    """(p50, p99) milliseconds from produce() to the consumer receiving the record, and the share of
    one core the broker process `pid` used meanwhile (after the warm-up)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    await_leader(producer, topic)
    consumer = _consumer(bootstrap)
    high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.assign([TopicPartition(topic, 0, high)])
    total = int(seconds * rate)
    warmup = max(1, rate // 5)           # the first 200 ms set up connections and the fetch loop
    latencies: list[float] = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            seen = 0
            while seen < warmup + total:
                message = consumer.poll(5)
                if message is None:
                    raise RuntimeError(f"consumer stalled at {seen}/{warmup + total}")
                if message.error():
                    continue
                received = time.perf_counter_ns()
                if seen >= warmup:
                    latencies.append((received - STAMP.unpack_from(message.value())[0]) / 1e6)
                seen += 1
        except BaseException as exc:     # reported by the caller
            failure.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    padding = bytes(100 - STAMP.size)
    started = time.perf_counter()
    cpu_from = wall_from = None
    for i in range(warmup + total):
        if i == warmup:
            cpu_from, wall_from = cpu_seconds(pid), time.perf_counter()
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, STAMP.pack(time.perf_counter_ns()) + padding, partition=0)
        producer.poll(0)
    core_share = (cpu_seconds(pid) - cpu_from) / (time.perf_counter() - wall_from)
    producer.flush(30)
    reader.join(30)
    consumer.close()
    if failure:
        raise failure[0]
    if reader.is_alive():
        raise RuntimeError("the latency consumer did not finish")
    cuts = statistics.quantiles(latencies, n=100)
    return cuts[49], cuts[98], core_share


TARGETS = {"produce 100 B": 1.0, "consume 100 B": 1.0, "produce 1024 B": 0.9, "consume 1024 B": 1.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=3.0, help="0 skips the latency measurement")
    parser.add_argument("--latency-rate", type=int, default=1000, help="records per second")
    parser.add_argument("--latency-repeats", type=int, default=3,
                        help="latency and CPU runs per broker, interleaved; medians are printed")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="override our broker's configuration (repeatable)")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.broker_config)
    with tempfile.TemporaryDirectory() as tmp:
        ours = BrokerProcess(Path(tmp), {"num.partitions": "1", **overrides}).start()
        mock = MockCluster(1)
        brokers = {"ours": ours.bootstrap, "mock": mock.bootstrap}
        pids = {"ours": ours.proc.pid, "mock": mock.proc.pid}
        try:
            if overrides:
                print("our broker's overrides:", ", ".join(f"{k}={v}" for k, v in overrides.items()))
            print(f"{'case':<18}{'ours rec/s':>12}{'ours MB/s':>11}{'mock rec/s':>12}{'mock MB/s':>11}{'ratio':>8}")
            for size in (int(s) for s in args.sizes.split(",")):
                results = measure(brokers, args.records, size, args.repeats)
                for phase, index in (("produce", 0), ("consume", 1)):
                    rate = {n: statistics.median(r[index] for r in runs) for n, runs in results.items()}
                    ratio = statistics.median(o[index] / m[index] for o, m in zip(results["ours"], results["mock"], strict=True))
                    mb = {n: rate[n] * size / 1e6 for n in rate}
                    case = f"{phase} {size} B"
                    print(f"{case:<18}{rate['ours']:>12,.0f}{mb['ours']:>11.1f}"
                          f"{rate['mock']:>12,.0f}{mb['mock']:>11.1f}{ratio:>8.2f}", flush=True)
                    report("broker_vs_mock", case, ratio, TARGETS.get(case), ours_rate=rate["ours"],
                           peer_rate=rate["mock"], unit_rate="records/s")
            if args.latency_seconds > 0:
                print(f"\nend-to-end latency, {args.latency_rate} records/s of 100 B for {args.latency_seconds:g} s "
                      "(producer acks=1 linger.ms=0; consumer defaults: fetch.wait.max.ms=500)")
                print(f"{'broker':<8}{'p50 ms':>10}{'p99 ms':>10}{'% of a core':>13}")
                runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in brokers}
                for repeat in range(args.latency_repeats):
                    for name in (list(brokers) if repeat % 2 else list(reversed(brokers))):
                        runs[name].append(latency(brokers[name], f"bench-latency-{repeat}", args.latency_seconds,
                                                  args.latency_rate, pids[name]))
                p50, p99, core = ({n: statistics.median(r[i] for r in rs) for n, rs in runs.items()} for i in range(3))
                for name in brokers:
                    print(f"{name:<8}{p50[name]:>10.2f}{p99[name]:>10.2f}{100 * core[name]:>12.1f}%", flush=True)
                report("broker_vs_mock", f"CPU at {args.latency_rate} requests/s, one record each", 100 * core["ours"],
                       25.0, unit="% of a core", higher_is_better=False, peer_value=100 * core["mock"])
                report("broker_vs_mock", "end-to-end p99 latency", p99["ours"], 10.0, unit="ms",
                       higher_is_better=False, peer_value=p99["mock"])
        finally:
            mock.stop()
            ours.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
