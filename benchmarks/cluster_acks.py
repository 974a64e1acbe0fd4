"""What replication costs: acks=all to a 3-broker cluster (RF=3) against acks=1 to a single broker,
and how fast a follower that fell behind catches up with its leader.

Both setups run in this run, as processes started the way a user starts them: a single broker
(`kafka-edu server-start` on its embedded ZooKeeper), and three brokers on Debian's ZooKeeper
(`kafka-edu server-start` each, with `zookeeper.connect`), whose controller creates the topics and
sends LeaderAndIsr and UpdateMetadata over the network.

Both run Kafka's defaults (three network threads, eight I/O threads, HW checkpoints every 5 s), not
the lighter settings of the tests' process-cluster harness, so that the ratio compares replication
with no replication rather than one broker configuration with another.

Throughput, for each value size: a confluent-kafka producer (linger.ms=50, batch.size=1000000)
writes N records to a fresh topic of P partitions, to each partition in turn: with acks=all
to the cluster's topic of replication factor 3 (every record acknowledged only once both followers
fetched it), and with acks=1 to the single broker's topic of as many partitions. P defaults to 3,
so that each of the three brokers leads one partition and follows two, as a cluster's load is
spread; with one partition, one broker leads and two only follow (`--partitions 1`). The records
are dealt out explicitly because librdkafka's default partitioner is sticky: it fills one partition
for a while before moving on, and a run whose records are all queued at once can land most of them
on one partition, that is on one leader (seen here: 190 of 206 MB). Each
connection carries one request at a time (a broker reads a connection's next request only after
answering the last), so leaders on three brokers are three pipelines where one leader is one. Each
repeat measures both, taking turns going first; the first repeat (connections, page cache) is
discarded, rates are medians of the kept repeats, and the ratio is the median of the per-repeat
ratios. A third setup bounds what acks=all can reach here: acks=1 to the same cluster topic, whose
followers still fetch every record but make nobody wait (the replication work without its round
trips), timed until every follower's log is as long as its leader's. acks=all can at best match
it, so its ratio to the single broker is the ceiling this machine's cores leave for the target.
Every repeat deletes its topics once measured, so that no repeat pays for the page cache the
earlier ones filled (`delete_topics` says why). Beside each rate: the CPU seconds the broker
processes (three, or one) spent per 100 MB produced, from /proc, which says how much of the gap
is work (every byte is received, parsed and written three times) rather than waiting.

Catch-up: one follower of a fresh RF=3 topic is paused (SIGSTOP: its fetchers, and everything else,
stand still), the producer writes M megabytes with acks=1 to the leader (the leader's append rate),
the follower is resumed (SIGCONT) and timed until its log holds as many bytes as the leader's (the
follower's copy is byte for byte, so equal sizes mean equal logs). The ZooKeeper session and the ISR
lag time are raised so that the pause costs the follower neither its registration nor its ISR seat.

    python benchmarks/cluster_acks.py [--records 100000] [--sizes 100,1024] [--repeats 3] [--partitions 3]
                                      [--catch-up-mb 32]
                                      [--cluster-config key=value ...] [--config key=value ...]

Needs Java and Debian's zookeeper package (as the cluster tests do), and confluent-kafka.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat"), str(ROOT / "tests" / "cluster")]

from _summary import report  # noqa: E402
from _timed_send import time_confluent_produces  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from external import ZOOKEEPER_JARS, ZooKeeperServer  # noqa: E402
from process_cluster import ProcessCluster  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PRODUCER = {"linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000}
# A paused follower keeps its session and its ISR seat. Everything else is Kafka's default, as on the
# single broker: the process-cluster harness of the tests runs one network thread, four I/O threads
# and HW checkpoints every 500 ms to keep test machines light, and those must not leak into a
# comparison with a broker that runs three, eight and every 5 s.
CLUSTER = {"zookeeper.session.timeout.ms": "30000", "replica.lag.time.max.ms": "60000",
           "replica.fetch.wait.max.ms": "500", "replica.fetch.backoff.ms": "1000", "auto.create.topics.enable": "false",
           "num.network.threads": "3", "num.io.threads": "8", "replica.high.watermark.checkpoint.interval.ms": "5000"}
TARGET_RATIO = 0.5


def create_replicated_topic(cluster: ProcessCluster, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=30).values():
        future.result(60)

    def full_isr():
        states = [cluster.partition_state(topic, p) for p in range(partitions)]
        return all(s is not None and len(s.leader_and_isr.isr) == 3 for s in states)

    cluster.wait_until(full_isr, 60, what=f"{topic}: ISR of three")
    # The ISR of a new partition is full from the start, but its followers only begin to fetch it once
    # the fetch they have parked on the leader for older partitions returns (replica.fetch.wait.max.ms,
    # 500 ms here): one record per partition with acks=all, untimed, waits that out.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(partitions):
        producer.produce(topic, b"warm-up", partition=partition)
    if producer.flush(60):
        raise RuntimeError(f"{topic}: the warm-up records were not acknowledged")


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str, partitions: int = 1) -> float:
    """Seconds to produce and deliver `records` values of `size` bytes (to partition 0, or round robin over all)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER})
    where = {"partition": 0} if partitions == 1 else {"round_robin": partitions}
    return time_confluent_produces(producer, topic, records, b"x" * size, **where)


