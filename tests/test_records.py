"""Record formats: byte-exact layouts, round trips for every format and codec, conversion, damage."""
from __future__ import annotations

import struct
import zlib

import crc32c
import cramjam
import lz4.frame
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_edu.common.record import compression
from kafka_edu.common.record import default_records as v2
from kafka_edu.common.record import legacy_records as legacy
from kafka_edu.common.record.compression import CompressionType, compress, decompress
from kafka_edu.common.record.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kafka_edu.common.record.memory_records import (CompressionRateEstimator, MemoryRecords, MemoryRecordsBuilder,
                                                    convert)
from kafka_edu.common.record.record import NO_TIMESTAMP, Record, TimestampType
from kafka_edu.viz.record_layout import batch_layout, record_layout

FORMATS = [(magic, codec) for magic in (0, 1, 2) for codec in CompressionType if magic >= codec.min_magic]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blobs = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3).map(tuple)
timestamps = st.integers(0, 2**41)


def build(magic, codec, items, base_offset=0, **kwargs) -> MemoryRecords:
    builder = MemoryRecordsBuilder(magic, codec, base_offset=base_offset, **kwargs)
    for timestamp, key, value, hdrs in items:
        builder.append(timestamp, key, value, hdrs if magic == 2 else ())
    return builder.build()


def expected(magic, items, base_offset=0):
    kind = TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME
    return [Record(base_offset + i, NO_TIMESTAMP if magic == 0 else ts, kind, key, value, hdrs if magic == 2 else ())
            for i, (ts, key, value, hdrs) in enumerate(items)]


# ---------------------------------------------------------------- byte-exact layouts

def test_v1_message_is_24_bytes_with_crc32_over_magic_onwards():
    message = legacy.encode_message(1, b"k", b"v", timestamp=1000)
    assert len(message) == 24
    assert message[4:].hex() == "01" "00" "00000000000003e8" "00000001" "6b" "00000001" "76"
    assert struct.unpack(">I", message[:4])[0] == zlib.crc32(message[4:])


def test_v0_message_is_16_bytes_and_null_is_minus_one():
    message = legacy.encode_message(0, b"k", b"v")
    assert len(message) == 16 and message[4:].hex() == "00" "00" "00000001" "6b" "00000001" "76"
    assert legacy.encode_message(1, b"k", None, 1000)[-4:] == b"\xff\xff\xff\xff"
    assert legacy.encode_message(0, None, b"v")[6:10] == b"\xff\xff\xff\xff"


def test_entry_framing_and_wrapper_offset_is_last_inner_offset():
    builder = legacy.MessageSetBuilder(1, CompressionType.GZIP)
    for offset in (100, 101, 102):
        builder.append(offset, 5, b"k", b"v")
    data = builder.build()
    offset, size = struct.unpack_from(">qi", data)
    assert offset == 102 and size == len(data) - 12
    wrapper = legacy.LegacyRecordBatch(data)
    assert wrapper.message.key is None and wrapper.message.attributes == 1 and wrapper.message.timestamp == 5
    inner = decompress(CompressionType.GZIP, wrapper.message.value, 1)
    assert [struct.unpack_from(">q", inner, p)[0] for p, _ in legacy.log_entries(inner)] == [0, 1, 2]
    assert [m.offset for m in wrapper.inner()] == [100, 101, 102] and wrapper.base_offset == 100


def test_v1_wrapper_below_its_last_relative_offset_keeps_relative_offsets():
    builder = legacy.MessageSetBuilder(1, CompressionType.GZIP)
    for offset in (0, 1, 2):
        builder.append(offset, 5, b"k", b"v")
    data = bytearray(builder.build())
    legacy.set_entry_offset(data, 0, 1)  # base would be 1 - 2 = -1: Kafka does not rebase then
    assert [r.offset for r in MemoryRecords(data).records()] == [0, 1, 2]


def test_v0_wrapper_keeps_absolute_inner_offsets():
    builder = legacy.MessageSetBuilder(0, CompressionType.SNAPPY)
    for offset in (7, 9):
        builder.append(offset, None, b"k", b"v")
    wrapper = legacy.LegacyRecordBatch(builder.build())
    inner = decompress(CompressionType.SNAPPY, wrapper.message.value, 0)
    assert [struct.unpack_from(">q", inner, p)[0] for p, _ in legacy.log_entries(inner)] == [7, 9]
    assert [r.offset for r in wrapper.records()] == [7, 9]


