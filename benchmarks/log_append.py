"""Log.append throughput against the disk ceiling, and read-by-offset latency (issue 3, item 5).

Appends 1 KiB records in 16 KiB v2 batches to a `Log` and, in the same run, writes the same bytes
with plain sequential `os.write` calls to a file: the ratio says how much of the disk's speed the
storage engine keeps (offset assignment, validation, indexing, rolling). Then it measures
`Log.read` by offset (the index lookup, the header scan, and copying the bytes out) at the start,
the middle and the end of the log.

    python benchmarks/log_append.py                # a 1 GiB log, 3 repeats (the first is discarded)
    python benchmarks/log_append.py --size 256M    # smaller
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _summary import report  # noqa: E402

from kafka_edu.common.record.compression import CompressionType  # noqa: E402
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder  # noqa: E402
from kafka_edu.server.log.log import Log  # noqa: E402
from kafka_edu.server.log.log_config import LogConfig  # noqa: E402

RECORD_SIZE = 1024
BATCH_SIZE = 16 * 1024


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def make_batch() -> bytes:
    """One producer batch: as many 1 KiB records as fit 16 KiB, offsets from 0 (the broker assigns)."""
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, 0, write_limit=BATCH_SIZE)
    value = bytes(random.Random(7).getrandbits(8) for _ in range(RECORD_SIZE))
    i = 0
    while builder.has_room_for(b"key-%06d" % i, value, timestamp=1_700_000_000_000 + i):
        builder.append(1_700_000_000_000 + i, b"key-%06d" % i, value)
        i += 1
    return bytes(builder.build())


def append_run(directory: Path, batch: bytes, batches: int) -> tuple[float, Log]:
    log = Log(str(directory / "bench-0"), LogConfig())
    started = time.perf_counter()
    for _ in range(batches):
        log.append(batch)
    return time.perf_counter() - started, log


def write_run(directory: Path, batch: bytes, batches: int) -> tuple[float, None]:
    fd = os.open(directory / "plain.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    for _ in range(batches):
        os.write(fd, batch)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return elapsed, None


def read_latencies(log: Log, around: int, count: int, span: int) -> list[float]:
    rng = random.Random(around)
    low, high = max(log.log_start_offset, around - span), min(log.log_end_offset - 1, around + span)
    samples = []
    for _ in range(count):
        offset = rng.randint(low, high)
        started = time.perf_counter()
        info = log.read(offset, BATCH_SIZE)
        data = info.records.read_bytes()
        samples.append(time.perf_counter() - started)
        assert data, f"no data read at offset {offset}"
    return samples


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G", help="bytes to append per run (default 1G)")
    parser.add_argument("--repeats", type=int, default=3, help="runs; the first is discarded (default 3)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    batch = make_batch()
    batches = max(1, size // len(batch))
    total = batches * len(batch)
    print(f"appending {total / 2**20:.0f} MiB as {batches} batches of {len(batch)} bytes "
          f"({(len(batch) - 61) // (RECORD_SIZE + 20)} records of {RECORD_SIZE} B each)")

    root = Path(tempfile.mkdtemp(prefix="log-append-", dir=args.dir))
    try:
        log_times, write_times = [], []
        repeats = max(args.repeats, 2)
        log = None
        for repeat in range(repeats):
            for name, run, sink in (("Log.append", append_run, log_times), ("os.write", write_run, write_times)):
                run_dir = root / f"{name}-{repeat}"
                run_dir.mkdir()
                elapsed, log_written = run(run_dir, batch, batches)
                if repeat > 0:          # the first repeat pays for cold page cache: discard it
                    sink.append(elapsed)
                if log_written is not None and repeat == repeats - 1:
                    log = log_written   # kept open for the read measurements
                    continue
                if log_written is not None:
                    log_written.close()
                shutil.rmtree(run_dir)
        log_mbs = total / statistics.median(log_times) / 1e6
        write_mbs = total / statistics.median(write_times) / 1e6
        print(f"Log.append : {log_mbs:8.1f} MB/s  ({batches / statistics.median(log_times):,.0f} batches/s)")
        print(f"os.write   : {write_mbs:8.1f} MB/s  (the disk ceiling, same bytes, same run)")
        print(f"ratio Log.append / os.write = {log_mbs / write_mbs:.2f}")
        report("log_append", "Log.append / os.write", log_mbs / write_mbs, None,
               log_mb_per_s=log_mbs, write_mb_per_s=write_mbs)

        end = log.log_end_offset
        print(f"read by offset ({BATCH_SIZE} bytes, copied out), log of {log.size() / 2**20:.0f} MiB, "
              f"{log.number_of_segments} segment(s), {end} offsets:")
        medians = {}
        for where, around in (("start", 0), ("middle", end // 2), ("end", end - 1)):
            samples = read_latencies(log, around, 500, 1000)
            medians[where] = statistics.median(samples)
            p99 = statistics.quantiles(samples, n=100)[98]
            print(f"  {where:6s}: median {medians[where] * 1e6:7.1f} us   p99 {p99 * 1e6:7.1f} us")
        print(f"ratio end / start = {medians['end'] / medians['start']:.2f}, "
              f"middle / start = {medians['middle'] / medians['start']:.2f}")
        report("log_append", "Log.read latency end / start", medians["end"] / medians["start"], None)
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
