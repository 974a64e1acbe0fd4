"""readStream/writeStream with format("kafka_edu"): maxOffsetsPerTrigger as a ReadLimit, offsets in
Spark's Kafka JSON, a restart from the checkpoint with no loss and no duplicates, partitions added
while the query is down, and the streaming sink."""
from __future__ import annotations

import json
import time

import pytest

from kafka_edu.clients.admin import ClusterAdmin

pytestmark = pytest.mark.spark


def stream(spark, servers, name, **options):
    return (spark.readStream.format("kafka_edu").option("kafka.bootstrap.servers", servers)
            .option("subscribe", name).option("startingOffsets", "earliest").options(**options).load())


def run_to_parquet(spark, servers, name, out, **options) -> list[dict]:
    query = (stream(spark, servers, name, **options).selectExpr("partition", "offset", "CAST(value AS STRING) v")
             .writeStream.format("parquet").option("path", str(out / "data"))
             .option("checkpointLocation", str(out / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return [json.loads(p.json) for p in query.recentProgress if p.numInputRows > 0]


def test_restart_from_checkpoint_reads_every_record_once(spark, servers, topic, produce, tmp_path):
    name = topic(2)
    for p in range(2):
        produce(name, [f"{p}-{i}".encode() for i in range(300)], partition=p)
    first = run_to_parquet(spark, servers, name, tmp_path, maxOffsetsPerTrigger="250")
    assert [p["numInputRows"] for p in first] == [250, 250, 100]
    assert first[-1]["sources"][0]["endOffset"] == {name: {"0": 300, "1": 300}}
    assert first[0]["sources"][0]["latestOffset"] == {name: {"0": 300, "1": 300}}    # reportLatestOffset: lag
    offsets_log = sorted((tmp_path / "checkpoint" / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    assert json.loads(offsets_log[-1].read_text().splitlines()[-1]) == {name: {"0": 300, "1": 300}}

    with ClusterAdmin(servers) as admin:                      # grows while the query is down
        admin.create_partitions({name: 3})
    for p in range(3):
        produce(name, [f"{p}-{i}".encode() for i in range(300, 400)], partition=p)
    second = run_to_parquet(spark, servers, name, tmp_path, maxOffsetsPerTrigger="250")
    assert second[0]["batchId"] == first[-1]["batchId"] + 1
    assert second[0]["sources"][0]["startOffset"] == {name: {"0": 300, "1": 300}}
    assert second[-1]["sources"][0]["endOffset"] == {name: {"0": 400, "1": 400, "2": 100}}
    assert all(p["numInputRows"] <= 250 for p in second)

    rows = spark.read.parquet(str(tmp_path / "data")).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(p, i) for p in range(2) for i in range(400)] + [(2, i) for i in range(100)])
    assert sorted(r.v for r in rows if r.partition < 2) == sorted(f"{p}-{i}" for p in range(2) for i in range(400))


def test_stopped_mid_stream_and_restarted(spark, servers, topic, produce, tmp_path):
    name = topic(1)
    produce(name, [str(i).encode() for i in range(1000)], partition=0)
    query = (stream(spark, servers, name, maxOffsetsPerTrigger="100").writeStream.format("parquet")
             .option("path", str(tmp_path / "data")).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="100 milliseconds").start())
    while not any(p.numInputRows for p in query.recentProgress):
        query.awaitTermination(0.2)
    query.stop()                                              # somewhere in the middle
    run_to_parquet(spark, servers, name, tmp_path, maxOffsetsPerTrigger="400")
    offsets = sorted(r.offset for r in spark.read.parquet(str(tmp_path / "data")).select("offset").collect())
    assert offsets == list(range(1000))


def test_stream_to_kafka_sink(spark, servers, topic, produce, tmp_path):
    source, sink = topic(1), topic(1)
    produce(source, [f"w{i % 3}".encode() for i in range(30)], partition=0)
    query = (stream(spark, servers, source).selectExpr("value AS key", "CAST(offset AS STRING) AS value")
             .writeStream.format("kafka_edu").option("kafka.bootstrap.servers", servers).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    back = spark.read.format("kafka_edu").option("kafka.bootstrap.servers", servers).option("subscribe", sink).load()
    assert sorted((bytes(r.key), int(bytes(r.value))) for r in back.collect()) == \
        [(f"w{i % 3}".encode(), i) for i in sorted(range(30), key=lambda i: (i % 3, i))]


def test_streaming_option_errors_at_start(spark, servers):
    with pytest.raises(Exception) as e:
        (spark.readStream.format("kafka_edu").option("kafka.bootstrap.servers", servers).option("subscribe", "x")
         .option("endingOffsets", "latest").load().writeStream.format("noop").start().awaitTermination(30))
    assert "Ending offset not valid in streaming queries" in str(e.value)


def test_partitions_added_while_running_are_picked_up(spark, servers, topic, produce):
    name = topic(1)
    produce(name, [b"before"], partition=0)
    query = (stream(spark, servers, name).selectExpr("partition", "CAST(value AS STRING) v").writeStream
             .format("memory").queryName("added_partitions").trigger(processingTime="200 milliseconds").start())
    try:
        seen = lambda: {(r.partition, r.v) for r in spark.sql("SELECT * FROM added_partitions").collect()}  # noqa: E731
        deadline = time.monotonic() + 60
        while (0, "before") not in seen() and time.monotonic() < deadline:
            time.sleep(0.2)
        with ClusterAdmin(servers) as admin:
            admin.create_partitions({name: 2})
        produce(name, [b"after"], partition=1)
        while (1, "after") not in seen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert seen() == {(0, "before"), (1, "after")}
    finally:
        query.stop()