def test_v2_header_layout_and_crc32c():
    builder = v2.RecordBatchBuilder(CompressionType.NONE, base_offset=10, producer_id=5, producer_epoch=1,
                                    base_sequence=3, is_transactional=True)
    builder.append(10, 1000, b"k", b"v", (("h", None),))
    builder.append(12, 990, None, b"")
    data = builder.build()
    fields = struct.unpack_from(">qiibIhiqqqhii", data)
    assert fields == (10, len(data) - 12, -1, 2, fields[4], 0x10, 2, 1000, 1000, 5, 1, 3, 2)
    assert fields[4] == crc32c.crc32c(data[21:])
    assert crc32c.crc32c(b"123456789") == 0xE3069283  # Castagnoli, not zlib's CRC-32
    # first record: length 11 | attrs 0 | tsDelta 0 | offsetDelta 0 | key 1 "k" | value 1 "v" | 1 header "h" null
    assert data[61:73].hex(" ") == "16 00 00 00 02 6b 02 76 02 02 68 01"
    batch = v2.DefaultRecordBatch(data)
    assert (batch.last_offset, batch.last_sequence, batch.is_transactional) == (12, 5, True)
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(10, 1000), (12, 990)]


def test_varints_match_kafka_bytes():
    cases = {0: "00", -1: "01", 1: "02", 63: "7e", -64: "7f", 64: "8001", 300: "d804", -2**31: "ffffffff0f"}
    for value, encoded in cases.items():
        assert v2.encode_varint(value).hex() == encoded and v2.decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    with pytest.raises(CorruptRecordError):
        v2.decode_varint(b"\xff" * 11)


def test_varints_are_held_to_their_width():
    """An int field (bits=32) takes at most 5 bytes and 32 bits, a long at most 10 bytes and 64 bits, as in
    Kafka's readVarint/readVarlong; wider values would give records offsets or timestamps no long can hold."""
    assert v2.decode_varint(bytes.fromhex("feffffff0f"), 0, 32) == (2**31 - 1, 5)
    assert v2.decode_varint(bytes.fromhex("ffffffff0f"), 0, 32) == (-2**31, 5)
    assert v2.decode_varint(bytes.fromhex("ff" * 9 + "01")) == (-2**63, 10)
    for bad, bits, reason in (("808080808000", 32, "longer than 5 bytes"), ("ffffffff1f", 32, "wider than 32 bits"),
                              ("ff" * 9 + "03", 64, "wider than 64 bits")):
        with pytest.raises(CorruptRecordError, match=reason):
            v2.decode_varint(bytes.fromhex(bad), 0, bits)


@given(st.integers(-2**63, 2**63 - 1))
@FAST
def test_varint_round_trip(value):
    encoded = v2.encode_varint(value)
    assert v2.decode_varint(encoded) == (value, len(encoded)) and v2.size_of_varint(value) == len(encoded)


# ---------------------------------------------------------------- compression framing

def test_snappy_is_snappy_java_framed_and_raw_is_accepted():
    data = bytes(range(256)) * 300  # 76,800 bytes: three 32 KiB blocks
    framed = compress(CompressionType.SNAPPY, data, 1)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, 0
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        pos += 4 + size
        blocks += 1
    assert pos == len(framed) and blocks == 3
    assert decompress(CompressionType.SNAPPY, framed, 1) == data
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data)), 2) == data


def test_lz4_frame_is_kafkas_and_magic0_breaks_the_header_checksum():
    data = b"abc" * 10_000
    for magic in (1, 2):
        frame = compress(CompressionType.LZ4, data, magic)
        assert frame[:7].hex() == "04224d18604082" and frame[-4:] == b"\0\0\0\0"
        assert lz4.frame.decompress(frame) == data
    legacy_frame = compress(CompressionType.LZ4, data, 0)
    assert legacy_frame[:7].hex() == "04224d1860401a"
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(legacy_frame)
    for magic in (0, 1, 2):  # either checksum is accepted under any magic
        assert decompress(CompressionType.LZ4, legacy_frame, magic) == data
        assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, data, 1), magic) == data
    wrong = bytearray(legacy_frame)
    wrong[6] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="header checksum"):
        decompress(CompressionType.LZ4, bytes(wrong), 0)
    with_size = lz4.frame.compress(data, store_size=True, content_checksum=True)
    assert decompress(CompressionType.LZ4, with_size, 1) == data


