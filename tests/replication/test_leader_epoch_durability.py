"""When the leader-epoch checkpoint reaches the disk (Beyond 0.10, 4.5.6): `assign` writes it without a
sync, the log's flush syncs it before the recovery point moves, and recovery after a crash rebuilds
an entry that never reached the disk from the epochs stamped in the recovered batches."""
from __future__ import annotations

import os

from _broker_client import records

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.epoch.leader_epoch_file_cache import (LEADER_EPOCH_CHECKPOINT_FILENAME, EpochEntry,
                                                            LeaderEpochFileCache)
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig


def _checkpoint_syncs(monkeypatch) -> list[str]:
    """Record every fsync of a leader-epoch checkpoint (the temporary file written before the rename)."""
    synced, real_fsync = [], os.fsync

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.basename(path).startswith(LEADER_EPOCH_CHECKPOINT_FILENAME):
            synced.append(path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def _leader_append(log: Log, cache: LeaderEpochFileCache, epoch: int, *values: bytes) -> None:
    info = log.append(records(*values), leader_epoch=epoch)
    cache.assign(epoch, info.first_offset)


def test_assign_writes_without_sync_and_the_log_flush_syncs(tmp_path, monkeypatch):
    log = Log(str(tmp_path / "t-0"), LogConfig(), time=MockTime())
    cache = LeaderEpochFileCache.for_log(log)
    synced = _checkpoint_syncs(monkeypatch)
    _leader_append(log, cache, 3, b"a", b"b")
    _leader_append(log, cache, 3, b"c")                      # same epoch: no change at all
    _leader_append(log, cache, 5, b"d")
    checkpoint = os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILENAME)
    assert open(checkpoint).read() == "0\n2\n3 0\n5 3\n"     # written through (a killed process finds it)
    assert synced == []                                      # ... but not synced on the append path
    log.flush()
    assert len(synced) == 1 and log.recovery_point == 4      # synced once, before the recovery point moved
    log.flush()
    assert len(synced) == 1                                  # nothing new: nothing to sync
    cache.truncate_from_end(3)
    assert len(synced) == 2                                  # truncations are synced at once
    log.close()


def test_recovery_rebuilds_entries_the_crash_lost(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, LogConfig(), time=MockTime())
    cache = LeaderEpochFileCache.for_log(log)
    _leader_append(log, cache, 1, b"a", b"b")
    log.flush()                                              # recovery point 2: epoch 1 is on disk
    _leader_append(log, cache, 4, b"c")
    _leader_append(log, cache, 6, b"d", b"e")
    log.close()
    checkpoint = os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILENAME)
    with open(checkpoint, "w") as f:                         # the OS crashed: the unsynced write is gone
        f.write("0\n1\n1 0\n")
    reopened = Log(directory, LogConfig(), recovery_point=2, time=MockTime())   # no clean-shutdown marker
    # every batch of the segments from the recovery point on (here the one segment), epochs as stamped
    assert reopened.recovered_epochs == [(1, 0), (4, 2), (6, 3)]
    rebuilt = LeaderEpochFileCache.for_log(reopened)
    assert rebuilt.entries() == [EpochEntry(1, 0), EpochEntry(4, 2), EpochEntry(6, 3)]
    assert open(checkpoint).read() == "0\n3\n1 0\n4 2\n6 3\n"
    assert rebuilt.end_offset_for(4) == (4, 3)
    reopened.close()


def test_recovery_replays_quietly_what_the_checkpoint_already_holds(tmp_path, caplog):
    """A SIGKILLed broker's checkpoint reached the disk; recovery re-reads every batch of the unflushed
    segment, and the epochs the checkpoint already holds are no news (one warning per batch before)."""
    directory = str(tmp_path / "t-0")
    log = Log(directory, LogConfig(), time=MockTime())
    cache = LeaderEpochFileCache.for_log(log)
    _leader_append(log, cache, 1, b"a")
    _leader_append(log, cache, 1, b"b")
    _leader_append(log, cache, 3, b"c")
    log.close()
    reopened = Log(directory, LogConfig(), recovery_point=0, time=MockTime())   # no clean-shutdown marker
    assert reopened.recovered_epochs == [(1, 0), (1, 1), (3, 2)]
    with caplog.at_level("WARNING", logger="kafka_edu.server.epoch.leader_epoch_file_cache"):
        rebuilt = LeaderEpochFileCache.for_log(reopened)
    assert rebuilt.entries() == [EpochEntry(1, 0), EpochEntry(3, 2)]
    assert caplog.records == []
    reopened.close()
