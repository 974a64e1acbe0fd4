"""Acceptance tests 14 (broker state), 16-19 of seed-ch4a §6: LogManager start-up, shutdown, checkpoints, retention."""
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
from kafka_edu.server.broker_states import BrokerState, BrokerStates
from kafka_edu.server.log.errors import KafkaStorageError
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.log.log_segment import LogSegment
from kafka_edu.server.log.offset_checkpoint import OffsetCheckpoint
from kafka_edu.server.utils.scheduler import MockScheduler

ROOT = Path(__file__).resolve().parents[2]
V1 = "0.10.0"
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def clock():
    return MockTime(start_ms=1_700_000_000_000)


def manager_for(dirs, clock, config=None, state=None, **kwargs):
    return LogManager([str(d) for d in dirs], config or LogConfig(segment_bytes=20_000, message_format_version=V1),
                      scheduler=MockScheduler(clock), broker_state=state or BrokerState(), time=clock, **kwargs)


def fill(log, count, size=200):
    for i in range(count):
        log.append(legacy_message(b"%06d" % i + b"." * size))


def test_14_unclean_start_passes_through_recovering_state(tmp_path, clock):
    state = BrokerState()
    manager = manager_for([tmp_path / "d"], clock, state=state)
    fill(manager.create_log("test", 0), 50)
    manager.halt()                          # no shutdown(): a crash
    state = BrokerState()
    restarted = manager_for([tmp_path / "d"], clock, state=state)
    assert BrokerStates.RECOVERING_FROM_UNCLEAN_SHUTDOWN in state.history
    assert restarted.get_log("test", 0).log_end_offset == 50
    restarted.shutdown()


def test_a_malformed_recovery_checkpoint_means_recovery_from_zero_not_a_failed_start(tmp_path, clock, caplog):
    manager = manager_for([tmp_path / "d"], clock)
    fill(manager.create_log("test", 0), 50)
    manager.halt()
    (tmp_path / "d" / "recovery-point-offset-checkpoint").write_text("0\n2\ntest 0 50\n")   # says 2, holds 1
    restarted = manager_for([tmp_path / "d"], clock)
    assert restarted.get_log("test", 0).log_end_offset == 50
    assert any("resetting the recovery checkpoint to 0" in r.getMessage() for r in caplog.records)
    restarted.shutdown()


def test_a_start_that_fails_loading_logs_leaves_nothing_open_or_locked(tmp_path, clock):
    manager = manager_for([tmp_path / "d"], clock)
    fill(manager.create_log("good", 0), 5)
    manager.shutdown()
    (tmp_path / "d" / "stray").mkdir()                  # not <topic>-<partition>: loading fails
    with pytest.raises(ValueError, match="is not <topic>-<partition>"):
        manager_for([tmp_path / "d"], clock)
    still_open = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}") and str(tmp_path) in os.readlink(f"/proc/self/fd/{fd}")]
    assert still_open == []
    (tmp_path / "d" / "stray").rmdir()                  # fixed: the same process starts it again
    manager_for([tmp_path / "d"], clock).shutdown()


def test_16_clean_shutdown_skips_recovery(tmp_path, clock, monkeypatch):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_for(dirs, clock)
    for partition in range(4):
        fill(manager.create_log("test", partition), 30 * (partition + 1))
    ends = {lg.topic_partition: lg.log_end_offset for lg in manager.all_logs()}
    manager.shutdown()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        written = OffsetCheckpoint(str(d / "recovery-point-offset-checkpoint")).read()
        assert written and all(written[tp] == ends[tp] for tp in written)

    def no_recovery(self, max_message_size):
        raise AssertionError(f"segment {self.base_offset} was scanned after a clean shutdown")

    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    state = BrokerState()
    restarted = manager_for(dirs, clock, state=state)
    assert BrokerStates.RECOVERING_FROM_UNCLEAN_SHUTDOWN not in state.history
    for log in restarted.all_logs():
        assert log.recovery_point == log.log_end_offset == ends[log.topic_partition]
    for d in dirs:
        assert not (d / ".kafka_cleanshutdown").exists()
    restarted.shutdown()