def test_gzip_is_a_java_style_member_and_concatenated_members_are_read():
    member = compress(CompressionType.GZIP, b"x" * 1000, 1)
    assert member[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00" and zlib.decompress(member, 31) == b"x" * 1000
    assert decompress(CompressionType.GZIP, member + member, 1) == b"x" * 2000


def test_compression_type_names_and_zstd_needs_v2():
    assert [c.config_name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert CompressionType.for_name("zstd") is CompressionType.ZSTD
    with pytest.raises(UnsupportedCompressionTypeError, match="expected one of none, gzip"):
        CompressionType.for_name("brotli")
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(CompressionType.ZSTD, b"x", 1)
    with pytest.raises(UnsupportedCompressionTypeError):
        MemoryRecordsBuilder(1, CompressionType.ZSTD)
    with pytest.raises(CorruptRecordError):
        CompressionType.for_id(7)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
@given(data=st.binary(max_size=300))
@FAST
def test_garbage_never_leaks_a_codec_exception(codec, data):
    for magic in (0, 2):
        try:
            decompress(codec, data, max(magic, codec.min_magic))
        except CorruptRecordError:
            pass


# ---------------------------------------------------------------- the decompression limit

MIB = 1 << 20


def zstd_rle_frame(size: int) -> bytes:
    """A zstd frame of RLE blocks with no content size: 4 bytes for each 128 KiB of zeros."""
    block, frame = 1 << 17, bytearray(b"\x28\xb5\x2f\xfd\x00\x38")   # magic, no size, 128 KiB window
    count = size // block
    for i in range(count):
        frame += ((block << 3) | 2 | (i == count - 1)).to_bytes(3, "little") + b"\x00"
    return bytes(frame)


BOMBS = {  # 8 MiB of zeros, in a few KB
    CompressionType.GZIP: lambda: compress(CompressionType.GZIP, bytes(8 * MIB)),
    CompressionType.SNAPPY: lambda: compress(CompressionType.SNAPPY, bytes(8 * MIB)),
    "raw snappy": lambda: bytes(cramjam.snappy.compress_raw(bytes(8 * MIB))),
    CompressionType.LZ4: lambda: compress(CompressionType.LZ4, bytes(8 * MIB)),
    CompressionType.ZSTD: lambda: zstd_rle_frame(8 * MIB),
}


@pytest.mark.parametrize("name", BOMBS, ids=lambda name: getattr(name, "config_name", name))
def test_decompression_stops_at_max_size(name):
    codec = CompressionType.SNAPPY if name == "raw snappy" else name
    packed = BOMBS[name]()
    assert decompress(codec, packed, 2, 8 * MIB) == bytes(8 * MIB)
    with pytest.raises(CorruptRecordError, match=f"more than {8 * MIB - 1} bytes"):
        decompress(codec, packed, 2, 8 * MIB - 1)


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD], ids=["lz4", "zstd"])
def test_a_loose_header_bound_still_gives_an_exact_limit(codec):
    """A short frame's one compressed block may inflate to a whole block maximum (64 or 128 KiB) as far
    as its headers tell; the limit is then applied to what it really inflates to."""
    data = b"kafka " * 200
    packed = compress(codec, data)
    assert decompress(codec, packed, 2, len(data)) == data
    with pytest.raises(CorruptRecordError, match=f"more than {len(data) - 1} bytes"):
        decompress(codec, packed, 2, len(data) - 1)


