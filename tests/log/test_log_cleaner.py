"""Acceptance tests 21 and 22 of seed-ch4a §6: compaction, crash safety of the swap, tombstones."""
from __future__ import annotations

import os
import resource

import pytest

from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_cleaner import CleanerConfig, SkimpyOffsetMap, group_segments_by_size
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_files import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.log.offset_checkpoint import OffsetCheckpoint
from kafka_edu.server.replica.producer_state import ProducerStateManager
from kafka_edu.server.utils.scheduler import MockScheduler

T0 = 1_700_000_000_000
CLEANER = CleanerConfig(dedupe_buffer_size=24 * 4096)


def keyed(key, value, codec=CompressionType.NONE, magic=2):
    builder = MemoryRecordsBuilder(magic, codec, 0)
    builder.append(1000, key, value)
    return bytes(builder.build())


def contents(log):
    return [(r.offset, r.key, r.value) for s in log.segments for e in s.log.entries()
            for r in MemoryRecords(e.tobytes()).records()]


def manager_with(tmp_path, **props):
    clock = MockTime(start_ms=T0)
    config = LogConfig.from_props({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, **props})
    return LogManager([str(tmp_path / "d")], config, scheduler=MockScheduler(clock), time=clock,
                      cleaner_config=CLEANER)


FIG_4_27 = [b"k1", b"k2", b"k1", b"k3", b"k2", b"k1", b"k3", b"k2", b"k1", b"k2", b"k3", b"k1"]


def figure_log(manager):
    log = manager.create_log("t", 0)
    for offset, key in enumerate(FIG_4_27):
        log.append(keyed(key, b"v%d" % offset))
    log.roll()
    log.append(keyed(b"k9", b"active"))
    return log


def test_offset_map():
    offset_map = SkimpyOffsetMap(24 * 100)
    assert offset_map.slots == 100
    for i in range(90):
        offset_map.put(b"key-%d" % i, i)
        offset_map.put(b"key-%d" % i, i + 1000)
    assert offset_map.size == 90
    assert all(offset_map.get(b"key-%d" % i) == i + 1000 for i in range(90))
    assert offset_map.get(b"missing") == -1


def test_21_compaction_keeps_the_latest_offset_per_key(tmp_path):
    manager = manager_with(tmp_path, **{"segment.bytes": 300})
    log = figure_log(manager)
    assert log.number_of_segments > 3
    active_before = log.active_segment.log.read_bytes()
    assert manager.cleaner.clean_once()
    assert [(o, k) for o, k, _ in contents(log)] == [(9, b"k2"), (10, b"k3"), (11, b"k1"), (12, b"k9")]
    assert log.active_segment.log.read_bytes() == active_before
    checkpoint = OffsetCheckpoint(str(tmp_path / "d" / "cleaner-offset-checkpoint")).read()
    assert checkpoint == {("t", 0): log.active_segment.base_offset} == {("t", 0): 12}
    for offset in (9, 10, 11):                      # reads by offset still work across the gaps
        assert next(log.read(offset, 10_000).records.entries()).offset == offset
    assert not manager.cleaner.clean_once()         # nothing dirty any more
    log.append(keyed(b"k1", b"new"))
    log.roll()
    assert manager.cleaner.clean_once()             # cleans again: segments merge, k1@11 goes
    assert [(o, k) for o, k, _ in contents(log)] == [(9, b"k2"), (10, b"k3"), (12, b"k9"), (13, b"k1")]
    manager.shutdown()


def test_21_compressed_and_legacy_batches(tmp_path):
    manager = manager_with(tmp_path, **{"segment.bytes": 100_000, "message.format.version": "0.10.0"})
    log = manager.create_log("t", 0)
    builder = MemoryRecordsBuilder(1, CompressionType.GZIP, 0)
    for i, key in enumerate([b"a", b"b", b"a", b"c"]):
        builder.append(1000 + i, key, b"x%d" % i)
    log.append(bytes(builder.build()))
    log.append(keyed(b"b", b"y", magic=1))
    log.roll()
    log.append(keyed(b"z", b"active", magic=1))
    assert manager.cleaner.clean_once()
    assert [(o, k, v) for o, k, v in contents(log)] == [(2, b"a", b"x2"), (3, b"c", b"x3"), (4, b"b", b"y"),
                                                        (5, b"z", b"active")]
    (wrapper,) = list(log.segments[0].log.entries())[:1]
    assert wrapper.codec == int(CompressionType.GZIP) and wrapper.offset == 3
    manager.shutdown()