def test_halt_leaves_no_marker_no_fresh_checkpoint_and_releases_the_locks(tmp_path, clock):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = manager_for(dirs, clock)
    logs = [manager.create_log("h", partition) for partition in range(2)]
    for log in logs:
        fill(log, 20)
        log.flush()
    manager.checkpoint_recovery_point_offsets()
    for log in logs:
        fill(log, 30)
        log.flush()                         # recovery point 50 in memory, 20 on disk
    manager.halt()
    for d in dirs:
        assert not (d / ".kafka_cleanshutdown").exists()
        assert set(OffsetCheckpoint(str(d / "recovery-point-offset-checkpoint")).read().values()) == {20}
    state = BrokerState()
    restarted = manager_for(dirs, clock, state=state)      # the locks are free: no KafkaStorageError
    assert BrokerStates.RECOVERING_FROM_UNCLEAN_SHUTDOWN in state.history
    assert sorted(lg.log_end_offset for lg in restarted.all_logs()) == [50, 50]
    restarted.shutdown()


def test_halt_writes_nothing_so_a_failed_disk_cannot_stop_it(tmp_path, clock):
    """A killed broker's files stay as they are: no fsync, no trim (a halt after a disk failure, 4.5.1)."""
    open_before = len(os.listdir("/proc/self/fd"))
    manager = manager_for([tmp_path], clock)
    log = manager.create_log("d", 0)
    fill(log, 20)
    segment = log.active_segment
    index_size = os.path.getsize(segment.index.path)
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, segment.log.fd)                        # fsync or ftruncate here would fail: EINVAL
    os.close(full)
    manager.halt()
    assert len(os.listdir("/proc/self/fd")) == open_before                              # every file released
    assert os.path.getsize(segment.index.path) == index_size > segment.index.entries * 8     # untrimmed
    restarted = manager_for([tmp_path], clock)           # the locks were released all the same
    assert restarted.get_log("d", 0).log_end_offset == 20
    restarted.shutdown()


def test_a_config_change_during_a_log_creation_reaches_the_new_log(tmp_path, clock):
    """The config read for a new log (a function, called under the creation lock) and a change landing
    meanwhile: the change waits for the log, then applies to it (before, the log kept the old config)."""
    manager = manager_for([tmp_path / "a"], clock)
    change = threading.Thread(target=manager.update_topic_config, args=("t", LogConfig(retention_ms=5)))

    def read_before_the_change() -> LogConfig:
        change.start()
        time.sleep(0.2)                                  # the change is now waiting for the lock
        return LogConfig(retention_ms=7)
    log = manager.create_log("t", 0, read_before_the_change)
    change.join(5)
    assert log.config.retention_ms == 5 and manager.config_for("t").retention_ms == 5
    assert manager.create_log("t", 1).config.retention_ms == 5


def test_directory_lock_and_placement(tmp_path, clock):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = manager_for(dirs, clock)
    with pytest.raises(KafkaStorageError, match="lock"):
        manager_for([tmp_path / "b"], clock)
    for partition in range(6):
        manager.create_log("t", partition)
    assert sorted(len(logs) for logs in manager.logs_by_dir().values()) == [2, 2, 2]
    assert manager.create_log("t", 0) is manager.get_log("t", 0)
    with pytest.raises(KafkaStorageError, match="duplicate"):
        manager_for([tmp_path / "x", tmp_path / "x"], clock)
    manager.delete_log("t", 5)
    assert manager.get_log("t", 5) is None and not any(p.name == "t-5" for d in dirs for p in d.iterdir())
    manager.shutdown()


def test_17_checkpoint_format(tmp_path, clock):
    manager = manager_for([tmp_path / "d"], clock)
    fill(manager.create_log("test", 0), 1500, size=10)
    manager.create_log("test", 1)
    manager.get_log("test", 0).flush()
    manager.checkpoint_recovery_point_offsets()
    text = (tmp_path / "d" / "recovery-point-offset-checkpoint").read_text()
    assert text.splitlines()[:2] == ["0", "2"]
    assert sorted(text.splitlines()[2:]) == ["test 0 1500", "test 1 0"]
    assert text.endswith("\n")
    manager.shutdown()
    (tmp_path / "bad").write_text("0\n2\ntest 0 1500\n")
    with pytest.raises(KafkaStorageError):
        OffsetCheckpoint(str(tmp_path / "bad")).read()


WRITER = textwrap.dedent("""
    import sys
    from kafka_edu.server.log.offset_checkpoint import OffsetCheckpoint
    checkpoint = OffsetCheckpoint(sys.argv[1])
    i = 0
    while True:
        checkpoint.write({("topic-%d" % p, p): i for p in range(200)})
        if i == 0:
            print("started", flush=True)
        i += 1
""")


