"""Fetcher against an in-process broker: order, max.poll.records, stale data, resets, pause."""
from __future__ import annotations

import pytest
from _consumer_helpers import create_topic, start_broker

from kafka_edu.clients.consumer.consumer_network_client import ConsumerNetworkClient
from kafka_edu.clients.consumer.fetcher import Fetcher, NoOffsetForPartitionError
from kafka_edu.clients.consumer.subscription_state import OffsetAndMetadata, OffsetResetStrategy, SubscriptionState
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import StringDeserializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.network.selector import KSelector

P0, P1 = TopicPartition("f", 0), TopicPartition("f", 1)
COUNT = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("fetcher"))
    create_topic(server, "f", 2)
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "linger.ms": 5,
                              "compression.type": "gzip",
                              "key.serializer": "kafka_edu.clients.producer.serializers.StringSerializer",
                              "value.serializer": "kafka_edu.clients.producer.serializers.StringSerializer"})
    for i in range(COUNT):
        producer.send("f", f"v{i}", partition=i % 2)
    producer.flush()
    producer.close()
    yield server
    server.shutdown()


def make(server, reset=OffsetResetStrategy.EARLIEST, **kwargs):
    metadata = Metadata()
    metadata.bootstrap([("127.0.0.1", server.bound_port())])
    client = ConsumerNetworkClient(NetworkClient(KSelector(), metadata), metadata)
    subs = SubscriptionState(reset)
    subs.assign_from_user([P0, P1])
    metadata.set_topics(["f"])
    client.await_metadata_update(10_000)
    fetcher = Fetcher(client, subs, metadata, value_deserializer=StringDeserializer(), **kwargs)
    return client, subs, fetcher


def poll(client, fetcher, rounds=100):
    for _ in range(rounds):
        records = fetcher.fetched_records()
        if records:
            return records
        fetcher.send_fetches()
        client.poll(50)
    return {}


