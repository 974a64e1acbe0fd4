"""Acceptance tests 14, 15 and 20 of seed-ch4a §6, and a real crash (SIGKILL) test."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from _logtest_util import legacy_message

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.errors import OffsetOutOfRangeError
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig

ROOT = Path(__file__).resolve().parents[2]
V1 = "0.10.0"


def numbered(i: int) -> bytes:
    return legacy_message(f"message-{i:06d}".encode() + b"." * 200, key=str(i % 7).encode(), timestamp=1000 + i)


def build(directory, config, count, clock):
    log = Log(str(directory), config, time=clock)
    for i in range(count):
        log.append(numbered(i))
    return log


def all_index_entries(log):
    return {s.base_offset: (s.index.entries_list(), s.time_index.entries_list()) for s in log.segments}


def test_14_recovery_after_garbage_at_the_tail(tmp_path):
    config = LogConfig(segment_bytes=64 * 1024, message_format_version=V1)
    clock = MockTime()
    reference = build(tmp_path / "ref-0", config, 1500, clock)
    reference.active_segment.on_become_inactive()    # its final time-index entry, as recovery adds it
    expected_indexes = all_index_entries(reference)
    reference.close()

    log = Log(str(tmp_path / "test-0"), config, time=clock)
    for i in range(1000):
        log.append(numbered(i))
    log.flush()
    assert log.recovery_point == 1000
    for i in range(1000, 1500):
        log.append(numbered(i))
    stale_checkpoint = 1000                      # rolls flushed further, but the checkpoint file lags
    tail = log.active_segment.log
    tail.append(os.urandom(37))
    tail.append(numbered(1500)[:120])          # half a message
    # crash: no close(), no clean-shutdown file, the checkpoint still says 1000

    recovered = Log(str(tmp_path / "test-0"), config, recovery_point=stale_checkpoint, time=clock)
    assert recovered.log_end_offset == 1500
    for offset in range(1500):
        entry = next(recovered.read(offset, 10_000).records.entries())
        assert entry.offset == offset and entry.is_valid()
        assert entry.tobytes()[12:] == numbered(offset)[12:]
    # the rebuilt indexes are identical to a log written cleanly with the same appends
    assert all_index_entries(recovered) == expected_indexes
    recovered.append(numbered(1500))
    assert recovered.log_end_offset == 1501
    recovered.close()


def test_15_corruption_mid_log_deletes_later_segments(tmp_path):
    per_segment = 500
    size = len(numbered(0))
    config = LogConfig(segment_bytes=per_segment * size, message_format_version=V1)
    clock = MockTime()
    log = build(tmp_path / "test-0", config, 2100, clock)
    assert [s.base_offset for s in log.segments] == [0, 500, 1000, 1500, 2000]
    segment_b = log.floor_segment(1200)
    position = log.read(1200, 1).fetch_offset_metadata.relative_position_in_segment
    with open(segment_b.log.path, "r+b") as f:
        f.seek(position + 40)
        byte = f.read(1)
        f.seek(position + 40)
        f.write(bytes([byte[0] ^ 0xFF]))
    recovery_point = 1000                        # the checkpoint: segments from 1000 on are unflushed

    recovered = Log(str(tmp_path / "test-0"), config, recovery_point=recovery_point, time=clock)
    assert [s.base_offset for s in recovered.segments] == [0, 500, 1000]
    assert recovered.log_end_offset == 1200
    names = os.listdir(recovered.dir)
    assert not any(n.startswith("00000000000000001500") or n.startswith("00000000000000002000") for n in names)
    assert [e.offset for e in recovered.read(1199, 10 * size).records.entries()] == [1199]
    with pytest.raises(OffsetOutOfRangeError):
        recovered.read(1201, 100)
    recovered.close()


def test_missing_and_orphaned_indexes_are_handled(tmp_path):
    config = LogConfig(segment_bytes=64 * 1024, message_format_version=V1)
    log = build(tmp_path / "t-0", config, 800, MockTime())
    log.active_segment.on_become_inactive()
    expected = all_index_entries(log)
    first = log.segments[0]
    log.close()
    os.remove(first.index.path)
    Path(tmp_path / "t-0" / "00000000000000999999.index").write_bytes(b"\0" * 16)
    reopened = Log(str(tmp_path / "t-0"), config, recovery_point=800, time=MockTime())
    assert all_index_entries(reopened) == expected
    assert not (tmp_path / "t-0" / "00000000000000999999.index").exists()
    reopened.close()


def test_20_kafka_2477_reads_never_pass_the_published_end(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(message_format_version=V1), time=MockTime())
    for i in range(10):
        log.append(numbered(i))
    old_end = log.log_end_offset
    written, release = threading.Event(), threading.Event()
    publish = log._update_log_end_offset

    def paused_publish(offset):
        written.set()
        assert release.wait(10)
        publish(offset)

    log._update_log_end_offset = paused_publish
    appender = threading.Thread(target=log.append, args=(numbered(10),))
    appender.start()
    assert written.wait(10)
    assert log.active_segment.size() == 11 * len(numbered(0))     # the bytes are in the file ...
    assert log.read(old_end, 100_000).records.size_in_bytes() == 0  # ... but not readable yet
    assert [e.offset for e in log.read(old_end - 1, 100_000).records.entries()] == [old_end - 1]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(old_end + 1, 100)
    release.set()
    appender.join(10)
    assert [e.offset for e in log.read(old_end, 100_000).records.entries()] == [old_end]


CHILD = textwrap.dedent("""
    import sys
    from kafka_edu.server.log.log import Log
    from kafka_edu.server.log.log_config import LogConfig
    sys.path.insert(0, sys.argv[2])
    from _logtest_util import legacy_message

    config = LogConfig(segment_bytes=256 * 1024, flush_messages=97, message_format_version="0.10.0")
    log = Log(sys.argv[1], config)
    flushed = 0
    i = 0
    while True:
        log.append(legacy_message(b"%08d" % i + b"-" * (i % 500)))
        i += 1
        if log.recovery_point != flushed:
            flushed = log.recovery_point
            sys.stdout.write(f"{flushed}\\n")
            sys.stdout.flush()
""")


@pytest.mark.parametrize("seed", [1, 2])
def test_crash_with_sigkill_recovers_every_flushed_record(tmp_path, seed):
    directory = tmp_path / "crash-0"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(directory), str(Path(__file__).parent)],
                             stdout=subprocess.PIPE, env=env, text=True)
    try:
        first = child.stdout.readline()           # the child is appending and flushing
        assert first.strip().isdigit(), first
        time.sleep(random.Random(seed).uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()
    finally:
        child.kill()
        child.wait()
    lines = [first] + rest.splitlines(keepends=True)
    complete = [int(line) for line in lines if line.endswith("\n") and line.strip().isdigit()]
    last_flushed = complete[-1]

    log = Log(str(directory), LogConfig(segment_bytes=256 * 1024, message_format_version=V1),
              recovery_point=last_flushed)
    assert log.log_end_offset >= last_flushed
    expected = 0
    for segment in log.segments:
        for entry in segment.log.entries():
            assert entry.is_valid()
            assert entry.offset == expected
            value = entry.tobytes()[12 + 22:]
            assert value == b"%08d" % expected + b"-" * (expected % 500)
            expected += 1
    assert expected == log.log_end_offset
    log.append(legacy_message(b"after the crash"))
    assert log.log_end_offset == expected + 1
    log.close()
