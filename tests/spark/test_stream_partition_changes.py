"""KafkaMicroBatchStream driven as Spark's MicroBatchExecution drives it (initialOffset, latestOffset,
partitions, read), without a SparkSession: partitions that disappear or appear between micro-batches
go through failOnDataLoss as in Spark's Kafka source."""
from __future__ import annotations

import logging
import time

import pytest
from _spark_helpers import delete_topic
from external import wait_for
from trailing_watermark import answered_once_caught_up, trailing_high_watermark

from kafka_edu.clients.admin import ClusterAdmin
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.server.replica.partition import Partition

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from kafka_edu.spark.offset_range_reader import DataLossError  # noqa: E402
from kafka_edu.spark.options import KafkaSourceOptions  # noqa: E402
from kafka_edu.spark.streaming import KafkaMicroBatchStream  # noqa: E402

LOGGER = "kafka_edu.spark.offset_range_reader"


def stream(servers, topics, fail_on_data_loss=True) -> KafkaMicroBatchStream:
    return KafkaMicroBatchStream(KafkaSourceOptions.parse({
        "kafka.bootstrap.servers": servers, "subscribe": topics, "startingOffsets": "earliest",
        "failOnDataLoss": str(fail_on_data_loss).lower()}, streaming=True))


def values(source, start, end) -> list[bytes]:
    return [v for p in source.partitions(start, end) for b in source.read(p) for v in b.column("value").to_pylist()]


@pytest.mark.parametrize("limit", [ReadAllAvailable(), ReadMaxRows(100)], ids=["all", "max-rows"])
def test_deleted_topic_is_gone_from_the_end_offsets_and_fails_the_batch(servers, topic, produce, limit):
    name = topic(1)
    produce(name, [b"a", b"b"], partition=0)
    source = stream(servers, name)
    try:
        start = source.initialOffset()
        assert start == {name: {"0": 0}}
        delete_topic(servers, name)                               # before offsets 0 and 1 were read
        end = source.latestOffset(start, limit)
        assert end == {}
        with pytest.raises(DataLossError, match=f"{name}-0 are gone. Some data may have been missed"):
            source.partitions(start, end)
    finally:
        source.stop()


def test_topic_deleted_then_recreated_is_read_from_its_start(servers, topic, produce, caplog):
    """A micro-batch planned while the topic is gone forgets its partition, so the recreated one is
    a new partition, read from its earliest offset, not from the old topic's position."""
    name = topic(1)
    produce(name, [b"old-%d" % i for i in range(10)], partition=0)
    source = stream(servers, name, fail_on_data_loss=False)
    try:
        b0 = source.initialOffset()
        b1 = source.latestOffset(b0, ReadAllAvailable())
        assert values(source, b0, b1) == [b"old-%d" % i for i in range(10)]
        delete_topic(servers, name)
        b2 = source.latestOffset(b1, ReadAllAvailable())          # a trigger while the topic is gone
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert values(source, b1, b2) == []
        topic(1, name=name)
        produce(name, [b"new-%d" % i for i in range(15)], partition=0)
        b3 = source.latestOffset(b2, ReadAllAvailable())
        assert values(source, b2, b3) == [b"new-%d" % i for i in range(15)]
        assert f"{name}-0 are gone. Skipping them (failOnDataLoss=false)" in caplog.text
    finally:
        source.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_added_partition_not_starting_at_zero_is_data_loss(broker, servers, topic, produce, caplog,
                                                            fail_on_data_loss):
    name = topic(1, segment_bytes=200, retention_bytes=300)
    produce(name, [b"p0"], partition=0)
    source = stream(servers, name, fail_on_data_loss)
    try:
        start = source.initialOffset()
        assert start == {name: {"0": 0}}
        with ClusterAdmin(servers) as admin:
            admin.create_partitions({name: 2})
            wait_for(lambda: len(admin.describe_topics([name])[name]) == 2, timeout=30, what="2 partitions")
        for i in range(40):                                       # one batch each: segments roll often
            produce(name, [b"%02d" % i + b"x" * 38], partition=1)
        assert broker.log_manager.cleanup_logs() > 0              # retention took the first records of p1
        with ClusterAdmin(servers) as admin:
            earliest = admin.list_offsets({TopicPartition(name, 1): -2})[TopicPartition(name, 1)].offset
        assert earliest > 0
        end = source.latestOffset(start, ReadAllAvailable())
        message = f"Added partition {name}-1 starts from {earliest} instead of 0"
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match=message):
                source.partitions(start, end)
            return
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            got = values(source, start, end)
        assert message in caplog.text
        assert got == [b"p0"] + [b"%02d" % i + b"x" * 38 for i in range(earliest, 40)]
    finally:
        source.stop()


