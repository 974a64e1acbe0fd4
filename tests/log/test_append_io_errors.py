"""A write the operating system refuses during an append (4.3.6): LogIOError naming the log, and a
segment left as it was; a log closed before the append is an ordinary storage error (no halt)."""
from __future__ import annotations

import os

import pytest
from _logtest_util import legacy_message

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.errors import KafkaStorageError, LogIOError
from kafka_edu.server.log.file_records import iter_log_entries
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig


def open_log(tmp_path):
    return Log(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=1, message_format_version="0.10.0"), 0,
               time=MockTime())


def test_a_refused_write_raises_log_io_error_and_leaves_the_segment_as_it_was(tmp_path):
    log = open_log(tmp_path)
    log.append(legacy_message(b"a", timestamp=1000) + legacy_message(b"b", timestamp=1000))
    segment = log.active_segment
    before = (log.log_end_offset, segment.size(), segment.max_timestamp_so_far, segment.index.entries,
              segment.time_index.entries)
    working, full = os.dup(segment.log.fd), os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, segment.log.fd)                       # every write now fails: ENOSPC
    try:
        with pytest.raises(LogIOError, match=r"append to log t-0: \[Errno 28\]"):
            log.append(legacy_message(b"c", timestamp=5000) + legacy_message(b"d", timestamp=5000))
    finally:
        os.dup2(working, segment.log.fd)
        os.close(working)
        os.close(full)
    assert (log.log_end_offset, segment.size(), segment.max_timestamp_so_far, segment.index.entries,
            segment.time_index.entries) == before
    log.append(legacy_message(b"e", timestamp=1500))       # the disk works again: the log goes on
    log.append(legacy_message(b"f", timestamp=6000))
    assert log.log_end_offset == 4
    assert [e.offset for e in iter_log_entries(log.read(0, 1 << 20).records.read_bytes())] == [0, 1, 2, 3]
    log.close()


def test_an_append_to_a_closed_log_is_a_storage_error_not_a_disk_failure(tmp_path):
    log = open_log(tmp_path)
    log.append(legacy_message(b"a"))
    log.close()
    with pytest.raises(KafkaStorageError) as raised:
        log.append(legacy_message(b"b"))
    assert not isinstance(raised.value, LogIOError) and "closed" in str(raised.value)
