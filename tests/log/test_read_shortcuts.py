"""The read path's shortcuts give the answers of the plain algorithms they replace.

`FileRecords.search_for` reads entry headers in 8 KiB chunks instead of one `pread` each, and
`Log.read` skips searching for a `max_offset` at or past the published end. Both are checked
against a header-by-header reference on logs whose entries straddle the chunk boundaries.
"""
from __future__ import annotations

import random
import struct

from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.file_records import FileRecords
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig


def batch(count: int, value_size: int) -> bytes:
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, 0)
    for i in range(count):
        builder.append(1000 + i, None, b"v" * value_size)
    return bytes(builder.build())


def reference_search(data: bytes, target: int, start: int):
    """Header by header, as the unchunked scan did: (last offset, position, size) or None."""
    position = start
    while position + 12 < len(data):
        base, size = struct.unpack_from(">qi", data, position)
        last = base + struct.unpack_from(">i", data, position + 23)[0]
        if last >= target:
            return last, position, 12 + size
        position += 12 + size
    return None


def numbered_batches(rng, n: int, counts, value_sizes) -> tuple[bytearray, list[int], int]:
    """`n` v2 batches with consecutive offsets: (bytes, entry boundaries, next offset)."""
    data, next_offset, boundaries = bytearray(), 0, [0]
    for _ in range(n):
        count = rng.choice(counts)
        raw = bytearray(batch(count, rng.choice(value_sizes)))
        struct.pack_into(">q", raw, 0, next_offset)
        next_offset += count
        data += raw
        boundaries.append(len(data))
    return data, boundaries, next_offset


def test_chunked_search_matches_a_header_by_header_scan(tmp_path):
    rng = random.Random(7)
    records = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    data, boundaries, next_offset = numbered_batches(rng, 120, [1, 1, 2, 5, 30], [10, 200, 3000, 9000])
    records.append(data)
    for start in boundaries[:-1:7]:
        for target in range(0, next_offset + 2, 7):
            found = records.search_for(target, start)
            expected = reference_search(bytes(data), target, start)
            assert (None if found is None else tuple(found)) == expected, (target, start)


def test_headers_cut_by_the_end_of_a_chunk_are_read_whole(tmp_path):
    """Start the scan at every boundary: many chunks then end inside some batch's 27-byte header."""
    rng = random.Random(11)
    records = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    data, boundaries, _ = numbered_batches(rng, 1500, [2, 3, 5], [5, 20, 60, 120])
    records.append(data)
    cut = 0
    for start in boundaries[:-1]:
        chunk_end = start + 8192
        inside = [b for b in boundaries if chunk_end - 27 < b < chunk_end - 12]
        if not inside:
            continue
        cut += 1
        base, = struct.unpack_from(">q", data, inside[0])
        for target in (base + 1, base + 2):      # inside the batch: only its last offset tells
            assert tuple(records.search_for(target, start)) == reference_search(bytes(data), target, start)
    assert cut > 50                               # the construction really exercises the cut


def test_max_offset_at_the_log_end_reads_what_no_max_offset_reads(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig.from_props({"segment.bytes": 64 * 1024}), 0, time=MockTime())
    for i in range(200):
        log.append(batch(1 + i % 3, 100))
    end = log.log_end_offset
    for start in (0, 17, end // 2, end - 1):
        plain = log.read(start, 5000)
        for max_offset in (end, end + 10):
            capped = log.read(start, 5000, max_offset=max_offset)
            assert capped.fetch_offset_metadata == plain.fetch_offset_metadata
            assert capped.records.read_bytes() == plain.records.read_bytes()
    short = log.read(0, 1 << 20, max_offset=5)   # below the end the search still cuts the read
    last_offsets = [e.last_offset for e in short.records.entries()]
    assert last_offsets and max(last_offsets) < 5