def test_lz4_declared_content_size_is_checked_before_it_is_allocated():
    """The lz4 library allocates a frame's declared content size up front: 2**40 was a MemoryError."""
    descriptor = bytes([0x68, 0x40]) + struct.pack("<Q", 2**40)      # content size flag, 64 KiB blocks
    checksum = (compression._xxh32(descriptor) >> 8) & 0xFF
    frame = b"\x04\x22\x4d\x18" + descriptor + bytes([checksum]) + struct.pack("<I", 0x80000000 | 3) + b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, frame + b"\x00" * 4, 1)


def test_the_default_limit_is_the_module_constant(monkeypatch):
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BATCH_BYTES", MIB)
    big = build(2, CompressionType.ZSTD, [(1000, None, bytes(MIB), ())])
    with pytest.raises(CorruptRecordError, match=f"more than {MIB} bytes"):
        list(big.records())
    assert decompress(CompressionType.ZSTD, zstd_rle_frame(MIB)) == bytes(MIB)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("magic,codec", FORMATS, ids=[f"v{m}-{c.config_name}" for m, c in FORMATS])
@given(items=st.lists(st.tuples(timestamps, blobs, blobs, headers), min_size=1, max_size=12),
       base_offset=st.integers(0, 2**40))
@FAST
def test_round_trip_every_format_and_codec(magic, codec, items, base_offset):
    records = build(magic, codec, items, base_offset)
    assert list(records.records()) == expected(magic, items, base_offset)
    batches = list(records.batches())
    assert all(b.is_valid() and b.magic == magic for b in batches)
    assert batches[0].base_offset == base_offset and batches[-1].last_offset == base_offset + len(items) - 1
    if codec or magic == 2:
        assert len(batches) == 1 and batches[0].compression_type is codec
        if magic > 0:
            assert batches[0].max_timestamp == max(ts for ts, *_ in items)


def test_log_append_time_overrides_record_timestamps():
    for magic in (1, 2):
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            records = build(magic, codec, [(5, b"k", b"v", ()), (6, b"k", b"w", ())],
                            timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=999)
            assert {(r.timestamp, r.timestamp_type) for r in records.records()} == {(999, TimestampType.LOG_APPEND_TIME)}


def test_mixed_formats_in_one_buffer():
    parts = [bytes(build(m, c, [(1, b"k", b"v", ())], base_offset=i))
             for i, (m, c) in enumerate([(0, CompressionType.NONE), (1, CompressionType.GZIP), (2, CompressionType.ZSTD)])]
    records = MemoryRecords(b"".join(parts))
    assert [(b.magic, b.base_offset) for b in records.batches()] == [(0, 0), (1, 1), (2, 2)]
    assert [r.offset for r in records.records()] == [0, 1, 2]


# ---------------------------------------------------------------- builder

def test_builder_room_estimate_and_rules():
    builder = MemoryRecordsBuilder(write_limit=200)
    assert builder.has_room_for(b"k", b"x" * 1000)  # the first record always fits
    builder.append(1, b"k", b"x" * 1000)
    assert builder.is_full() and not builder.has_room_for(b"k", b"v")
    small = MemoryRecordsBuilder(write_limit=61 + 3 * 9)
    while small.has_room_for(b"k", b"v"):
        small.append(1, b"k", b"v")
    assert small.num_records == 3 and small.build().size_in_bytes == 61 + 3 * 9
    with pytest.raises(ValueError, match="headers"):
        MemoryRecordsBuilder(1).append(1, b"k", b"v", (("h", b"1"),))
    ordered = MemoryRecordsBuilder(base_offset=5)
    ordered.append_with_offset(7, 1, b"k", b"v")
    with pytest.raises(ValueError, match="increase"):
        ordered.append_with_offset(7, 1, b"k", b"v")
    closed = ordered.build()
    assert ordered.build() is closed and not ordered.has_room_for(b"k", b"v")
    with pytest.raises(ValueError, match="closed"):
        ordered.append(1, b"k", b"v")
    assert MemoryRecordsBuilder().build().size_in_bytes == 0
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(is_transactional=True)


def test_compression_rate_estimate_is_damped():
    estimator = CompressionRateEstimator()
    builder = MemoryRecordsBuilder(compression=CompressionType.GZIP, estimator=estimator)
    for _ in range(100):
        builder.append(1, b"k", b"a" * 100)
    assert builder.estimated_size_in_bytes() == 61 + int(builder._builder.uncompressed_size * 1.05)
    built = builder.build()
    observed = (built.size_in_bytes - 61) / builder._builder.uncompressed_size
    assert estimator.rate(CompressionType.GZIP) == pytest.approx(0.9 + 0.1 * observed)