def test_every_record_once_in_order_within_max_poll_records(server):
    client, subs, fetcher = make(server, max_poll_records=7)
    fetcher.update_fetch_positions(subs.assigned_partitions())
    got = {P0: [], P1: []}
    while sum(map(len, got.values())) < COUNT:
        batch = poll(client, fetcher)
        assert batch and sum(map(len, batch.values())) <= 7
        for tp, records in batch.items():
            got[tp] += [(r.offset, r.value) for r in records]
    assert got[P0] == [(i, f"v{2 * i}") for i in range(COUNT // 2)]
    assert got[P1] == [(i, f"v{2 * i + 1}") for i in range(COUNT // 2)]
    assert subs.position(P0) == subs.position(P1) == COUNT // 2
    assert poll(client, fetcher, rounds=3) == {}
    client.close()


def test_committed_offset_wins_over_reset_and_latest_reset(server):
    client, subs, fetcher = make(server, reset=OffsetResetStrategy.LATEST)
    subs.committed(P0, OffsetAndMetadata(10))
    fetcher.update_fetch_positions(subs.assigned_partitions())
    assert subs.position(P0) == 10 and subs.position(P1) == COUNT // 2
    client.close()


def test_seek_drops_buffered_records_and_pause_stops_fetching(server):
    client, subs, fetcher = make(server, max_poll_records=1)
    subs.seek(P0, 0)
    subs.seek(P1, 0)
    subs.pause(P1)
    first = poll(client, fetcher)
    assert list(first) == [P0] and first[P0][0].offset == 0
    subs.seek(P0, 20)                          # the rest of the buffered fetch is now stale
    again = poll(client, fetcher)
    assert again[P0][0].offset == 20 and again[P0][0].value == "v40"
    client.close()


def test_out_of_range_resets_or_raises(server):
    client, subs, fetcher = make(server)
    subs.seek(P0, 10_000)
    subs.pause(P1)
    assert poll(client, fetcher, rounds=20) == {}
    assert subs.is_offset_reset_needed(P0)
    fetcher.update_fetch_positions([P0])
    assert subs.position(P0) == 0
    client.close()
    client, subs, fetcher = make(server, reset=OffsetResetStrategy.NONE)
    with pytest.raises(NoOffsetForPartitionError):
        fetcher.update_fetch_positions([P0])
    subs.seek(P0, 10_000)
    subs.pause(P1)
    with pytest.raises(NoOffsetForPartitionError):
        poll(client, fetcher, rounds=20)
    client.close()


def test_records_taken_before_a_failed_fetch_are_returned_and_the_error_comes_next(server):
    """P0's records are taken (its position moves past them) before P1's fetch fails in the same call:
    the call returns them, and the next call raises."""
    client, subs, fetcher = make(server, reset=OffsetResetStrategy.NONE)
    subs.seek(P0, 0)
    subs.seek(P1, 10_000)                      # out of range, and no reset policy
    got = []
    with pytest.raises(NoOffsetForPartitionError):
        for _ in range(100):
            got += [r.offset for r in fetcher.fetched_records().get(P0, [])]
            fetcher.send_fetches()
            client.poll(50)
    subs.seek(P1, 0)
    for _ in range(10):
        if subs.position(P0) == COUNT // 2:
            break
        got += [r.offset for r in poll(client, fetcher).get(P0, [])]
    assert got == list(range(COUNT // 2))
    client.close()


def test_max_poll_records_must_be_positive(server):
    with pytest.raises(ValueError):
        make(server, max_poll_records=0)


# --- batches that end past their last record ----------------------------------------------------

def batch(base_offset: int, count: int, last_offset: int | None = None, **control) -> bytes:
    """A v2 batch of `count` records from `base_offset`; `last_offset` moves its end as the cleaner does."""
    import struct

    import crc32c

    from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
    builder = MemoryRecordsBuilder(base_offset=base_offset, **control)
    for i in range(count):
        if control:
            builder.append(0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0))   # a COMMIT marker
        else:
            builder.append(0, None, b"v%d" % (base_offset + i))
    data = bytearray(bytes(builder.build()))
    if last_offset is not None:                  # lastOffsetDelta at byte 23; the CRC covers bytes 21 on
        struct.pack_into(">i", data, 23, last_offset - base_offset)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def offline_fetcher(max_poll_records: int = 500):
    from kafka_edu.clients.consumer.fetcher import CompletedFetch
    from kafka_edu.common.protocol.errors import Errors

    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign_from_user([P0])
    subs.seek(P0, 0)
    fetcher = Fetcher(None, subs, Metadata(), max_poll_records=max_poll_records)

    def answer(*batches: bytes) -> None:
        fetcher.completed_fetches.append(CompletedFetch(P0, subs.position(P0), Errors.NONE, 100, b"".join(batches)))
    return subs, fetcher, answer


def offsets(records) -> list[int]:
    return [r.offset for r in records.get(P0, [])]


def test_position_moves_to_the_end_of_a_batch_whose_last_records_were_cleaned():
    subs, fetcher, answer = offline_fetcher()
    answer(batch(0, 3), batch(3, 2, last_offset=7))
    assert offsets(fetcher.fetched_records()) == [0, 1, 2, 3, 4]
    assert subs.position(P0) == 8                  # not 5: offsets 5-7 are gone but belong to that batch


def test_position_moves_to_the_batch_end_across_max_poll_records():
    subs, fetcher, answer = offline_fetcher(max_poll_records=4)
    answer(batch(0, 5, last_offset=9))
    assert offsets(fetcher.fetched_records()) == [0, 1, 2, 3] and subs.position(P0) == 4
    assert offsets(fetcher.fetched_records()) == [4] and subs.position(P0) == 10


def test_control_batches_are_skipped_and_stepped_over():
    subs, fetcher, answer = offline_fetcher()
    marker = dict(producer_id=7, producer_epoch=0, is_transactional=True, is_control=True)
    answer(batch(0, 2), batch(2, 1, **marker))
    assert offsets(fetcher.fetched_records()) == [0, 1] and subs.position(P0) == 3
    answer(batch(3, 1, **marker))                  # nothing for the application, but the position moves
    assert fetcher.fetched_records() == {} and subs.position(P0) == 4
    answer(batch(4, 1))
    assert offsets(fetcher.fetched_records()) == [4] and subs.position(P0) == 5


def test_the_partition_being_returned_is_fetched_ahead_and_a_seek_drops_that_fetch():
    from kafka_edu.clients.consumer.fetcher import CompletedFetch
    from kafka_edu.common.protocol.errors import Errors

    subs, fetcher, answer = offline_fetcher(max_poll_records=4)
    assert fetcher._fetch_offsets() == {P0: 0}
    answer(batch(0, 10))
    assert fetcher._fetch_offsets() == {}                   # a completed fetch is waiting: no second one
    assert offsets(fetcher.fetched_records()) == [0, 1, 2, 3]
    assert fetcher._fetch_offsets() == {P0: 10}             # from where the buffered records end, not 4
    fetcher.completed_fetches.append(CompletedFetch(P0, 10, Errors.NONE, 100, batch(10, 2)))
    assert fetcher._fetch_offsets() == {}
    assert offsets(fetcher.fetched_records()) == [4, 5, 6, 7]
    assert offsets(fetcher.fetched_records()) == [8, 9, 10, 11] and subs.position(P0) == 12
    answer(batch(12, 6))
    assert offsets(fetcher.fetched_records()) == [12, 13, 14, 15]
    fetcher.completed_fetches.append(CompletedFetch(P0, 18, Errors.NONE, 100, batch(18, 1)))
    subs.seek(P0, 3)                                        # both the rest and the fetch ahead are stale now
    assert fetcher.fetched_records() == {} and fetcher._fetch_offsets() == {P0: 3}
