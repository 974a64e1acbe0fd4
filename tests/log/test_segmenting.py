"""Acceptance tests 7-11 of seed-ch4a §6: entry bytes, segmenting, index lookups, index-full and time rolls."""
from __future__ import annotations

import os
import zlib

import pytest
from _logtest_util import legacy_message

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.file_records import iter_log_entries
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig

V1 = "0.10.0"
V0 = "0.9.0"


def test_7_message_bytes_and_framing():
    entry_bytes = legacy_message(b"v", key=b"k", timestamp=1000)
    message = entry_bytes[12:]
    assert len(message) == 24
    assert message[4:].hex() == "01" "00" "00000000000003e8" "00000001" "6b" "00000001" "76"
    assert int.from_bytes(message[:4], "big") == zlib.crc32(message[4:])
    (entry,) = iter_log_entries(entry_bytes)
    assert (entry.magic, entry.size, entry.max_timestamp, entry.is_valid()) == (1, 24, 1000, True)
    v0 = legacy_message(b"v", key=b"k", magic=0)[12:]
    assert len(v0) == 16
    null_value = legacy_message(None, key=b"k")[12:]
    assert null_value[-4:] == b"\xff\xff\xff\xff"
    corrupted = bytearray(entry_bytes)
    corrupted[-1] ^= 1
    assert not next(iter_log_entries(corrupted)).is_valid()


@pytest.fixture(scope="module")
def ten_thousand(tmp_path_factory):
    """Test 8's log: 10,000 v1 messages of 1,058 bytes, one per append, 1 MiB segments."""
    directory = tmp_path_factory.mktemp("seg") / "test-0"
    log = Log(str(directory), LogConfig(segment_bytes=1048576, message_format_version=V1), time=MockTime())
    payload = legacy_message(b"x" * 1024)
    assert len(payload) == 1058
    for _ in range(10_000):
        log.append(payload)
    yield log
    log.close()


def test_8_segmenting(ten_thousand):
    log = ten_thousand
    assert log.number_of_segments == 11
    assert [s.base_offset for s in log.segments] == [991 * i for i in range(11)]
    names = set(os.listdir(log.dir))
    assert {"00000000000000000991.log", "00000000000000000991.index", "00000000000000009910.log"} <= names
    for segment in log.segments[:-1]:
        assert segment.size() == 1_048_478
        assert segment.next_offset() - segment.base_offset == 991
        entries = segment.index.entries_list()
        assert len(entries) == 247
        assert [e.offset - segment.base_offset for e in entries] == list(range(4, 989, 4))
        assert all(e.position == (e.offset - segment.base_offset) * 1058 for e in entries)
        assert os.path.getsize(segment.index.path) == 247 * 8     # trimmed on roll
    last = log.active_segment
    assert last.next_offset() - last.base_offset == 90
    assert last.index.entries == 22
    assert log.log_end_offset == 10_000


def test_8_v0_variant(tmp_path):
    log = Log(str(tmp_path / "v0-0"), LogConfig(segment_bytes=1048576, message_format_version=V0), time=MockTime())
    payload = legacy_message(b"x" * 1024, magic=0)
    assert len(payload) == 1050
    for _ in range(998 * 2 + 1):
        log.append(payload)
    assert [s.base_offset for s in log.segments] == [0, 998, 1996]
    assert log.segments[0].index.entries == 249
    log.close()


def test_9_index_lookup(ten_thousand):
    segment = next(s for s in ten_thousand.segments if s.base_offset == 991)
    expected = {991: (991, 0), 993: (991, 0), 995: (995, 4232), 998: (995, 4232), 999: (999, 8464)}
    for target, answer in expected.items():
        assert tuple(segment.index.lookup(target)) == answer
    entries = [tuple(e) for e in segment.index.entries_list()]
    for offset in range(991, 991 + 991):
        greatest = max((e for e in entries if e[0] <= offset), default=(991, 0))
        assert tuple(segment.index.lookup(offset)) == greatest
        assert segment.translate_offset(offset).position == (offset - 991) * 1058


def test_10_index_full_roll(tmp_path):
    # Constant timestamps: the time index (12-byte entries, 5 slots in 64 bytes) gets one entry
    # per segment and never fills first, so the offset index alone decides, as in Kafka 0.10.
    config = LogConfig(segment_index_bytes=64, index_interval_bytes=0, message_format_version=V1)
    log = Log(str(tmp_path / "t-0"), config, time=MockTime())
    payload = legacy_message(b"y" * 100)
    for _ in range(9 * 4 + 1):
        log.append(payload)
    assert [s.base_offset for s in log.segments] == [0, 9, 18, 27, 36]
    for segment in log.segments[:-1]:
        assert segment.next_offset() - segment.base_offset == 9
        assert segment.index.entries == 8
        assert os.path.getsize(segment.index.path) == 64
    assert os.path.getsize(log.active_segment.index.path) == 64
    assert log.active_segment.index.entries == 0
    log.close()


def test_11_time_roll(tmp_path):
    clock = MockTime(start_ms=0)
    log = Log(str(tmp_path / "t-0"), LogConfig(segment_ms=100, message_format_version=V1), time=clock)
    log.append(legacy_message(b"a"))
    clock.advance(150)
    log.append(legacy_message(b"b"))
    assert [s.base_offset for s in log.segments] == [0, 1]
    clock.advance(1000)                  # active segment non-empty and old: rolls on the next append
    log.append(legacy_message(b"c"))
    assert log.number_of_segments == 3
    log.close()

    idle = Log(str(tmp_path / "idle-0"), LogConfig(segment_ms=100, message_format_version=V1), time=clock)
    clock.advance(10_000)                # an empty active segment is never rolled by time alone
    idle.append(legacy_message(b"a"))
    assert idle.number_of_segments == 1
    idle.close()


def test_read_by_offset_across_segments(ten_thousand):
    log = ten_thousand
    for start in (0, 990, 991, 5000, 9999):
        info = log.read(start, 3 * 1058)
        got = [e.offset for e in info.records.entries()]
        segment_end = (start // 991 + 1) * 991          # a read never crosses a segment boundary
        assert got == list(range(start, min(start + 3, segment_end, 10_000)))
        assert info.fetch_offset_metadata.segment_base_offset == start // 991 * 991
    assert log.read(10_000, 100).records.size_in_bytes() == 0
    capped = log.read(100, 10 * 1058, max_offset=103)
    assert [e.offset for e in capped.records.entries()] == [100, 101, 102]
