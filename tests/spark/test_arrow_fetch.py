"""Record batches decoded straight into Arrow columns, and the fetch loop of one Spark task:
data loss after retention or a topic deletion, and a broker that goes away in the middle of a range."""
from __future__ import annotations

import logging
import struct
import threading
import time

import crc32c
import pytest
from _spark_helpers import BYTES, delete_topic, start_broker
from trailing_watermark import answered_once_caught_up, trailing_high_watermark

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.default_records import RECORD_BATCH_OVERHEAD
from kafka_edu.common.record.errors import CorruptRecordError
from kafka_edu.common.record.memory_records import MemoryRecords
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

pytestmark = pytest.mark.spark
pa = pytest.importorskip("pyarrow")
arrow_records = pytest.importorskip("kafka_edu.spark.arrow_records")
from kafka_edu.spark.offset_range_reader import DataLossError, OffsetRangeReader  # noqa: E402


def built(records, magic=2, compression=CompressionType.NONE, base_offset=0, **kwargs) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression=compression, base_offset=base_offset, **kwargs)
    for record in records:
        builder.append(*record)
    return bytes(builder.build())


@pytest.mark.parametrize("compression", list(CompressionType))
def test_v2_batches_decode_into_spark_columns(compression):
    big = b"v" * 300                                             # a two-byte length varint
    data = built([(1000, None, b"a"), (1001, b"k1", big), (1003, b"", None, (("h", b"1"), ("n", None)))],
                 compression=compression, base_offset=10)
    data += built([(2000, b"k3", b"z" * 9000)], base_offset=13)   # a second batch, a 9000-byte value
    columns = arrow_records.RecordColumns(include_headers=True)
    assert columns.add(data) == 14
    batch = columns.to_arrow("t", 3)
    assert batch.schema == arrow_records.arrow_schema(True)
    assert batch.column("key").to_pylist() == [None, b"k1", b"", b"k3"]
    assert batch.column("value").to_pylist() == [b"a", big, None, b"z" * 9000]
    assert batch.column("offset").to_pylist() == [10, 11, 12, 13]
    assert [t.timestamp() for t in batch.column("timestamp").to_pylist()] == [1.0, 1.001, 1.003, 2.0]
    assert batch.column("topic").to_pylist() == ["t"] * 4 and batch.column("partition").to_pylist() == [3] * 4
    assert batch.column("headers").to_pylist()[2] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert batch.column("timestampType").to_pylist() == [0] * 4


@pytest.mark.parametrize("key_size_varint", [0x14, 0x08, 0x03])    # key sizes 10, 4 and -2 for a 5-byte key
def test_a_record_whose_fields_leave_it_is_corrupt_as_for_the_clients(key_size_varint):
    """A batch with a valid CRC whose first record declares a key that runs past the record (10), one
    that makes the value's size land inside the key (4: -51), or a negative key size (-2). The
    clients' decoder refuses all three; the Arrow path returned wrong keys and values for the last two."""
    data = bytearray(built([(1000, b"abcde", b"xyz"), (1001, b"k2", b"second")]))
    data[RECORD_BATCH_OVERHEAD + 4] = key_size_varint      # after length, attributes, timestamp and offset deltas
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError):
        list(MemoryRecords(bytes(data)).records())
    with pytest.raises(CorruptRecordError):
        arrow_records.RecordColumns().add(bytes(data))


def _resealed(data: bytearray) -> bytes:
    """The batch with its length and CRC-32C made right again after an edit."""
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_a_null_value_with_no_header_count_and_a_header_past_its_record_are_corrupt():
    """Two more fields that leave their record: a record of a null key and a null value that lost its
    header count (its length says 5), and a header value declared one byte longer than it is (read with
    includeHeaders). The Arrow path returned rows for both; the clients' decoder refuses them."""
    lost_count = bytearray(built([(1000, None, None), (1001, b"k2", b"second")]))
    assert lost_count[RECORD_BATCH_OVERHEAD] == 0x0c and lost_count[RECORD_BATCH_OVERHEAD + 6] == 0x00
    del lost_count[RECORD_BATCH_OVERHEAD + 6]
    lost_count[RECORD_BATCH_OVERHEAD] = 0x0a
    long_header = bytearray(built([(1000, b"k", b"v", (("h", b"1"),)), (1001, b"k2", b"second")]))
    long_header[bytes(long_header).index(b"h\x021") + 1] = 0x04
    for data, headers in ((_resealed(lost_count), False), (_resealed(long_header), True)):
        with pytest.raises(CorruptRecordError):
            list(MemoryRecords(data).records())
        with pytest.raises(CorruptRecordError):
            arrow_records.RecordColumns(include_headers=headers).add(data)


