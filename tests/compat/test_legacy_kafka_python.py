"""Our record formats against kafka-python's record codecs (an implementation we did not write).

Message sets v0/v1 (kafka.record.legacy_records) and v2 batches (kafka.record.default_records) are
encoded by one side and decoded by the other, for every codec each format allows.

kafka-python frames every codec itself (kafka/codec.py: snappy-java blocks, the legacy LZ4 header
checksum, zstd frames) on top of python-snappy, zstandard and xxhash, which the dev extras install,
so nothing of ours stands in for any part of kafka-python here.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_edu.common.record.compression import CompressionType, compress, decompress
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.record.record import NO_TIMESTAMP

kafka_codec = pytest.importorskip("kafka.codec")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords  # noqa: E402

LEGACY = [(magic, codec) for magic in (0, 1) for codec in CompressionType if codec is not CompressionType.ZSTD]
V2 = list(CompressionType)


def test_kafka_python_runs_on_its_own_codec_libraries():
    assert kafka_codec.has_snappy() and kafka_codec.has_zstd() and kafka_codec.has_lz4()


def sample(n: int, magic: int):
    return [(1_700_000_000_000 + i, None if i % 5 == 3 else b"key-%d" % i, None if i % 7 == 6 else b"value %d " % i * (i % 4),
             [("h%d" % j, None if j == 1 else b"x" * j) for j in range(i % 3)] if magic == 2 else [])
            for i in range(n)]


def read_with_kafka_python(data: bytes):
    records = KpMemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for record in batch:
            out.append((record.offset, record.timestamp, record.key, record.value, list(record.headers)))
    return out


def read_with_ours(data: bytes):
    return [(r.offset, None if r.timestamp == NO_TIMESTAMP else r.timestamp, r.key, r.value, list(r.headers))
            for r in MemoryRecords(data).records()]


def expected(items, magic, offsets):
    return [(offset, ts if magic else None, key, value, headers) for offset, (ts, key, value, headers) in zip(offsets, items, strict=True)]


@pytest.mark.parametrize("magic,codec", LEGACY, ids=[f"v{m}-{c.config_name}" for m, c in LEGACY])
def test_legacy_ours_to_kafka_python(magic, codec):
    items = sample(40, magic)
    builder = MemoryRecordsBuilder(magic, codec, base_offset=1000)
    for ts, key, value, _ in items:
        builder.append(ts, key, value)
    assert read_with_kafka_python(bytes(builder.build())) == expected(items, magic, range(1000, 1040))


@pytest.mark.parametrize("magic,codec", LEGACY, ids=[f"v{m}-{c.config_name}" for m, c in LEGACY])
def test_legacy_kafka_python_to_ours(magic, codec):
    items = sample(40, magic)
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for offset, (ts, key, value, _) in enumerate(items):
        builder.append(offset, timestamp=ts, key=key, value=value)
    data = bytes(builder.build())
    batches = list(MemoryRecords(data).batches())
    assert all(b.is_valid() and b.magic == magic and b.compression_type is codec for b in batches)
    assert read_with_ours(data) == read_with_kafka_python(data) == expected(items, magic, range(40))
    if codec and magic == 1:
        # kafka-python writes the wrapper with offset 0, not the last inner offset as the Java producer
        # does; wrapper - last relative offset is then negative and readers keep the relative offsets.
        assert batches[0].last_offset == 0


@pytest.mark.parametrize("codec", V2, ids=[c.config_name for c in V2])
def test_v2_ours_to_kafka_python(codec):
    items = sample(40, 2)
    builder = MemoryRecordsBuilder(2, codec, base_offset=77, producer_id=9, producer_epoch=2, base_sequence=100)
    for ts, key, value, headers in items:
        builder.append(ts, key, value, headers)
    data = bytes(builder.build())
    assert read_with_kafka_python(data) == expected(items, 2, range(77, 117))
    batch = KpMemoryRecords(data).next_batch()
    assert (batch.compression_type, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (int(codec), 9, 2, 100)


@pytest.mark.parametrize("codec", V2, ids=[c.config_name for c in V2])
def test_v2_kafka_python_to_ours(codec):
    items = sample(40, 2)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset, (ts, key, value, headers) in enumerate(items):
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    (batch,) = MemoryRecords(data).batches()
    assert batch.is_valid() and batch.count == 40 and batch.compression_type is codec
    assert read_with_ours(data) == expected(items, 2, range(40))


@given(items=st.lists(st.tuples(st.integers(0, 2**41), st.none() | st.binary(max_size=20),
                                st.none() | st.binary(max_size=20),
                                st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2)),
                      min_size=1, max_size=10),
       codec=st.sampled_from(V2))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_v2_both_ways_property(items, codec):
    ours = MemoryRecordsBuilder(2, codec)
    theirs = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                       producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset, (ts, key, value, headers) in enumerate(items):
        ours.append(ts, key, value, headers)
        theirs.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    want = expected(items, 2, range(len(items)))
    assert read_with_kafka_python(bytes(ours.build())) == want
    assert read_with_ours(bytes(theirs.build())) == want


def test_codec_framings_match_kafka_python():
    data = b"framing " * 20_000
    # snappy: both write snappy-java blocks of 32 KiB; both read raw snappy (what librdkafka sends)
    assert kafka_codec.snappy_decode(compress(CompressionType.SNAPPY, data, 1)) == data
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(data), 1) == data
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False), 1) == data
    assert compress(CompressionType.SNAPPY, data, 1) == kafka_codec.snappy_encode(data)
    # LZ4 magic 0: kafka-python's "old kafka" helpers break and repair the header checksum as we do
    ours_v0 = compress(CompressionType.LZ4, data, 0)
    assert kafka_codec.lz4_decode_old_kafka(ours_v0) == data
    assert ours_v0 == kafka_codec.lz4_encode_old_kafka(data)[:7] + ours_v0[7:]
    assert decompress(CompressionType.LZ4, kafka_codec.lz4_encode_old_kafka(data), 0) == data
    # LZ4 magic 1/v2: kafka-python's frames carry a content size, which Kafka's writer never sets
    theirs = kafka_codec.lz4_encode(data)
    assert theirs[4] & 0x08 and not compress(CompressionType.LZ4, data, 1)[4] & 0x08
    assert decompress(CompressionType.LZ4, theirs, 1) == data and kafka_codec.lz4_decode(compress(CompressionType.LZ4, data, 2)) == data
    assert kafka_codec.gzip_decode(compress(CompressionType.GZIP, data, 1)) == data
    assert decompress(CompressionType.GZIP, kafka_codec.gzip_encode(data), 1) == data
    assert kafka_codec.zstd_decode(compress(CompressionType.ZSTD, data, 2)) == data
    assert decompress(CompressionType.ZSTD, kafka_codec.zstd_encode(data), 2) == data
