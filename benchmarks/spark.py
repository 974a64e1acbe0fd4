"""Spark with format("kafka_edu") against confluent-kafka, on one kafka-edu broker process.

One kafka-edu broker runs as its own process (`kafka-edu server-start`), so its CPU time can be
told apart from Spark's. A SparkSession runs in local[2] mode. On topics with two partitions:

1. write: Spark writes N records of 100 bytes through the sink (kafka-edu's idempotent producer in
   each task) vs confluent-kafka's producer writing N records of 100 bytes (target >= 0.3x);
2. batch read: spark.read.format("kafka_edu") of those N records into the `noop` sink vs
   confluent-kafka consuming the same N records from offset 0 (target >= 0.5x);
3. streaming: readStream of the N records with maxOffsetsPerTrigger=1,000,000 and availableNow
   into `noop`: end-to-end records/s and the duration of each micro-batch;
4. the chapter's clickstream pipeline (kafka_edu/spark/clickstream.py) with --pipeline-records
   records (10 million by default; 0 skips it): generation through the sink, the windowed
   streaming query to a topic and Parquet, and the batch check, which must find no mismatch.

For each Spark phase the CPU seconds are split between the driver's JVM, the Python workers it
forks (all descendants of the JVM), the broker process, and this (driver) Python process, read from
/proc. Ratios are ours / confluent-kafka's; records/s are medians of --repeats runs, after one
untimed Spark pass that starts the Python workers.

    python benchmarks/spark.py [--records 1000000] [--repeats 2] [--pipeline-records 10000000]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

from _summary import report  # noqa: E402
from broker_process import BrokerProcess  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kafka_edu.clients.admin import ClusterAdmin, NewTopic  # noqa: E402

VALUE = b"v" * 100
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, with_children: bool = False) -> float:
    """User + system CPU of a process (and of its reaped children) from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + ((cutime + cstime) if with_children else 0)) / TICKS


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found


class CpuSplit:
    """CPU seconds used meanwhile by the JVM, its Python workers, the broker and this process."""

    def __init__(self, jvm_pid: int, broker_pid: int):
        self.jvm_pid, self.broker_pid = jvm_pid, broker_pid

    def sample(self) -> dict[str, float]:
        jvm, with_reaped = cpu_seconds(self.jvm_pid), cpu_seconds(self.jvm_pid, True)
        return {"JVM": jvm,      # workers that exited are counted in the JVM's children's time
                "Python workers": with_reaped - jvm + sum(cpu_seconds(p, True) for p in descendants(self.jvm_pid)),
                "broker": cpu_seconds(self.broker_pid), "driver (Python)": cpu_seconds(os.getpid())}

    def __enter__(self) -> "CpuSplit":
        self.before = self.sample()
        return self

    def __exit__(self, *exc) -> None:
        after = self.sample()
        self.used = {k: max(after[k] - self.before[k], 0.0) for k in after}

    def __str__(self) -> str:
        return ", ".join(f"{k} {v:.1f} s" for k, v in self.used.items())


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def confluent_produce(servers: str, topic: str, records: int) -> float:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "enable.idempotence": True})

    def run():
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=i % 2)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush()
    return records / timed(run)