def test_new_partition_deleted_before_planning_is_left_out(servers, topic, produce, caplog):
    """Spark's planning: a partition new in `end` whose earliest offset cannot be found any more is
    data loss; with failOnDataLoss=false a warning, and the batch is planned without it."""
    other, name = topic(1), topic(1)
    produce(other, [b"keep-%d" % i for i in range(3)], partition=0)
    source = stream(servers, f"{other},{name}", fail_on_data_loss=False)
    try:
        start = {other: {"0": 0}}                                 # as if `name` did not exist at the start
        produce(name, [b"x"] * 5, partition=0)
        end = source.latestOffset(start, ReadAllAvailable())
        assert end == {other: {"0": 3}, name: {"0": 5}}
        delete_topic(servers, name)                               # gone between latestOffset and partitions
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert values(source, start, end) == [b"keep-%d" % i for i in range(3)]
        assert f"Cannot find earliest offsets of {name}-0. Skipping them" in caplog.text
    finally:
        source.stop()


@pytest.mark.parametrize("broker, available_now", [("before-2.2", False), ("before-2.2", True), ("2.2", False)],
                         ids=["before-2.2", "before-2.2-available-now", "kip-207"])
def test_latest_offsets_below_the_reached_ones_are_asked_for_again(tmp_path, monkeypatch, caplog, broker,
                                                                    available_now):
    """After a leader change the new leader's high watermark is below the end of the last micro-batch
    until the ISR has fetched from it. A broker before Kafka 2.2 names it as the latest offset, and
    latestOffset asks again, as Spark's source does, instead of planning a range that ends before it
    starts (trigger(availableNow=True) takes the offsets it stops at only then); since 2.2 (KIP-207)
    the broker refuses to answer meanwhile and the admin client asks again."""
    if broker == "before-2.2":
        monkeypatch.setattr(Partition, "_refuse_while_catching_up", lambda self, replica: None)
    with trailing_high_watermark(tmp_path / "cluster") as (cluster, values):
        source = KafkaMicroBatchStream(KafkaSourceOptions.parse({
            "kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": "trailing",
            "fetchOffset.numRetries": "20", "fetchOffset.retryIntervalMs": "250"}, streaming=True))
        reached = {"trailing": {"0": len(values)}}
        if available_now:
            source.prepareForTriggerAvailableNow()
        try:
            with caplog.at_level(logging.WARNING, logger="kafka_edu.spark.streaming"):
                end = answered_once_caught_up(cluster, lambda: source.latestOffset(reached, ReadAllAvailable()))
            assert end == reached
            assert source.partitions(reached, end) == []
            asked_again = "latest offsets below the query's" in caplog.text
            assert asked_again == (broker == "before-2.2")
        finally:
            source.stop()


def test_latest_offsets_still_below_after_the_retries_are_planned_as_data_loss(servers, topic, produce, caplog):
    name = topic(1)
    produce(name, [b"a", b"b", b"c"], partition=0)
    source = KafkaMicroBatchStream(KafkaSourceOptions.parse({
        "kafka.bootstrap.servers": servers, "subscribe": name, "fetchOffset.retryIntervalMs": "50"}, streaming=True))
    reached = {name: {"0": 10}}
    try:
        with caplog.at_level(logging.WARNING, logger="kafka_edu.spark.streaming"):
            started = time.monotonic()
            end = source.latestOffset(reached, ReadAllAvailable())
        assert end == {name: {"0": 3}} and time.monotonic() - started >= 0.1      # three attempts, 50 ms apart
        assert caplog.text.count("latest offsets below the query's") == 2
        with pytest.raises(DataLossError, match="the log now ends at offset 3, before 10"):
            source.partitions(reached, end)
    finally:
        source.stop()
