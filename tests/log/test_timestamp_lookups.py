"""Offsets by timestamp after the segment's time index has been written: a clean reopen, and a
follower's truncation (the records kept past the last time-index entry still count)."""
from __future__ import annotations

from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig


def batch(*timestamps: int) -> bytearray:
    builder = MemoryRecordsBuilder(magic=2)
    for i, timestamp in enumerate(timestamps):
        builder.append(timestamp, b"k%d" % i, b"v%d" % i)
    return bytearray(bytes(builder.build()))


def test_records_sharing_a_millisecond_are_found_from_the_first(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, LogConfig())
    log.append(batch(1000, 1000, 1000))           # offsets 0-2, one millisecond
    assert log.fetch_offset_by_timestamp(1000) == 0
    log.close()                                   # the time index gets (1000, 2), the batch's last offset
    log = Log(directory, LogConfig())
    try:
        assert log.active_segment.time_index.last_entry == (1000, 2)
        assert log.fetch_offset_by_timestamp(1000) == 0
        assert log.fetch_offset_by_timestamp(1001) is None
    finally:
        log.close()


def test_truncation_keeps_the_largest_timestamp_of_what_stays(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig())
    try:
        for timestamp in (1000, 5000, 3000):      # offsets 0, 1, 2: no time-index entry yet (sparse)
            log.append(batch(timestamp))
        log.truncate_to(2)                        # a follower drops offset 2
        segment = log.active_segment
        assert (segment.max_timestamp_so_far, segment.offset_of_max_timestamp) == (5000, 1)
        assert log.fetch_offset_by_timestamp(4000) == 1
        log.append(batch(2000))                   # offset 2 again, older
        log.roll()                                # the final time-index entry is the true maximum
        assert log.segments[0].time_index.last_entry == (5000, 1)
        assert log.fetch_offset_by_timestamp(4000) == 1
    finally:
        log.close()
