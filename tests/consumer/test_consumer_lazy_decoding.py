"""Records decoded on demand (Beyond 0.10): RecordCursor, and the Fetcher decoding only what poll() returns."""
from __future__ import annotations

import pytest

from kafka_edu.clients.consumer.fetcher import CompletedFetch, ConsumerRecord, DecodedRecords, Fetcher
from kafka_edu.clients.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from kafka_edu.clients.producer.serializers import StringDeserializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.default_records import (RECORD_BATCH_OVERHEAD, DefaultRecordBatch, RecordBatchBuilder,
                                                     RecordCursor)
from kafka_edu.common.record.errors import CorruptRecordError

TP = TopicPartition("lazy", 0)


def batch(base: int, count: int, codec=CompressionType.NONE) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base)
    for i in range(count):
        builder.append(base + i, 1_000 + i, None if i % 3 else b"k%d" % i, b"v%d" % (base + i),
                       headers=(("h", b"%d" % i),) if i % 5 == 0 else ())
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4])
def test_taking_a_cursor_in_pieces_gives_what_decode_gives(codec):
    data = batch(40, 1_000, codec)
    whole = DefaultRecordBatch(data).decode(into=ConsumerRecord, prefix=TP)
    cursor = DefaultRecordBatch(data).cursor(into=ConsumerRecord, prefix=TP)
    pieces = []
    for n in (1, 7, 500, 0, 10_000):
        pieces += cursor.take(n)
    assert pieces == whole and cursor.left == 0 and cursor.take(5) == []
    assert [r.offset for r in whole] == list(range(40, 1_040))


def test_trailing_bytes_are_found_when_the_last_record_is_taken():
    data = bytearray(batch(0, 3))
    data[RECORD_BATCH_OVERHEAD - 4:RECORD_BATCH_OVERHEAD] = (2).to_bytes(4, "big")   # claim 2 of the 3 records
    cursor = DefaultRecordBatch(bytes(data)).cursor(verify=False)
    assert len(cursor.take(1)) == 1
    with pytest.raises(CorruptRecordError, match="remain after"):
        cursor.take(1)


class NoNetwork:
    """The Fetcher's client, for tests that only parse completed fetches."""

    class client:
        client_id = "lazy-test"


def fetcher_at(position: int, **kwargs) -> tuple[Fetcher, SubscriptionState]:
    subscriptions = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subscriptions.assign_from_user([TP])
    subscriptions.seek(TP, position)
    return Fetcher(NoNetwork(), subscriptions, None, **kwargs), subscriptions


def test_poll_decodes_only_the_records_it_returns():
    fetcher, subscriptions = fetcher_at(0, max_poll_records=100)
    fetcher.completed_fetches.append(CompletedFetch(TP, 0, Errors.NONE, 2_000, batch(0, 1_000) + batch(1_000, 1_000)))
    first = fetcher.fetched_records()[TP]
    part = fetcher._next_in_line
    assert [r.offset for r in first] == list(range(100)) and part.remaining() == 1_900
    assert all(type(p) is RecordCursor for p in part.pieces) and part.pieces[0].left == 900
    offsets = [r.offset for r in first]
    while part.remaining():
        offsets += [r.offset for r in fetcher.fetched_records()[TP]]
    assert offsets == list(range(2_000)) and subscriptions.position(TP) == 2_000


def test_a_seek_inside_a_batch_skips_its_head_and_deserializers_decode_at_once():
    fetcher, subscriptions = fetcher_at(995, max_poll_records=8, value_deserializer=StringDeserializer())
    fetcher.completed_fetches.append(CompletedFetch(TP, 995, Errors.NONE, 2_000,
                                                    batch(0, 1_000, CompressionType.GZIP) + batch(1_000, 10)))
    taken = fetcher.fetched_records()[TP]
    assert [(r.offset, r.value) for r in taken] == [(o, f"v{o}") for o in range(995, 1_003)]
    assert all(type(p) is DecodedRecords for p in fetcher._next_in_line.pieces)
    assert [r.offset for r in fetcher.fetched_records()[TP]] == list(range(1_003, 1_010))
    assert subscriptions.position(TP) == 1_010

    raw, raw_subscriptions = fetcher_at(998, max_poll_records=1_000)
    raw.completed_fetches.append(CompletedFetch(TP, 998, Errors.NONE, 2_000, batch(0, 1_000) + batch(1_000, 3)))
    records = raw.fetched_records()[TP]
    assert [r.offset for r in records] == [998, 999, 1_000, 1_001, 1_002]
    assert records[0] == ConsumerRecord("lazy", 0, 998, 1_998, records[0].timestamp_type, None, b"v998", ())
    assert raw_subscriptions.position(TP) == 1_003


def test_a_corrupt_record_is_raised_by_every_poll_that_reaches_it_until_a_seek_past_it():
    data = bytearray(batch(0, 200))
    data[RECORD_BATCH_OVERHEAD - 4:RECORD_BATCH_OVERHEAD] = (201).to_bytes(4, "big")   # one record too many
    fetcher, subscriptions = fetcher_at(0, max_poll_records=150, check_crcs=False)
    fetcher.completed_fetches.append(CompletedFetch(TP, 0, Errors.NONE, 201, bytes(data)))
    assert len(fetcher.fetched_records()[TP]) == 150
    for _ in range(2):
        with pytest.raises(CorruptRecordError, match="truncated"):
            fetcher.fetched_records()
        assert subscriptions.position(TP) == 150
    subscriptions.seek(TP, 201)
    assert fetcher.fetched_records() == {} and fetcher._next_in_line is None