def confluent_consume(servers: str, topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    consumer.consume(1, 5)                          # connect before the clock starts
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])

    def run():
        seen = 0
        while seen < records:
            seen += sum(1 for m in consumer.consume(10_000, 1.0) if not m.error())
    rate = records / timed(run)
    consumer.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pipeline-records", type=int, default=10_000_000)
    args = parser.parse_args()
    from pyspark.sql import functions as F

    from kafka_edu.spark.source import spark_session
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    broker = BrokerProcess(work / "broker", {"num.io.threads": "4", "num.network.threads": "2"}).start()
    spark = spark_session("bench-spark", local_dir=ROOT / "_build" / "spark-local")
    jvm_pid = next(p for p in descendants(os.getpid()) if "java" in Path(f"/proc/{p}/comm").read_text())
    split = lambda: CpuSplit(jvm_pid, broker.proc.pid)      # noqa: E731
    servers, n = broker.bootstrap, args.records
    try:
        with ClusterAdmin(servers) as admin:
            admin.create_topics([NewTopic(f"{kind}-{r}", 2, 1) for kind in ("spark", "confluent")
                                 for r in range(args.repeats)] + [NewTopic("warm-up", 2, 1)])
        rows = spark.range(n, numPartitions=2).select(F.lit(VALUE).alias("value"))
        sink = lambda topic: (rows.write.format("kafka_edu").mode("append")    # noqa: E731
                              .option("kafka.bootstrap.servers", servers).option("topic", topic).save())
        sink("warm-up")                                 # starts the Python workers; not timed
        ours_w, theirs_w = [], []
        for r in range(args.repeats):
            with split() as cpu:
                ours_w.append(n / timed(lambda r=r: sink(f"spark-{r}")))
            theirs_w.append(confluent_produce(servers, f"confluent-{r}", n))
        ours, theirs = statistics.median(ours_w), statistics.median(theirs_w)
        print(f"write  {n:,} x 100 B: Spark sink {ours:,.0f} rec/s, confluent-kafka {theirs:,.0f} rec/s, "
              f"ratio {ours / theirs:.2f} (target >= 0.3)\n       CPU: {cpu}")
        report("spark", "write 100 B, Spark sink / confluent-kafka", ours / theirs, 0.3, ours_rate=ours,
               peer_rate=theirs, unit_rate="records/s")

        load = lambda: (spark.read.format("kafka_edu").option("kafka.bootstrap.servers", servers)  # noqa: E731
                        .option("subscribe", "spark-0").load())
        load().write.format("noop").mode("overwrite").save()      # warm-up, not timed
        ours_r, theirs_r = [], []
        for _ in range(args.repeats):
            with split() as cpu:
                ours_r.append(n / timed(lambda: load().write.format("noop").mode("overwrite").save()))
            theirs_r.append(confluent_consume(servers, "spark-0", n))
        ours, theirs = statistics.median(ours_r), statistics.median(theirs_r)
        print(f"read   {n:,} x 100 B: Spark source {ours:,.0f} rec/s, confluent-kafka {theirs:,.0f} rec/s, "
              f"ratio {ours / theirs:.2f} (target >= 0.5)\n       CPU: {cpu}")
        report("spark", "read 100 B, Spark source / confluent-kafka", ours / theirs, 0.5, ours_rate=ours,
               peer_rate=theirs, unit_rate="records/s")

        with split() as cpu:
            query = (spark.readStream.format("kafka_edu").option("kafka.bootstrap.servers", servers)
                     .option("subscribe", "spark-0").option("startingOffsets", "earliest")
                     .option("maxOffsetsPerTrigger", 1_000_000).load().writeStream.format("noop")
                     .option("checkpointLocation", str(work / "checkpoint")).trigger(availableNow=True).start())
            seconds = timed(query.awaitTermination)
        batches = [p for p in query.recentProgress if p.numInputRows]
        print(f"stream {n:,} records, maxOffsetsPerTrigger 1M: {n / seconds:,.0f} rec/s end to end; "
              f"batches {[b.numInputRows for b in batches]} took "
              f"{[round(b.durationMs['triggerExecution'] / 1000, 1) for b in batches]} s\n       CPU: {cpu}")

        if args.pipeline_records:
            from kafka_edu.spark import clickstream
            with split() as cpu:
                result = clickstream.main(["--bootstrap-servers", servers, "--records", str(args.pipeline_records),
                                           "--max-offsets-per-trigger", "1000000", "--work-dir", str(work / "pipeline")])
            print(f"pipeline {args.pipeline_records:,} clicks: {json.dumps(result)}\n       CPU: {cpu}")
            if result["parquet mismatches"] or result["topic mismatches"]:
                raise SystemExit("the streaming results differ from the batch recomputation")
    finally:
        spark.stop()
        broker.stop()


if __name__ == "__main__":
    main()