def test_range_cuts_whole_batches_and_legacy_records_decode_too():
    data = built([(5, b"k", b"old"), (6, None, b"older")], magic=1, base_offset=0)
    data += built([(7, None, bytes([i])) for i in range(5)], base_offset=2)
    columns = arrow_records.RecordColumns()
    assert columns.add(data) == 7
    batch = columns.to_arrow("t", 0, start=1, until=5)
    assert batch.column("offset").to_pylist() == [1, 2, 3, 4]
    assert batch.column("value").to_pylist() == [b"older", b"\x00", b"\x01", b"\x02"]
    assert "headers" not in batch.schema.names


def test_log_append_time_and_control_batches():
    data = built([(5, None, b"x"), (9, None, b"y")], timestamp_type=1, log_append_time=77_000)
    control = built([(5, None, b"\x00\x00\x00\x00")], base_offset=2, producer_id=1, producer_epoch=0,
                    base_sequence=-1, is_transactional=True, is_control=True)
    columns = arrow_records.RecordColumns()
    assert columns.add(data + control) == 3                      # the marker moves the position, adds no row
    batch = columns.to_arrow("t", 0)
    assert batch.column("timestampType").to_pylist() == [1, 1]
    assert [t.timestamp() for t in batch.column("timestamp").to_pylist()] == [77.0, 77.0]


def test_reader_reads_exact_ranges(servers, topic, produce):
    name = topic(2)
    for group in range(10):                                       # ten batches of five records
        produce(name, [f"v{i}".encode() for i in range(group * 5, group * 5 + 5)], partition=1)
    reader = OffsetRangeReader(servers, {"max.partition.fetch.bytes": "200"})    # many small fetches
    try:
        batches = list(reader.read_range(TopicPartition(name, 1), 7, 43))
        assert reader.fetches > 3
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        assert offsets == list(range(7, 43))
        assert [v for b in batches for v in b.column("value").to_pylist()] == [f"v{i}".encode() for i in range(7, 43)]
    finally:
        reader.close()


def test_offsets_lost_to_retention_fail_or_are_skipped(broker, servers, topic, produce, caplog):
    name = topic(1, segment_bytes=200, retention_bytes=300)
    for _ in range(40):                                           # one batch each: segments roll often
        produce(name, [b"x" * 40], partition=0)
    tp = TopicPartition(name, 0)
    assert broker.log_manager.cleanup_logs() > 0                  # what the retention task does
    with ClusterAdmin(servers) as admin:
        earliest = admin.list_offsets({tp: -2})[tp].offset
    assert earliest > 0
    reader = OffsetRangeReader(servers)
    try:
        with pytest.raises(DataLossError) as e:
            list(reader.read_range(tp, 0, 40))
        assert f"Cannot fetch offsets [0, {earliest}) of {name}-0" in str(e.value)
        assert 'set the source option "failOnDataLoss" to "false"' in str(e.value)
        with caplog.at_level(logging.WARNING, logger="kafka_edu.spark.offset_range_reader"):
            batches = list(reader.read_range(tp, 0, 40, fail_on_data_loss=False))
        assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(earliest, 40))
        assert f"Cannot fetch offsets [0, {earliest}) of {name}-0" in caplog.text
    finally:
        reader.close()


def test_range_of_a_deleted_topic_fails_or_is_skipped(servers, topic, produce, caplog):
    """Deleted after the range was planned: still unknown at the deadline, the range is data loss
    (Spark's failOnDataLoss names deleted topics), not a plain KafkaError."""
    name = topic(1)
    produce(name, [b"v%d" % i for i in range(5)], partition=0)
    delete_topic(servers, name)
    tp = TopicPartition(name, 0)
    reader = OffsetRangeReader(servers, {"request.timeout.ms": "1500", "retry.backoff.ms": "50"})
    try:
        with pytest.raises(DataLossError) as e:
            list(reader.read_range(tp, 0, 5))
        assert f"Cannot fetch offsets [0, 5) of {name}-0: the partition no longer exists" in str(e.value)
        with caplog.at_level(logging.WARNING, logger="kafka_edu.spark.offset_range_reader"):
            assert list(reader.read_range(tp, 2, 5, fail_on_data_loss=False)) == []
        assert f"of {name}-0: the partition no longer exists. Skipping them (failOnDataLoss=false)" in caplog.text
    finally:
        reader.close()


