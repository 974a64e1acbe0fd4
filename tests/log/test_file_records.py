"""FileRecords, indexes and the broker-config bridge: the pieces under the acceptance tests."""
from __future__ import annotations

import os
import socket

import pytest
from _logtest_util import legacy_message

from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.log.errors import IndexFullError, InvalidOffsetError, KafkaStorageError
from kafka_edu.server.log.file_records import FileRecords
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import log_manager_from_config
from kafka_edu.server.log.offset_index import OffsetIndex
from kafka_edu.server.log.time_index import TimeIndex


def v2(base_timestamp, count):
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, 0)
    for i in range(count):
        builder.append(base_timestamp + i, b"k", b"v" * 100)
    return bytes(builder.build())


def test_slices_search_and_sendfile(tmp_path):
    records = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    data = b"".join(legacy_message(b"m%03d" % i, offset=i) for i in range(100))
    records.append(data)
    size = len(data) // 100
    assert records.search_for(42, 0).position == 42 * size
    piece = records.read(10 * size, 5 * size)
    assert [e.offset for e in piece.entries()] == [10, 11, 12, 13, 14]
    left, right = socket.socketpair()
    try:
        assert piece.write_to(left, 0, 1 << 20) == 5 * size
        assert right.recv(1 << 16) == data[10 * size:15 * size]
    finally:
        left.close()
        right.close()
    with pytest.raises(KafkaStorageError):
        piece.append(b"x")
    with pytest.raises(KafkaStorageError):
        records.truncate_to(records.size_in_bytes() + 1)
    records.close()


def test_search_for_uses_the_last_offset_of_v2_batches(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(), time=MockTime())
    for i in range(5):
        log.append(v2(1000 + 10 * i, 10))
    records = log.active_segment.log
    found = records.search_for(25, 0)
    assert found.offset == 29 and found.position == 2 * found.size
    assert log.read(25, 1 << 20).fetch_offset_metadata.relative_position_in_segment == found.position
    assert log.fetch_offset_by_timestamp(1025) == 25
    assert log.fetch_offset_by_timestamp(-2) == 0 and log.fetch_offset_by_timestamp(-1) == 50
    assert log.fetch_offset_by_timestamp(99_999) is None
    log.close()


def test_preallocated_segments_start_empty_and_are_trimmed(tmp_path):
    config = LogConfig(preallocate=True, segment_bytes=10_000)
    log = Log(str(tmp_path / "p-0"), config, time=MockTime())
    assert os.path.getsize(log.active_segment.log.path) == 10_000 and log.active_segment.size() == 0
    for _ in range(50):
        log.append(legacy_message(b"x" * 300))
    for segment in log.segments[:-1]:
        assert os.path.getsize(segment.log.path) == segment.size() < 10_000
    end = log.log_end_offset
    log.close()
    reopened = Log(str(tmp_path / "p-0"), config, recovery_point=0, time=MockTime())
    assert reopened.log_end_offset == end
    reopened.close()


def test_index_limits(tmp_path):
    index = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, max_index_size=20)
    assert index.max_entries == 2
    index.append(101, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(101, 20)
    index.append(105, 50)
    with pytest.raises(IndexFullError):
        index.append(110, 90)
    with pytest.raises(ValueError):
        OffsetIndex(str(tmp_path / "00000000000000000200.index"), 200, max_index_size=4)
    index.truncate_to(105)
    assert index.entries == 1 and index.lookup(1000).offset == 101
    index.delete()
    times = TimeIndex(str(tmp_path / "00000000000000000100.timeindex"), 100, max_index_size=24)
    times.maybe_append(5, 101)
    times.maybe_append(5, 102)                 # not larger: ignored
    times.maybe_append(9, 103)
    assert times.entries == 2 and times.lookup(7).offset == 101
    times.maybe_append(12, 104, skip_full_check=True)     # a closing segment may grow by one slot
    assert times.entries == 3
    times.delete()


def test_log_manager_from_kafka_config(tmp_path):
    config = KafkaConfig({"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", "log.segment.bytes": "5000",
                          "log.retention.hours": "1", "log.cleaner.threads": "1",
                          "log.cleaner.dedupe.buffer.size": str(2 << 20)})
    manager = log_manager_from_config(config, time=MockTime())
    assert manager.default_config.segment_bytes == 5000 and manager.default_config.retention_ms == 3_600_000
    assert manager.default_config.message_format_magic == 2 and manager.cleaner is not None
    log = manager.create_log("t", 0)
    for i in range(100):
        log.append(v2(i, 1))
    assert log.number_of_segments > 1
    manager.shutdown()
    assert (tmp_path / "a" / ".kafka_cleanshutdown").exists()