def test_17_checkpoint_write_is_atomic_under_sigkill(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for seed in range(3):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env)
        try:
            assert child.stdout.readline() == b"started\n"
            time.sleep(random.Random(seed).uniform(0.01, 0.2))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
        offsets = OffsetCheckpoint(str(path)).read()          # complete: never a partial file
        assert len(offsets) == 200 and len(set(offsets.values())) == 1


def one_megabyte_segments_log(manager):
    log = manager.create_log("test", 0)
    big = legacy_message(b"z" * (1_000_000 - 34))
    assert len(big) == 1_000_000
    for _ in range(5):
        log.append(big)
    log.append(legacy_message(b""))                 # the smallest v1 entry: 34 bytes
    return log


def test_18_size_retention(tmp_path, clock):
    config = LogConfig(segment_bytes=1_000_000, retention_bytes=2_500_000, file_delete_delay_ms=50,
                       message_format_version=V1)
    manager = manager_for([tmp_path / "d"], clock, config=config)
    log = one_megabyte_segments_log(manager)
    assert [s.size() for s in log.segments] == [1_000_000] * 5 + [34]
    # diff = 2,500,034 -> 1,500,034 -> 500,034; the third segment would take it below zero
    assert manager.cleanup_logs() == 2
    assert [s.base_offset for s in log.segments] == [2, 3, 4, 5]
    assert log.size() == 3_000_034                       # above the limit, by design
    names = os.listdir(log.dir)
    assert "00000000000000000000.log.deleted" in names and "00000000000000000001.index.deleted" in names
    clock.advance(49)
    manager.scheduler.tick()
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    clock.advance(1)
    manager.scheduler.tick()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert manager.cleanup_logs() == 0
    manager.shutdown()


def test_19_time_retention(tmp_path, clock):
    manager = manager_for([tmp_path / "d"], clock)
    log = manager.create_log("test", 0)
    fill(log, 400)
    assert log.number_of_segments >= 4
    now = clock.milliseconds()
    for segment in log.segments:
        segment.set_last_modified_ms(now)
    for segment in log.segments[:2]:
        segment.set_last_modified_ms(now - 8 * DAY_MS)
    bases = [s.base_offset for s in log.segments]
    assert manager.cleanup_logs() == 2
    assert [s.base_offset for s in log.segments] == bases[2:]

    for segment in log.segments:                         # everything expired, active segment non-empty
        segment.set_last_modified_ms(now - 8 * DAY_MS)
    end = log.log_end_offset
    assert log.active_segment.size() > 0
    assert manager.cleanup_logs() == len(bases) - 2
    assert [s.base_offset for s in log.segments] == [end]
    assert log.active_segment.size() == 0 and log.log_end_offset == end
    assert manager.cleanup_logs() == 0                   # an empty active segment is never deleted

    compacted = manager.create_log("compacted", 0, LogConfig(segment_bytes=20_000, cleanup_policy="compact",
                                                             message_format_version=V1))
    for i in range(400):
        compacted.append(legacy_message(b"." * 200, key=b"%d" % (i % 10)))
    for segment in compacted.segments:
        segment.set_last_modified_ms(now - 8 * DAY_MS)
    count = compacted.number_of_segments
    assert manager.cleanup_logs() == 0
    assert compacted.number_of_segments == count

    forever = manager.create_log("forever", 0, LogConfig(segment_bytes=20_000, retention_ms=-1,   # no time limit
                                                         message_format_version=V1))
    fill(forever, 400)
    for segment in forever.segments:
        segment.set_last_modified_ms(now - 800 * DAY_MS)
    count = forever.number_of_segments
    assert manager.cleanup_logs() == 0
    assert forever.number_of_segments == count and forever.log_start_offset == 0
    manager.shutdown()


def test_periodic_tasks_run_on_the_scheduler(tmp_path, clock):
    config = LogConfig(segment_bytes=20_000, flush_ms=1000, message_format_version=V1)
    manager = manager_for([tmp_path / "d"], clock, config=config, flush_check_ms=500, flush_checkpoint_ms=60_000)
    manager.startup()
    log = manager.create_log("test", 0)
    fill(log, 10)
    assert [name for _, name in manager.scheduler.pending()] == [
        "kafka-log-flusher", "kafka-log-retention", "kafka-recovery-point-checkpoint"]
    clock.advance(30_000)
    manager.scheduler.tick()
    assert log.recovery_point == 10                     # the flusher found it 30 s unflushed
    checkpoint = OffsetCheckpoint(str(tmp_path / "d" / "recovery-point-offset-checkpoint"))
    assert checkpoint.read() == {("test", 0): 10}
    manager.shutdown()
