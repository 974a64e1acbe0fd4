"""Index entries are written with pwrite (Beyond 0.10), not stored into the mapping: the file, lookups,
reopening and a SIGKILL must see exactly what the mapped stores of 0.10 left. And log placement keeps
its per-directory counts as logs are created, loaded and deleted."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _logtest_util import legacy_message

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.errors import CorruptIndexError
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.log.offset_index import OffsetIndex, OffsetPosition
from kafka_edu.server.log.time_index import TimeIndex, TimestampOffset
from kafka_edu.server.utils.scheduler import MockScheduler

ROOT = Path(__file__).resolve().parents[2]
V1 = "0.10.0"


def test_entries_are_in_the_file_and_found_before_and_after_reopening(tmp_path):
    offsets = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, max_index_size=800)
    times = TimeIndex(str(tmp_path / "00000000000000000100.timeindex"), 100, max_index_size=1200)
    for i in range(1, 40):
        offsets.append(100 + 3 * i, 1000 * i)
        times.maybe_append(5000 + 10 * i, 100 + 3 * i)
    assert offsets.last_offset == 217 and times.last_entry == TimestampOffset(5390, 217)
    # the bytes are Kafka's layout, in the (still untrimmed) file, read without the mapping
    raw = (tmp_path / "00000000000000000100.index").read_bytes()
    assert len(raw) == 800 and struct.unpack_from(">ii", raw, 8) == (6, 2000) and raw[39 * 8:] == bytes(800 - 312)
    assert struct.unpack_from(">qi", (tmp_path / "00000000000000000100.timeindex").read_bytes(), 0) == (5010, 3)
    # lookups read through the mapping, which shows the written pages
    assert offsets.lookup(110) == OffsetPosition(109, 3000) and offsets.lookup(100) == OffsetPosition(100, 0)
    assert times.lookup(5055) == TimestampOffset(5050, 115)
    offsets.truncate_to(112)                          # the cached last entry follows truncation too
    assert offsets.last_offset == 109
    offsets.append(113, 3500)
    assert offsets.lookup(1000) == OffsetPosition(113, 3500)
    offsets.flush()
    offsets.close()
    times.close()
    reopened = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100)
    assert reopened.entries == 4 and reopened.last_offset == 113 and reopened.lookup(110) == OffsetPosition(109, 3000)
    reopened.sanity_check()
    again = TimeIndex(str(tmp_path / "00000000000000000100.timeindex"), 100)
    assert again.entries == 39 and again.lookup(5055) == TimestampOffset(5050, 115)
    again.sanity_check()
    reopened.close()
    again.close()


def message(i: int) -> bytes:
    return legacy_message(b"%06d" % i + b"." * 300, timestamp=1000 + i)


CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from test_index_writes import V1, message
    from kafka_edu.server.log.log import Log
    from kafka_edu.server.log.log_config import LogConfig
    log = Log(sys.argv[1], LogConfig(index_interval_bytes=1000, message_format_version=V1))
    for i in range(200):
        log.append(message(i))
    segment = log.active_segment
    print(segment.index.entries, segment.time_index.entries, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)          # no close, no trim, no flush
""")


def test_a_sigkilled_log_leaves_its_entries_in_the_untrimmed_file_and_recovery_rebuilds_them(tmp_path):
    reference = Log(str(tmp_path / "ref-0"), LogConfig(index_interval_bytes=1000, message_format_version=V1))
    for i in range(200):
        reference.append(message(i))
    expected = reference.active_segment.index.entries_list()
    reference.close()

    directory = tmp_path / "crash-0"
    child = subprocess.run([sys.executable, "-c", CHILD, str(directory), str(Path(__file__).parent)],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    written, _ = map(int, child.stdout.split())
    assert written == len(expected) > 10
    index_file = directory / "00000000000000000000.index"
    raw = index_file.read_bytes()
    assert len(raw) == LogConfig().segment_index_bytes          # never trimmed
    assert [struct.unpack_from(">ii", raw, 8 * n) for n in range(written)] == [
        (e.offset, e.position) for e in expected]                 # the pwrites outlived the process
    copy = tmp_path / "00000000000000000000.index"               # opened as the broker would, on a copy
    copy.write_bytes(raw)
    untrimmed = OffsetIndex(str(copy), 0)
    with pytest.raises(CorruptIndexError):                          # so recovery rebuilds it
        untrimmed.sanity_check()
    untrimmed.delete()

    recovered = Log(str(directory), LogConfig(index_interval_bytes=1000, message_format_version=V1))
    assert recovered.log_end_offset == 200
    assert recovered.active_segment.index.entries_list() == expected
    assert recovered.fetch_offset_by_timestamp(1150) == 150
    recovered.close()


def test_placement_counts_follow_creation_deletion_and_loading(tmp_path):
    clock = MockTime()
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]

    def manager():
        return LogManager(dirs, LogConfig(message_format_version=V1), scheduler=MockScheduler(clock), time=clock)

    first = manager()
    for partition in range(4):
        first.create_log("t", partition)
    for partition in (0, 2):                         # both from directory a (placement alternates a, b)
        assert os.path.dirname(first.get_log("t", partition).dir) == dirs[0]
        first.delete_log("t", partition)
    first.delete_log("t", 0)                         # deleting twice changes nothing
    # a holds none now, b two: a takes the next two, then wins the tie (first in `log.dirs` order)
    assert [os.path.dirname(first.create_log("u", p).dir) for p in range(3)] == [dirs[0]] * 3
    first.shutdown()
    second = manager()
    assert {d: len(logs) for d, logs in second.logs_by_dir().items()} == {dirs[0]: 3, dirs[1]: 2}
    assert os.path.dirname(second.create_log("v", 0).dir) == dirs[1]
    second.shutdown()
