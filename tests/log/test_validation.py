"""Acceptance tests 12 and 13 of seed-ch4a §6 (compressed offsets, validation), plus the v2 append path."""
from __future__ import annotations

import pytest
from _logtest_util import legacy_message, legacy_wrapper

from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.default_records import DefaultRecordBatch
from kafka_edu.common.record.legacy_records import LegacyRecordBatch
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.errors import (CorruptRecordError, InvalidOffsetError, InvalidTimestampError,
                                         RecordBatchTooLargeError, RecordTooLargeError)
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig

V1 = "0.10.0"
NOW = 1_700_000_000_000


def log_at(tmp_path, leo=0, name="t-0", **props):
    config = LogConfig.from_props({"message.format.version": V1, **props})
    log = Log(str(tmp_path / name), config, time=MockTime(start_ms=NOW))
    for _ in range(leo):
        log.append(legacy_message(b"filler", timestamp=NOW))
    return log


def five_gzipped():
    inner = [legacy_message(b"value-%d" % i, key=b"k%d" % i, timestamp=NOW + i) for i in range(5)]
    return legacy_wrapper(inner, codec=1, timestamp=NOW + 4)


def test_12_compressed_wrapper_gets_offsets_in_place(tmp_path):
    log = log_at(tmp_path, leo=100)
    produced = five_gzipped()
    position = log.active_segment.size()
    info = log.append(produced)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (100, 104, 105)
    stored = log.active_segment.log.read_bytes(position)
    assert len(stored) == len(produced)
    assert int.from_bytes(stored[:8], "big") == 104
    wrapper = LegacyRecordBatch(stored)
    assert wrapper.message.value == LegacyRecordBatch(produced).message.value   # no recompression
    assert wrapper.is_valid()
    assert [m.offset for m in wrapper.inner()] == [100, 101, 102, 103, 104]
    read = log.read(102, 100_000)
    assert read.fetch_offset_metadata.relative_position_in_segment == position   # searchFor found the wrapper
    assert next(read.records.entries()).offset == 104
    # the index points at the first inner offset (figure 4-20): recovery decompresses to find it
    log.append(legacy_message(b"x" * 5000))
    log.append(five_gzipped())
    assert log.active_segment.index.entries_list()[-1].offset == 106
    before = log.active_segment.index.entries_list()
    log.active_segment.recover(1_000_012)
    assert log.active_segment.index.entries_list() == before
    log.close()


def test_12_uncompressed_topic_stores_plain_messages(tmp_path):
    log = log_at(tmp_path, leo=100, **{"compression.type": "uncompressed"})
    log.append(five_gzipped())
    assert log.log_end_offset == 105
    entries = list(log.read(100, 100_000).records.entries())
    assert [e.offset for e in entries] == [100, 101, 102, 103, 104]
    assert all(not e.is_compressed and e.is_valid() for e in entries)
    log.close()


def test_12_codec_change_recompresses_into_one_wrapper(tmp_path):
    log = log_at(tmp_path, leo=3, **{"compression.type": "lz4"})
    log.append(b"".join(legacy_message(b"v%d" % i, timestamp=NOW) for i in range(4)))
    (entry,) = list(log.read(3, 100_000).records.entries())
    assert entry.offset == 6 and entry.codec == int(CompressionType.LZ4)
    assert [m.offset for m in LegacyRecordBatch(entry.tobytes()).inner()] == [3, 4, 5, 6]
    log.close()


def error_code(log, records):
    before = (log.log_end_offset, log.size())
    with pytest.raises(Exception) as caught:
        log.append(records)
    assert (log.log_end_offset, log.size()) == before          # nothing appended
    return type(caught.value), caught.value.error_code


