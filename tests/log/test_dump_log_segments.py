"""`kafka-edu dump-log-segments` (book 5.8): line formats, deep iteration, invalid bytes, index checks."""
from __future__ import annotations

import os
import re

from _logtest_util import legacy_message, legacy_wrapper

from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_cleaner import CleanerConfig
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.utils.scheduler import MockScheduler
from kafka_edu.tools.cli import main


def make_log(tmp_path):
    log = Log(str(tmp_path / "test-0"), LogConfig(message_format_version="0.10.0", index_interval_bytes=200),
              time=MockTime())
    for i in range(10):
        log.append(legacy_message(b"payload-%d" % i, key=b"k%d" % i, timestamp=1000 + i))
    log.append(legacy_wrapper([legacy_message(b"inner-%d" % i) for i in range(4)]))
    log.append(legacy_message(b"tail"))
    log.close()
    return tmp_path / "test-0"


def dump(capsys, *argv):
    status = main(["dump-log-segments", *argv])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


def test_log_dump_shallow_and_deep(tmp_path, capsys):
    directory = make_log(tmp_path)
    path = str(directory / "00000000000000000000.log")
    status, out, err = dump(capsys, "--files", path)
    assert status == 0 and err == []
    assert out[:2] == [f"Dumping {path}", "Starting offset: 0"]
    lines = out[2:]
    assert len(lines) == 12                                   # 10 messages, 1 wrapper, 1 message
    positions = [int(re.search(r"position: (\d+)", line).group(1)) for line in lines]
    sizes = [12 + len(legacy_message(b"payload-%d" % i, key=b"k%d" % i)) - 12 for i in range(10)]
    assert positions[:10] == [sum(sizes[:i]) for i in range(10)]
    assert lines[0].startswith("offset: 0 position: 0 isvalid: true payloadsize: 9 magic: 1 "
                               "compresscodec: NoCompressionCodec crc: ")
    assert lines[0].endswith("CreateTime: 1000 keysize: 2")
    assert "offset: 13 " in lines[10] and "GZIPCompressionCodec" in lines[10]

    for flag in ("--deep-iteration", "--print-data-log"):
        status, out, err = dump(capsys, "--files", path, flag)
        offsets = [int(re.match(r"offset: (\d+)", line).group(1)) for line in out[2:]]
        assert offsets == list(range(15)) and err == []
    assert out[2].endswith("CreateTime: 1000 keysize: 2 key: k0 payload: payload-0")
    assert out[13].endswith("key: null payload: inner-1")


def test_sequence_is_base_sequence_plus_offset_delta_after_compaction(tmp_path, capsys):
    """Kafka's DefaultRecord.sequence(): the cleaner drops the first record of an idempotent batch but keeps
    its base offset and base sequence, so the survivors are not numbered by their place in the batch."""
    clock = MockTime(start_ms=1_700_000_000_000)
    config = LogConfig.from_props({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01})
    manager = LogManager([str(tmp_path / "d")], config, scheduler=MockScheduler(clock), time=clock,
                         cleaner_config=CleanerConfig(dedupe_buffer_size=24 * 4096))
    try:
        log = manager.create_log("t", 0)
        builder = MemoryRecordsBuilder(2, producer_id=7, producer_epoch=3, base_sequence=10)
        for key in (b"a", b"a", b"b"):                        # offsets 0-2, sequences 10-12
            builder.append(1000, key, b"v")
        log.append(bytes(builder.build()))
        log.roll()
        active = MemoryRecordsBuilder(2)
        active.append(1000, b"z", b"v")
        log.append(bytes(active.build()))
        assert manager.cleaner.clean_once()                  # offset 0 (the first "a") goes
    finally:
        manager.shutdown()
    segment = tmp_path / "d" / "t-0" / "00000000000000000000.log"
    status, out, err = dump(capsys, "--deep-iteration", "--files", str(segment))
    assert status == 0 and err == []
    assert "baseSequence: 10 lastSequence: 12" in out[2]
    assert [re.search(r"^\| offset: (\d+) .* sequence: (\d+) ", line).groups() for line in out[3:]] == \
        [("1", "11"), ("2", "12")]


def test_invalid_bytes_and_gaps_are_reported(tmp_path, capsys):
    directory = make_log(tmp_path)
    path = directory / "00000000000000000000.log"
    with open(path, "ab") as f:
        f.write(b"1234567")
    status, out, err = dump(capsys, "--files", str(path))
    assert err == ["Found 7 invalid bytes at the end of 00000000000000000000.log"]
    gappy = tmp_path / "00000000000000000000.log"
    gappy.write_bytes(legacy_message(b"a", offset=0) + legacy_message(b"b", offset=5))
    status, out, err = dump(capsys, "--files", str(gappy))
    assert err == [f"Non-secutive offsets in :{gappy}", "  0 is followed by 5"]


def test_index_dump_verification_and_sanity(tmp_path, capsys):
    directory = make_log(tmp_path)
    index = directory / "00000000000000000000.index"
    status, out, err = dump(capsys, "--files", str(index))
    assert out[0] == f"Dumping {index}" and err == []
    entries = [tuple(int(x) for x in re.match(r"offset: (\d+) position: (\d+)$", line).groups()) for line in out[1:]]
    assert entries and all(offset > 0 for offset, _ in entries)
    status, out, err = dump(capsys, "--index-sanity-check", "--files", str(index))
    assert out == [f"{index} passed sanity check."]
    data = bytearray(index.read_bytes())
    data[3] += 1                                              # claim the next offset
    index.write_bytes(bytes(data))
    status, out, err = dump(capsys, "--verify-index-only", "--files", str(index))
    claimed = entries[0][0] + 1
    assert out == [] and err == [f"Mismatches in :{index}", f"  Index offset: {claimed}, log offset: {claimed - 1}"]
    index.write_bytes(bytes(data[:-3]))                       # not a multiple of 8
    status, out, err = dump(capsys, "--index-sanity-check", "--files", str(index))
    assert out == [] and err[0].startswith(f"{index} failed sanity check")
    timeindex = directory / "00000000000000000000.timeindex"
    status, out, err = dump(capsys, "--files", str(timeindex))
    assert out[0] == f"Dumping {timeindex}" and out[-1].startswith("timestamp: ") and err == []
    assert os.path.getsize(directory / "00000000000000000000.log") > 0


def test_index_dump_only_reads(tmp_path, capsys):
    """The tool only reads an index: a missing path is one "Could not dump" line, not a new empty index
    file, and a torn last entry is left as it is (the broker's close would trim it)."""
    missing = tmp_path / "00000000000000000042.index"
    status, out, err = dump(capsys, "--files", str(missing))
    assert (status, out) == (1, []) and not missing.exists()
    assert err == [f"Could not dump {missing}: [Errno 2] No such file or directory: '{missing}'"]
    torn = tmp_path / "00000000000000000000.index"
    data = bytes([0, 0, 0, 5, 0, 0, 0, 16, 0, 0, 0])        # offset 5 at position 16, then 3 bytes
    torn.write_bytes(data)
    status, out, err = dump(capsys, "--files", str(torn))
    assert (status, out, err) == (0, [f"Dumping {torn}", "offset: 5 position: 16"], [])
    status, out, err = dump(capsys, "--index-sanity-check", "--files", str(torn))
    assert err[0].startswith(f"{torn} failed sanity check")
    assert torn.read_bytes() == data