# ---------------------------------------------------------------- conversion

@given(items=st.lists(st.tuples(timestamps, blobs, blobs, headers), min_size=1, max_size=8),
       codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]),
       base_offset=st.integers(0, 2**40))
@FAST
def test_conversions_keep_offsets_and_timestamps(items, codec, base_offset):
    original = build(2, codec, items, base_offset)
    for target in (0, 1):
        down = convert(original, target)
        assert list(down.records()) == expected(target, items, base_offset)
        assert all(b.magic == target for b in down.batches())
        up = convert(down, 2)
        assert [(r.offset, r.key, r.value, r.headers) for r in up.records()] == \
               [(r.offset, r.key, r.value, ()) for r in original.records()]
        assert all(b.compression_type is codec for b in up.batches() if b.magic == 2 and (codec or target))
    assert bytes(convert(original, 2)) == bytes(original)


def test_conversion_keeps_log_append_time_and_skips_control_batches():
    lat = build(2, CompressionType.GZIP, [(1, b"k", b"v", ())], base_offset=3,
                timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777)
    control = build(2, CompressionType.NONE, [(1, b"\x00\x00\x00\x01", b"", ())], base_offset=4,
                    producer_id=1, producer_epoch=0, base_sequence=-1, is_transactional=True, is_control=True)
    down = convert(MemoryRecords(bytes(lat) + bytes(control)), 1)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in down.records()] == \
           [(3, 777, TimestampType.LOG_APPEND_TIME)]
    zstd = build(2, CompressionType.ZSTD, [(1, b"k", b"v", ())])
    with pytest.raises(UnsupportedCompressionTypeError):
        convert(zstd, 1)


# ---------------------------------------------------------------- truncation and damage

def sample_buffer() -> bytes:
    parts = [build(0, CompressionType.NONE, [(1, b"a", b"b", ())]),
             build(1, CompressionType.LZ4, [(2, b"c", b"d", ()), (3, None, b"e", ())], base_offset=1),
             build(2, CompressionType.SNAPPY, [(4, b"f", None, (("h", b"1"),)), (5, b"g", b"h", ())], base_offset=3),
             build(2, CompressionType.NONE, [(6, b"i", b"j", ())], base_offset=5)]
    return b"".join(bytes(p) for p in parts)


def test_truncated_tail_is_ignored_at_every_cut():
    data = sample_buffer()
    full = list(MemoryRecords(data).records())
    ends = [p + s for p, s in legacy.log_entries(data)]
    for cut in range(len(data) + 1):
        complete = sum(1 for end in ends if end <= cut)
        got = list(MemoryRecords(data[:cut]).records())
        assert got == full[:len(got)]
        assert len(list(MemoryRecords(data[:cut]).batches())) == complete


def test_every_crc_covered_byte_flip_is_detected():
    data = sample_buffer()
    for position, size in legacy.log_entries(data):
        magic = data[position + 16]
        covered = range(position + 12, position + size) if magic < 2 else range(position + 16, position + size)
        for index in covered:
            damaged = bytearray(data)
            damaged[index] ^= 0x55
            with pytest.raises(CorruptRecordError):
                list(MemoryRecords(damaged).records())


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_garbling_raises_only_the_typed_error(data):
    buffer = bytearray(sample_buffer())
    for _ in range(data.draw(st.integers(1, 4))):
        buffer[data.draw(st.integers(0, len(buffer) - 1))] = data.draw(st.integers(0, 255))
    try:
        for batch in MemoryRecords(buffer).batches():
            (batch.base_offset, batch.last_offset, batch.max_timestamp, batch.is_valid())
        list(MemoryRecords(buffer).records(verify=data.draw(st.booleans())))
    except CorruptRecordError:
        pass


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_random_bytes_raise_only_the_typed_error(blob):
    try:
        list(MemoryRecords(blob).records(verify=False))
    except CorruptRecordError:
        pass