def test_21_crash_during_swap_is_completed_on_restart(tmp_path, monkeypatch):
    manager = manager_with(tmp_path, **{"segment.bytes": 100_000})
    log = figure_log(manager)
    directory = log.dir

    def crash_after_swap_file(self, new_segment, old_segments, is_recovered_swap_file=False):
        new_segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        raise SystemExit("crash")

    monkeypatch.setattr(Log, "replace_segments", crash_after_swap_file)
    with pytest.raises(SystemExit):
        manager.cleaner.clean_once()
    monkeypatch.undo()
    names = os.listdir(directory)
    assert "00000000000000000000.log.swap" in names and "00000000000000000000.log" in names
    with open(os.path.join(directory, "00000000000000000012.log.cleaned"), "wb") as f:
        f.write(b"half-written cleaned segment")

    reopened = Log(directory, log.config, recovery_point=0, time=MockTime(start_ms=T0))
    names = os.listdir(directory)
    assert not any(n.endswith(SWAP_FILE_SUFFIX) or n.endswith(CLEANED_FILE_SUFFIX) for n in names)
    assert [(o, k) for o, k, _ in contents(reopened)] == [(9, b"k2"), (10, b"k3"), (11, b"k1"), (12, b"k9")]
    assert reopened.log_end_offset == 13
    reopened.close()


def test_abort_pauses_and_resumes(tmp_path):
    manager = manager_with(tmp_path, **{"segment.bytes": 300})
    figure_log(manager)
    cleaner = manager.cleaner
    cleaner.abort_and_pause_cleaning(("t", 0))
    assert not cleaner.clean_once()                 # a paused log is never grabbed
    cleaner.resume_cleaning(("t", 0))
    assert cleaner.clean_once()
    manager.delete_log("t", 0)
    assert OffsetCheckpoint(str(tmp_path / "d" / "cleaner-offset-checkpoint")).read() == {}
    manager.shutdown()


def test_grouping_by_size(tmp_path):
    log = Log(str(tmp_path / "g-0"), LogConfig(segment_bytes=300), time=MockTime())
    for i in range(20):
        log.append(keyed(b"k%d" % i, b"v"))
    sizes = [s.size() for s in log.segments]
    groups = group_segments_by_size(list(log.segments), 2 * max(sizes), 10_000)
    assert all(sum(s.size() for s in group) <= 2 * max(sizes) for group in groups)
    assert [s for group in groups for s in group] == list(log.segments)
    log.close()


def test_a_group_must_fit_the_cleaned_segments_time_index_too(tmp_path):
    """96-byte indexes hold 12 offset entries but only 8 time entries: three segments of 3 index entries
    each fit one offset index, not one time index. Grouped by the offset index alone, cleaning failed
    with a full time index halfway, on every pass."""
    manager = manager_with(tmp_path, **{"segment.index.bytes": 96, "index.interval.bytes": 0})
    try:
        log = manager.create_log("t", 0)
        for segment in range(3):                  # timestamps rise: a time-index entry per index entry
            for i in range(4):
                key = b"k0" if (segment, i) == (2, 3) else b"k%d" % (4 * segment + i)   # supersedes k0
                builder = MemoryRecordsBuilder(2)
                builder.append(1000 + 4 * segment + i, key, b"v%d" % segment)
                log.append(bytes(builder.build()))
            log.roll()
        log.append(keyed(b"k99", b"active"))
        assert [(s.index.size_in_bytes(), s.time_index.size_in_bytes()) for s in log.segments[:3]] == [(24, 36)] * 3
        assert manager.cleaner.clean_once() is True
        assert [key for _, key, _ in contents(log)].count(b"k0") == 1
    finally:
        manager.shutdown()


