"""format("kafka_edu") in batch queries: schema, strategies, offsets, minPartitions, headers,
the sink, and errors at the first action, on one shared SparkSession."""
from __future__ import annotations

import json

import pytest

from kafka_edu.common.cluster import TopicPartition

pytestmark = pytest.mark.spark
SCHEMA = [("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
          ("timestamp", "timestamp"), ("timestampType", "int")]


def reader(spark, servers, **options):
    return spark.read.format("kafka_edu").option("kafka.bootstrap.servers", servers).options(**options)


def offsets_of(df) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_schema_and_rows(spark, servers, topic, produce):
    name = topic(2)
    produce(name, [b"a", b"b"], partition=0, keys=[b"k", None], timestamps=[1_000, 2_000])
    produce(name, [b"c"], partition=1)
    df = reader(spark, servers, subscribe=name).load()
    assert df.dtypes == SCHEMA
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert [(bytes(r.key) if r.key else None, bytes(r.value), r.topic, r.partition, r.offset) for r in rows] == [
        (b"k", b"a", name, 0, 0), (None, b"b", name, 0, 1), (None, b"c", name, 1, 0)]
    assert rows[0].timestamp.timestamp() == 1.0 and rows[0].timestampType == 0


def test_assign_pattern_and_offset_json(spark, servers, topic, produce):
    name = topic(3)
    for p in range(3):
        produce(name, [f"{p}-{i}".encode() for i in range(10)], partition=p)
    assigned = reader(spark, servers, assign=json.dumps({name: [0, 2]}),
                      startingOffsets=json.dumps({name: {"0": 4, "2": -2}}),
                      endingOffsets=json.dumps({name: {"0": 6, "2": -1}})).load()
    assert offsets_of(assigned) == [(0, 4), (0, 5)] + [(2, i) for i in range(10)]
    pattern = reader(spark, servers, subscribePattern=name.replace("-", "[-]")).load()
    assert pattern.count() == 30


def test_min_partitions_splits_offset_ranges(spark, servers, topic, produce):
    name = topic(1)
    produce(name, [str(i).encode() for i in range(100)], partition=0)
    df = reader(spark, servers, subscribe=name, minPartitions="4").load()
    assert df.rdd.getNumPartitions() == 4
    assert offsets_of(df) == [(0, i) for i in range(100)]


def test_starting_offsets_by_timestamp(spark, servers, topic, produce):
    name = topic(1)
    produce(name, [b"a", b"b", b"c"], partition=0, timestamps=[1_000, 2_000, 3_000])
    df = reader(spark, servers, subscribe=name, startingOffsetsByTimestamp=json.dumps({name: {"0": 1_500}})).load()
    assert [bytes(r.value) for r in df.collect()] == [b"b", b"c"]


def test_write_then_read_with_headers_keys_and_partitions(spark, servers, topic):
    name = topic(2)
    rows = [(name, f"k{i}", f"v{i}".encode(), i % 2, [("n", str(i).encode())]) for i in range(20)]
    df = spark.createDataFrame(rows, "topic string, key string, value binary, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    df.write.format("kafka_edu").mode("append").option("kafka.bootstrap.servers", servers).save()
    back = reader(spark, servers, subscribe=name, includeHeaders="true").load()
    assert back.dtypes == SCHEMA + [("headers", "array<struct<key:string,value:binary>>")]
    got = sorted((r.key.decode() if isinstance(r.key, (bytes, bytearray)) else bytes(r.key).decode(), bytes(r.value),
                  r.partition, [(h.key, bytes(h.value)) for h in r.headers]) for r in back.collect())
    assert got == sorted((f"k{i}", f"v{i}".encode(), i % 2, [("n", str(i).encode())]) for i in range(20))


def test_topic_option_overrides_and_strings_are_utf8(spark, servers, topic):
    name = topic(1)
    spark.createDataFrame([("ignored", "é")], "topic string, value string").write.format("kafka_edu") \
        .mode("append").option("kafka.bootstrap.servers", servers).option("topic", name).save()
    assert [bytes(r.value).decode() for r in reader(spark, servers, subscribe=name).load().collect()] == ["é"]


def first_error(action) -> str:
    with pytest.raises(Exception) as e:
        action()
    return str(e.value)


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "x"}, "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "x", "assign": '{"x":[0]}'},
     "Only one of the following options can be specified for Kafka source"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "x", "startingOffsets": "first"},
     'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got first'),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "x", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
])
def test_errors_at_the_first_action(spark, options, message):
    df = spark.read.format("kafka_edu").options(**options).load()     # planning waits for an action
    assert message in first_error(df.count)


def test_sink_errors(spark, servers):
    df = spark.createDataFrame([("v",)], "value string")
    assert "topic option required when no 'topic' attribute is present" in first_error(
        lambda: df.write.format("kafka_edu").mode("append").option("kafka.bootstrap.servers", servers).save())
    keys = spark.createDataFrame([("k",)], "key string")
    assert "Required attribute 'value' not found" in first_error(
        lambda: keys.write.format("kafka_edu").mode("append").option("kafka.bootstrap.servers", servers)
        .option("topic", "t").save())


def test_fail_on_data_loss(spark, broker, servers, topic, produce):
    name = topic(1, segment_bytes=200, retention_bytes=300)
    for _ in range(30):
        produce(name, [b"x" * 40], partition=0)
    start = json.dumps({name: {"0": 0}})
    planned = reader(spark, servers, subscribe=name, startingOffsets=start).load()
    broker.log_manager.cleanup_logs()                  # retention deletes offsets after the plan was made
    assert "Cannot fetch offsets [0, " in first_error(planned.count)
    assert f"of {name}-0" in first_error(planned.count)
    from kafka_edu.clients.admin import ClusterAdmin
    with ClusterAdmin(servers) as admin:
        earliest = admin.list_offsets({TopicPartition(name, 0): -2})[TopicPartition(name, 0)].offset
    skipping = reader(spark, servers, subscribe=name, startingOffsets=start, failOnDataLoss="false").load()
    assert offsets_of(skipping) == [(0, i) for i in range(earliest, 30)]