def test_corrupt_sizes_and_magic_are_errors_not_truncation():
    too_small = struct.pack(">qi", 0, 5) + b"\0" * 5
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        list(MemoryRecords(too_small).batches())
    data = bytearray(build(2, CompressionType.NONE, [(1, b"k", b"v", ())]).buffer)
    data[16] = 7
    with pytest.raises(CorruptRecordError, match="unknown magic 7"):
        list(MemoryRecords(data).batches())


# ---------------------------------------------------------------- in-place patches

def test_v2_patches_recompute_crc_only_where_covered():
    data = bytearray(build(2, CompressionType.LZ4, [(5, b"k", b"v", ()), (9, b"k", b"w", ())]).buffer)
    crc = v2.read_batch_header(data).crc
    v2.set_base_offset(data, 0, 1000)
    v2.set_partition_leader_epoch(data, 0, 7)
    assert v2.read_batch_header(data).crc == crc and v2.DefaultRecordBatch(data).is_valid()
    v2.set_max_timestamp(data, 0, TimestampType.CREATE_TIME, 9)  # unchanged: nothing to do
    assert v2.read_batch_header(data).crc == crc
    v2.set_max_timestamp(data, 0, TimestampType.LOG_APPEND_TIME, 50)
    batch = v2.DefaultRecordBatch(data)
    assert batch.is_valid() and batch.checksum != crc and batch.partition_leader_epoch == 7
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in batch.records()] == \
           [(1000, 50, TimestampType.LOG_APPEND_TIME), (1001, 50, TimestampType.LOG_APPEND_TIME)]


def test_legacy_patches():
    data = bytearray(build(1, CompressionType.GZIP, [(5, b"k", b"v", ())] * 3).buffer)
    legacy.set_entry_offset(data, 0, 42)
    legacy.set_wrapper_timestamp(data, 0, TimestampType.LOG_APPEND_TIME, 77)
    entry = legacy.LegacyRecordBatch(data)
    assert entry.is_valid() and [(r.offset, r.timestamp) for r in entry.records()] == [(40, 77), (41, 77), (42, 77)]


# ---------------------------------------------------------------- the figure

def test_record_layout_is_deterministic_and_covers_every_byte():
    records = build(2, CompressionType.NONE, [(1, b"k", b"v", (("h", b"x"),)), (2, None, None, ())])
    data = bytes(records)
    layout = batch_layout(data)
    assert sum(f.size for f in layout) == len(data)
    assert [f.offset for f in layout] == sorted(f.offset for f in layout)
    first = record_layout(data).source
    assert first == record_layout(next(records.batches())).source
    assert "baseOffset" in first and "header[0].key" in first and "record 1" in first
    compressed = build(2, CompressionType.GZIP, [(1, b"k", b"v", ())] * 6)
    assert "5 more records" in record_layout(compressed, max_records=1).source


@pytest.mark.parametrize("offset_delta, timestamp_delta, key, value", [
    (1, 0, None, b"x" * 100),
    (8191, -8192, b"", b""),                   # the last offset delta and timestamp delta the table covers
    (8192, 8192, b"k", None),                  # one past: the general path
    (5, 3, b"k" * 8191, b"v" * 8191),          # the longest key and value of the fast path
    (5, 3, b"k" * 8192, b"v" * 8192),
    (7, 0, bytearray(b"key"), memoryview(b"value")),
])
def test_builder_fast_path_writes_what_the_general_encoder_writes(offset_delta, timestamp_delta, key, value):
    builder = v2.RecordBatchBuilder(base_offset=100)
    builder.append(100, 1_000_000, None, None)
    builder.append(100 + offset_delta, 1_000_000 + timestamp_delta, key, value)
    expected = (v2._encode_record(0, 0, None, None, ())
                + v2._encode_record(offset_delta, timestamp_delta, key, value, ()))
    assert bytes(builder._records) == expected
    second = v2.DefaultRecordBatch(builder.build()).decode()[1]
    assert (second.offset, second.timestamp, second.key, second.value) == (
        100 + offset_delta, 1_000_000 + timestamp_delta, None if key is None else bytes(key),
        None if value is None else bytes(value))