def test_a_rewritten_v2_batch_keeps_its_base_offset_and_producer_fields(tmp_path):
    """Beyond 0.10, as 0.11: the producer state a restarted broker rebuilds comes from batch headers."""
    manager = manager_with(tmp_path)
    try:
        log = manager.create_log("t", 0)
        builder = MemoryRecordsBuilder(2, producer_id=7, producer_epoch=3, base_sequence=10)
        for key in (b"a", b"a", b"b"):            # offsets 0-2, sequences 10-12; the first "a" goes
            builder.append(1000, key, b"v")
        log.append(bytes(builder.build()))
        log.roll()
        log.append(keyed(b"z", b"active"))
        assert manager.cleaner.clean_once()
        [batch] = list(MemoryRecords(next(log.segments[0].log.entries()).tobytes()).batches())
        assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (0, 7, 3, 10)
        assert [r.offset for r in batch.records()] == [1, 2] and batch.last_sequence == 12
        state = ProducerStateManager(("t", 0))
        state.load(log)
        assert 7 in state.producers
    finally:
        manager.shutdown()


@pytest.mark.parametrize("file_size_limit", [300, 5000], ids=["opening-the-index-fails", "writing-fails"])
def test_a_failed_cleaning_pass_leaves_no_descriptor_open(tmp_path, file_size_limit):
    """A disk that refuses writes (EFBIG under RLIMIT_FSIZE, standing for a full disk) fails every pass;
    the cleaner tries again after its backoff, so whatever a pass opened must be closed by it."""
    manager = manager_with(tmp_path, **{"segment.index.bytes": 4096})
    log = manager.create_log("t", 0)
    for i in range(200):
        log.append(keyed(b"k%d" % (i % 100), b"v" * 100))
    log.roll()
    log.append(keyed(b"k9", b"active"))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    before = len(os.listdir("/proc/self/fd"))
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, hard))
        for _ in range(5):
            with pytest.raises(OSError):
                manager.cleaner.clean_once()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert len(os.listdir("/proc/self/fd")) == before
    assert manager.cleaner.clean_once()                   # the disk is back: the pass completes
    manager.shutdown()


def test_22_tombstones_survive_until_the_horizon(tmp_path):
    retention = 1000
    manager = manager_with(tmp_path, **{"segment.bytes": 1000, "delete.retention.ms": retention})
    log = manager.create_log("t", 0)
    filler = iter(range(10_000))

    def fill_one_segment():
        start = log.number_of_segments
        while log.number_of_segments == start:
            log.append(keyed(b"filler-%d" % next(filler), b"." * 50))

    log.append(keyed(b"k1", b"value"))
    log.append(keyed(b"k1", None))
    for _ in range(3):
        fill_one_segment()
    assert manager.cleaner.clean_once()                    # no clean segment yet: horizon 0, tombstone kept
    assert [(o, v) for o, k, v in contents(log) if k == b"k1"] == [(1, None)]
    for segment in log.segments[:-1]:
        segment.set_last_modified_ms(T0)
    fill_one_segment()
    assert manager.cleaner.clean_once()                    # horizon = T0 - retention: still kept
    assert [(o, v) for o, k, v in contents(log) if k == b"k1"] == [(1, None)]
    tombstone_segment = log.floor_segment(1)
    checkpoint = OffsetCheckpoint(str(tmp_path / "d" / "cleaner-offset-checkpoint")).read()[("t", 0)]
    last_clean = [s for s in log.segments if s.base_offset < checkpoint][-1]
    assert last_clean is not tombstone_segment
    tombstone_segment.set_last_modified_ms(T0)
    last_clean.set_last_modified_ms(T0 + retention + 1)   # the newest clean data is past the horizon
    fill_one_segment()
    assert manager.cleaner.clean_once()
    assert all(k != b"k1" for _, k, _ in contents(log))
    manager.shutdown()