def cpu_seconds(brokers: list[BrokerProcess]) -> float:
    """User + system CPU the broker processes have used so far (Linux /proc)."""
    total = 0
    for broker in brokers:
        fields = Path(f"/proc/{broker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])          # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def throughput(cluster: ProcessCluster, single: BrokerProcess, records: int, size: int, repeats: int,
               partitions: int) -> dict[str, list[tuple[float, float]]]:
    """(records/s, broker CPU seconds per 100 MB) of every kept repeat: 'all' (cluster, RF=3, acks=all),
    'one' (single broker, acks=1) and 'ceiling' (cluster, RF=3, acks=1: replication nobody waits for)."""
    results: dict[str, list[tuple[float, float]]] = {"all": [], "one": [], "ceiling": []}
    setups = {"all": (cluster.bootstrap, "all", cluster.brokers), "one": (single.bootstrap, "1", [single]),
              "ceiling": (cluster.bootstrap, "1", cluster.brokers)}
    for repeat in range(repeats + 1):
        topic = f"acks-{size}-{repeat}"
        create_replicated_topic(cluster, topic, partitions)
        order = list(setups) if repeat % 2 else list(reversed(setups))
        for name in order:
            bootstrap, acks, brokers = setups[name]
            if name == "ceiling":       # a topic of its own, whose followers start level with the leader
                create_replicated_topic(cluster, f"{topic}-acks1", partitions)
            cpu = cpu_seconds(brokers)
            elapsed = produce(bootstrap, f"{topic}-acks1" if name == "ceiling" else topic, records, size, acks,
                              partitions)
            if name == "ceiling":       # the replication work is part of the time: wait for the followers
                started = time.perf_counter()
                cluster.wait_until(lambda t=f"{topic}-acks1": replicas_level(cluster, t, partitions), 120,
                                   what="the followers to catch up", interval=0.001)
                elapsed += time.perf_counter() - started
            cpu = cpu_seconds(brokers) - cpu
            if repeat:                   # the first repeat only warms caches and connections
                results[name].append((records / elapsed, cpu / (records * size / 1e8)))
        delete_topics(cluster.bootstrap, cluster.brokers, [topic, f"{topic}-acks1"], partitions)
        delete_topics(single.bootstrap, [single], [topic], partitions)
    return results


