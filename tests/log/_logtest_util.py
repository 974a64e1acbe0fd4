"""Builders shared by the log tests: v0/v1 messages framed with the 12-byte log overhead.

Written independently of kafka_edu.common.record on purpose: the storage tests check the broker's
handling of bytes laid out as the book's figures 4-15/4-16 describe them.
"""
from __future__ import annotations

import struct
import zlib


def legacy_message(value: bytes | None, key: bytes | None = None, magic: int = 1, timestamp: int = 1000,
                   offset: int = 0, attributes: int = 0) -> bytes:
    """One `offset | size | crc | magic | attributes | [timestamp] | key | value` entry."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def legacy_wrapper(inner: list[bytes], codec: int = 1, magic: int = 1, timestamp: int = 1000) -> bytes:
    """A compressed wrapper around inner entries (relative offsets 0..n-1 for v1, as a producer writes)."""
    from kafka_edu.common.record.compression import CompressionType, compress

    renumbered = b"".join(struct.pack(">q", i) + entry[8:] for i, entry in enumerate(inner))
    value = compress(CompressionType.for_id(codec), renumbered, magic)
    return legacy_message(value, None, magic=magic, timestamp=timestamp, offset=len(inner) - 1,
                          attributes=codec)