def test_13_validation(tmp_path):
    compacted = log_at(tmp_path, name="c-0", **{"cleanup.policy": "compact"})
    kind, code = error_code(compacted, legacy_message(b"no key"))
    assert code == 2 and issubclass(kind, CorruptRecordError)
    compacted.append(legacy_message(b"keyed", key=b"k"))
    assert compacted.log_end_offset == 1

    log = log_at(tmp_path, leo=5)
    bad_crc = bytearray(legacy_message(b"damaged", timestamp=NOW))
    bad_crc[-1] ^= 0x01
    assert error_code(log, bytes(bad_crc)) == (CorruptRecordError, 2)

    small = log_at(tmp_path, name="s-0", **{"max.message.bytes": 1000})
    assert error_code(small, legacy_message(b"x" * 1000)) == (RecordTooLargeError, 10)
    small.append(legacy_message(b"x" * 900))

    strict = log_at(tmp_path, name="ts-0", **{"message.timestamp.difference.max.ms": 1000})
    assert error_code(strict, legacy_message(b"old", timestamp=NOW - 5000)) == (InvalidTimestampError, 32)
    strict.append(legacy_message(b"fresh", timestamp=NOW - 500))
    strict.append(legacy_message(b"timeless", magic=0))        # v0 has no timestamp to check, as in 0.10
    v0_log = log_at(tmp_path, name="ts0-0", **{"message.timestamp.difference.max.ms": 1000,
                                               "message.format.version": "0.9.0"})
    v0_log.append(legacy_message(b"timeless", magic=0))

    append_time = log_at(tmp_path, name="lat-0", **{"message.timestamp.type": "LogAppendTime"})
    append_time.time.advance(1234)
    info = append_time.append(legacy_message(b"stamped", timestamp=5))
    (entry,) = list(append_time.read(0, 1000).records.entries())
    assert entry.max_timestamp == NOW + 1234 == info.log_append_time
    assert entry.timestamp_type == "LogAppendTime" and entry.is_valid()
    for created in (compacted, log, small, strict, v0_log, append_time):
        created.close()


def v2_batch(count, codec=CompressionType.NONE, timestamp=NOW, keys=True):
    builder = MemoryRecordsBuilder(2, codec, 0)
    for i in range(count):
        builder.append(timestamp + i, b"key-%d" % i if keys else None, b"value-%d" % i * 10)
    return bytes(builder.build())


def test_v2_batches_are_patched_in_place(tmp_path):
    log = Log(str(tmp_path / "v2-0"), LogConfig(), time=MockTime(start_ms=NOW))
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                  CompressionType.ZSTD):
        batch = v2_batch(16, codec)
        position = log.active_segment.size()
        info = log.append(batch, leader_epoch=7)
        stored = log.active_segment.log.read_bytes(position)
        assert len(stored) == len(batch) and stored[21:] == batch[21:]     # records and CRC untouched
        parsed = DefaultRecordBatch(stored)
        assert parsed.base_offset == info.first_offset and parsed.last_offset == info.last_offset
        assert parsed.partition_leader_epoch == 7 and parsed.is_valid()
        assert [r.offset for r in parsed.records()] == list(range(info.first_offset, info.last_offset + 1))
    assert log.log_end_offset == 80
    everything = MemoryRecords(log.read(0, 10_000_000).records.read_bytes())
    assert [r.offset for r in everything.records()] == list(range(80))
    assert log.fetch_offset_by_timestamp(NOW + 3) == 3
    log.close()


def test_v2_log_append_time_and_conversion(tmp_path):
    lat = Log(str(tmp_path / "lat-0"), LogConfig(message_timestamp_type="LogAppendTime"),
              time=MockTime(start_ms=NOW + 99))
    lat.append(v2_batch(3))
    (batch,) = MemoryRecords(lat.read(0, 100_000).records.read_bytes()).batches()
    assert batch.max_timestamp == NOW + 99 and batch.is_valid()
    assert {r.timestamp for r in batch.records()} == {NOW + 99}
    lat.close()

    old_format = log_at(tmp_path, name="down-0", leo=2)
    old_format.append(v2_batch(3, CompressionType.GZIP))
    stored = list(MemoryRecords(old_format.read(2, 100_000).records.read_bytes()).batches())
    assert [type(b).__name__ for b in stored] == ["LegacyRecordBatch"]
    assert [(r.offset, r.key) for r in stored[0].records()] == [(2, b"key-0"), (3, b"key-1"), (4, b"key-2")]
    old_format.close()

    compacted = Log(str(tmp_path / "cv2-0"), LogConfig(cleanup_policy="compact"), time=MockTime())
    with pytest.raises(CorruptRecordError):
        compacted.append(v2_batch(3, keys=False))
    compacted.append(v2_batch(3))
    compacted.close()


def test_replica_appends_keep_offsets_and_size_limits(tmp_path):
    leader = Log(str(tmp_path / "leader-0"), LogConfig(), time=MockTime())
    follower = Log(str(tmp_path / "follower-0"), LogConfig(), time=MockTime())
    for _ in range(3):
        leader.append(v2_batch(4))
    fetched = leader.read(0, 1_000_000).records.read_bytes()
    info = follower.append(fetched, assign_offsets=False)
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 11, 12)
    with pytest.raises(InvalidOffsetError):
        follower.append(fetched, assign_offsets=False)
    tiny = Log(str(tmp_path / "tiny-0"), LogConfig(segment_bytes=200), time=MockTime())
    with pytest.raises(RecordBatchTooLargeError):
        tiny.append(v2_batch(10))
    for created in (leader, follower, tiny):
        created.close()