def test_a_range_past_a_watermark_that_never_comes_is_lost_after_the_request_timeout(servers, topic, produce, caplog):
    name = topic()
    produce(name, [b"a", b"b", b"c"], partition=0)
    tp = TopicPartition(name, 0)
    reader = OffsetRangeReader(servers, {"request.timeout.ms": "1000", "retry.backoff.ms": "50"})
    try:
        started = time.monotonic()
        with pytest.raises(DataLossError) as e:
            list(reader.read_range(tp, 0, 5))
        assert 1.0 <= time.monotonic() - started < 10
        assert f"Cannot fetch offsets [3, 5) of {name}-0: the log still ends at offset 3 after 1000 ms" in str(e.value)
        with caplog.at_level(logging.WARNING, logger="kafka_edu.spark.offset_range_reader"):
            assert sum(len(b) for b in reader.read_range(tp, 1, 5, fail_on_data_loss=False)) == 2
        assert f"[3, 5) of {name}-0: the log still ends at offset 3 after 1000 ms. Skipping them" in caplog.text
    finally:
        reader.close()


def test_the_wait_for_a_watermark_starts_again_after_each_record(servers, topic, produce):
    """Records arriving within the timeout of each other keep the range alive for longer than one timeout."""
    name = topic()
    produce(name, [b"a", b"b", b"c"], partition=0)
    reader = OffsetRangeReader(servers, {"request.timeout.ms": "3000", "retry.backoff.ms": "50"})
    late = [threading.Timer(2.0, produce, (name, [b"d"], 0)), threading.Timer(4.0, produce, (name, [b"e"], 0))]
    try:
        for timer in late:
            timer.start()
        got = [v for b in reader.read_range(TopicPartition(name, 0), 0, 5) for v in b.column("value").to_pylist()]
        assert got == [b"a", b"b", b"c", b"d", b"e"]
    finally:
        for timer in late:
            timer.cancel()
        reader.close()


def test_broker_down_mid_range_is_retried_without_loss(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    first = start_broker(tmp_path / "logs", embedded_zookeeper=zookeeper)
    port = first.bound_port()
    servers = f"127.0.0.1:{port}"
    with ClusterAdmin(servers) as admin:
        admin.create_topics([NewTopic("restarting", 1, 1)])
    with KafkaProducer({"bootstrap.servers": servers, "key.serializer": BYTES, "value.serializer": BYTES}) as p:
        for i in range(300):
            p.send("restarting", str(i).encode(), partition=0)
    reader = OffsetRangeReader(servers, {"max.partition.fetch.bytes": "1000", "retry.backoff.ms": "50"})
    got, done = [], threading.Event()
    first.shutdown()                                              # down before and during the read

    def read():
        for batch in reader.read_range(TopicPartition("restarting", 0), 0, 300):
            got.extend(batch.column("value").to_pylist())
        done.set()
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    time.sleep(1.0)
    assert not done.is_set()
    second = start_broker(tmp_path / "logs", port=port, embedded_zookeeper=zookeeper)
    try:
        assert done.wait(30), "the reader did not resume after the broker came back"
        assert got == [str(i).encode() for i in range(300)]
    finally:
        reader.close()
        second.shutdown()


def test_a_new_leader_whose_high_watermark_trails_the_range_is_waited_for(tmp_path):
    """A range planned from the old leader's offsets must wait for the new leader's watermark (as
    Spark's consumer polls until its timeout), not call the range lost."""
    with trailing_high_watermark(tmp_path / "cluster") as (cluster, values):
        reader = OffsetRangeReader(cluster.bootstrap_servers, {"request.timeout.ms": "20000", "retry.backoff.ms": "50"})
        try:
            got = answered_once_caught_up(cluster, lambda: [
                v for b in reader.read_range(TopicPartition("trailing", 0), 0, len(values))
                for v in b.column("value").to_pylist()])
            assert got == values
        finally:
            reader.close()
