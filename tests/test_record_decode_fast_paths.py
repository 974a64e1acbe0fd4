"""The v2 record decoder's inline paths: every varint width each field can take, and `decode(into, prefix)`."""
from __future__ import annotations

from typing import NamedTuple

import pytest

from kafka_edu.common.record import default_records as v2
from kafka_edu.common.record.default_records import RECORD_BATCH_OVERHEAD, DefaultRecordBatch, RecordBatchBuilder
from kafka_edu.common.record.errors import CorruptRecordError
from kafka_edu.common.record.memory_records import MemoryRecords, convert
from kafka_edu.common.record.record import Record, TimestampType

BASE_OFFSET, BASE_TIMESTAMP = 1_000, 1_700_000_000_000
# offset deltas: 1, 2, 3, 4 and 5 varint bytes; timestamp deltas of every width, negative ones too
OFFSET_DELTAS = [0, 63, 64, 8_191, 8_192, 9_000, 1_048_575, 1_048_576, 2**27, 2**30]
TIMESTAMP_DELTAS = [0, -1, 63, -65, 8_191, -8_193, 1_048_576, -(2**40), 2**50, 5]
KEYS = [None, b"", b"k", b"k" * 64, b"k" * 8_192, None, b"x" * 63, None, b"\x01", None]
VALUES = [b"v", None, b"", b"v" * 63, b"v" * 64, b"v" * 8_191, b"v" * 8_192, b"v" * 70_000, None, b"\x00"]
HEADERS = [(), (("h", b"1"),), (), (("a", None), ("b", b"")), (), (), (("t", b"x" * 100),), (), (), ()]


def batch() -> tuple[DefaultRecordBatch, list[Record]]:
    builder = RecordBatchBuilder(base_offset=BASE_OFFSET)
    expected = []
    # the first record's timestamp is the base: it must come first and have delta 0
    for delta, ts, key, value, headers in zip(OFFSET_DELTAS, TIMESTAMP_DELTAS, KEYS, VALUES, HEADERS, strict=True):
        builder.append(BASE_OFFSET + delta, BASE_TIMESTAMP + ts, key, value, headers)
        expected.append(Record(BASE_OFFSET + delta, BASE_TIMESTAMP + ts, TimestampType.CREATE_TIME, key, value,
                               headers))
    return DefaultRecordBatch(builder.build()), expected


def test_every_varint_width_decodes_to_what_was_written():
    decoded, expected = batch()
    assert list(decoded.records()) == expected


class Located(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


def test_decode_into_a_caller_type_with_a_prefix():
    decoded, expected = batch()
    located = decoded.decode(into=Located, prefix=("t", 7))
    assert all(type(r) is Located for r in located)
    assert [tuple(r) for r in located] == [("t", 7, *e) for e in expected]
    assert located[2].offset == BASE_OFFSET + 64 and located[2].topic == "t"


@pytest.mark.parametrize("cut", [1, 2, 3, 50, 8_300])
def test_a_record_cut_short_is_corrupt_not_an_index_error(cut):
    decoded, _ = batch()
    data = bytes(decoded)
    broken = bytearray(data[:len(data) - cut])
    broken[8:12] = (len(broken) - 12).to_bytes(4, "big")      # the batch length agrees with the cut
    with pytest.raises(CorruptRecordError):
        DefaultRecordBatch(bytes(broken)).decode(verify=False)


def test_a_record_whose_fields_overrun_its_length_is_corrupt():
    builder = RecordBatchBuilder()
    builder.append(0, 0, None, b"abc")
    data = bytearray(builder.build())
    data[RECORD_BATCH_OVERHEAD] -= 2            # declare one byte fewer (zig-zag: 2 per unit)
    with pytest.raises(CorruptRecordError):
        DefaultRecordBatch(bytes(data)).decode(verify=False)


def raw_batch(body: bytes) -> bytes:
    """A v2 batch, header and CRC sound, around one hand-written record body (without its length)."""
    records = v2.encode_varint(len(body)) + body
    batch = bytearray(v2._HEADER.pack(0, RECORD_BATCH_OVERHEAD - 12 + len(records), -1, 2, 0, 0, 0, BASE_TIMESTAMP,
                                      BASE_TIMESTAMP, -1, -1, -1, 1))
    batch += records
    v2._UINT32.pack_into(batch, v2.CRC_OFFSET, v2.compute_batch_crc(batch))
    return bytes(batch)


SIX_BYTES = b"\x80\x80\x80\x80\x80\x00"     # zero, in one byte more than an int field may take
# attributes, timestamp delta, offset delta, key (null), value b"x", header count
TOO_WIDE = {
    "timestamp delta of 65 bits": b"\x00" + v2._unsigned_varint(2**65) + b"\x00\x01\x02x\x00",
    "offset delta of 34 bits": b"\x00\x00" + v2._unsigned_varint(2**33) + b"\x01\x02x\x00",
    "offset delta in 6 bytes": b"\x00\x00" + SIX_BYTES + b"\x01\x02x\x00",
    "header count in 6 bytes": b"\x00\x00\x00\x01\x02x" + SIX_BYTES,
}


@pytest.mark.parametrize("body", TOO_WIDE.values(), ids=TOO_WIDE)
def test_a_varint_wider_than_its_field_is_corrupt(body):
    """Kafka reads int fields with readVarint (5 bytes, 32 bits) and the timestamp delta with readVarlong
    (10 bytes, 64 bits). Accepting more gave records offsets and timestamps past a long, on which
    down-conversion failed with struct.error instead of CorruptRecordError."""
    assert [r.value for r in DefaultRecordBatch(raw_batch(b"\x00\x00\x00\x01\x02x\x00")).records()] == [b"x"]
    batch = raw_batch(body)
    with pytest.raises(CorruptRecordError):
        list(DefaultRecordBatch(batch).records())
    with pytest.raises(CorruptRecordError):
        convert(MemoryRecords(batch), 1)