def delete_topics(bootstrap: str, brokers: list[BrokerProcess], topics: list[str], partitions: int) -> None:
    """Delete a repeat's topics and wait until their logs are gone from every broker's disk.

    Each repeat writes a few hundred megabytes (three times over on the cluster). Kept, they would
    grow the page cache by gigabytes over a run, into pages this virtual machine had given back to
    its host (free page reporting), and the first write into such a page costs four to nine times the
    CPU of a write into a page freed a moment before: later repeats, and the cluster more than the
    single broker, would pay for the earlier ones. Deleted, the next repeat's logs reuse the pages
    the last one freed while they are still warm.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(60)
    logs = [b.log_dir / f"{t}-{p}" for b in brokers for t in topics for p in range(partitions)]
    ProcessCluster.wait_until(lambda: not any(log.exists() for log in logs), 60, what=f"{topics} deleted")


def log_bytes(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    return sum(f.stat().st_size for f in (broker.log_dir / f"{topic}-{partition}").glob("*.log"))


def replicas_level(cluster: ProcessCluster, topic: str, partitions: int) -> bool:
    """Every replica of every partition holds as many log bytes as the others (followers copy byte for byte)."""
    return all(len({log_bytes(b, topic, p) for b in cluster.brokers}) == 1 for p in range(partitions))


def catch_up(cluster: ProcessCluster, megabytes: int, size: int = 1024) -> tuple[float, float, int]:
    """(leader append MB/s, follower catch-up MB/s, bytes copied) for `megabytes` written while a follower was paused."""
    topic = "catch-up"
    create_replicated_topic(cluster, topic)
    leader_id = cluster.partition_state(topic, 0).leader_and_isr.leader
    leader = cluster.brokers[leader_id]
    follower = next(b for b in cluster.brokers if b.broker_id != leader_id)
    records = megabytes * 1_000_000 // size
    follower.proc.send_signal(signal.SIGSTOP)
    try:
        elapsed = produce(leader.bootstrap, topic, records, size, "1")
        behind = log_bytes(leader, topic) - log_bytes(follower, topic)
    finally:
        follower.proc.send_signal(signal.SIGCONT)
    resumed = time.perf_counter()
    target = log_bytes(leader, topic)
    cluster.wait_until(lambda: log_bytes(follower, topic) >= target, 300, what="the follower to catch up", interval=0.01)
    caught_up = time.perf_counter() - resumed
    return records * size / elapsed / 1e6, behind / caught_up / 1e6, behind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3, help="partitions of every throughput topic")
    parser.add_argument("--catch-up-mb", type=int, default=32, help="0 skips the catch-up measurement")
    parser.add_argument("--cluster-config", action="append", default=[], metavar="KEY=VALUE",
                        help="override the three brokers' configuration (repeatable)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="override the configuration of every broker, the single one's too (repeatable)")
    args = parser.parse_args()
    both = dict(item.split("=", 1) for item in args.config)
    overrides = {**both, **dict(item.split("=", 1) for item in args.cluster_config)}
    tuned = "".join(f", {k}={v}" for k, v in overrides.items())       # a tuned run is reported as such
    logging.basicConfig(level=logging.ERROR)
    if shutil.which("java") is None or not all(Path(j).exists() for j in ZOOKEEPER_JARS):
        print("skipped: the cluster needs Java and Debian's zookeeper package (make system-packages)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        zookeeper = ZooKeeperServer(work / "zookeeper").start()
        cluster = single = None
        try:
            cluster = ProcessCluster(work / "cluster", zookeeper.connect, "bench", 3, {**CLUSTER, **overrides}).start()
            for scope, settings in (("every broker", both), ("the cluster's brokers", overrides)):
                if settings:
                    print(f"overrides for {scope}:", ", ".join(f"{k}={v}" for k, v in settings.items()))
            single = BrokerProcess(work / "single", {"num.partitions": str(args.partitions), **both}).start()
            print(f"{args.records:,} records per run, {args.partitions} partition(s), median of {args.repeats} "
                  "repeats after a discarded one")
            print(f"{'size':>6}{'acks=all RF=3 rec/s':>22}{'MB/s':>7}{'CPU s/100MB':>12}"
                  f"{'acks=1 single rec/s':>22}{'MB/s':>7}{'CPU s/100MB':>12}{'ratio':>8}")
            for size in (int(s) for s in args.sizes.split(",")):
                results = throughput(cluster, single, args.records, size, args.repeats, args.partitions)
                rate = {name: statistics.median(r for r, _ in runs) for name, runs in results.items()}
                cpu = {name: statistics.median(c for _, c in runs) for name, runs in results.items()}
                ratio, ceiling = (statistics.median(a[0] / o[0] for a, o in zip(results[name], results["one"],
                                                                                   strict=True))
                                  for name in ("all", "ceiling"))
                print(f"{size:>5}B{rate['all']:>22,.0f}{rate['all'] * size / 1e6:>7.1f}{cpu['all']:>12.2f}"
                      f"{rate['one']:>22,.0f}{rate['one'] * size / 1e6:>7.1f}{cpu['one']:>12.2f}{ratio:>8.2f}",
                      flush=True)
                print(f"{'':>6}ceiling: acks=1 to the cluster {rate['ceiling']:,.0f} rec/s, "
                      f"{cpu['ceiling']:.2f} CPU s/100MB, {ceiling:.2f} of the single broker", flush=True)
                report("cluster_acks", f"acks=all RF=3 / acks=1 single, {size} B{tuned}", ratio, TARGET_RATIO,
                       ours_rate=rate["all"], peer_rate=rate["one"])
                report("cluster_acks", f"ceiling: acks=1 RF=3 / acks=1 single, {size} B{tuned}", ceiling, None,
                       ours_rate=rate["ceiling"], peer_rate=rate["one"])
            if args.catch_up_mb > 0:
                append, copy, behind = catch_up(cluster, args.catch_up_mb)
                print(f"\ncatch-up of a follower paused while {behind / 1e6:.1f} MB were appended (1 KiB records, acks=1):")
                print(f"leader append {append:.1f} MB/s | follower catch-up {copy:.1f} MB/s | "
                      f"ratio {copy / append:.2f}", flush=True)
                report("cluster_acks", f"follower catch-up / leader append{tuned}", copy / append, None,
                       ours_rate=copy, peer_rate=append)
        finally:
            if single is not None:
                single.stop()
            if cluster is not None:
                cluster.shutdown()
            zookeeper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
