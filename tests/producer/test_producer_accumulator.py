"""RecordAccumulator rules on a mock clock: linger, full batches, drain fairness, backoff, expiry,
muting, flush and close (the seed's acceptance tests 2-4, plus the error paths)."""
from __future__ import annotations

import threading

import pytest

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.producer.record_accumulator import NO_DELAY_MS, RecordAccumulator
from kafka_edu.common.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecords
from kafka_edu.common.record.record import NO_TIMESTAMP
from kafka_edu.common.utils.time import MockTime

NODE0, NODE1 = Node(0, "h0", 9092), Node(1, "h1", 9092)
TP0 = TopicPartition("t", 0)


def cluster(partitions: int = 4, leaders=None) -> Cluster:
    leaders = leaders or [NODE0] * partitions
    return Cluster([NODE0, NODE1], [PartitionInfo("t", p, leaders[p]) for p in range(partitions)])


@pytest.fixture
def time():
    return MockTime()


def test_linger_holds_a_partial_batch_then_one_batch_carries_all_records(time):
    acc = RecordAccumulator(batch_size=16384, linger_ms=100, time=time)
    futures = [acc.append(TP0, time.milliseconds(), None, b"v" * 50, now=time.milliseconds()).future
               for _ in range(100)]
    for now in (0, 50, 99):
        time.set_milliseconds(now)
        result = acc.ready(cluster(), now)
        assert result.ready_nodes == set()
        assert result.next_ready_check_delay_ms == 100 - now
    time.set_milliseconds(100)
    assert acc.ready(cluster(), 100).ready_nodes == {NODE0}
    drained = acc.drain(cluster(), [NODE0], 1_048_576, 100)
    assert [len(batches) for batches in drained.values()] == [1]
    [batch] = drained[0]
    assert batch.record_count == 100 and batch.is_closed
    records = list(MemoryRecords(bytes(batch.records.buffer)).records())
    assert [r.offset for r in records] == list(range(100))
    batch.done(1000, NO_TIMESTAMP, None)
    assert [f.get(0).offset for f in futures] == list(range(1000, 1100))


def test_a_second_batch_makes_the_partition_ready_without_waiting_for_linger(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=60_000, time=time)
    results = [acc.append(TP0, 0, None, b"x" * 100) for _ in range(20)]      # about 2 KB
    assert len(acc.batches()[TP0]) >= 2
    assert any(r.batch_is_full for r in results)
    assert acc.ready(cluster(), 0).ready_nodes == {NODE0}
    assert results[0].new_batch_created and not results[1].new_batch_created


def test_a_full_first_batch_alone_is_ready(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=60_000, time=time)
    acc.append(TP0, 0, None, b"x" * 2000)                    # larger than batch.size: a batch of its own
    [batch] = acc.batches()[TP0]
    assert batch.is_full() and len(batch.buffer) > 1024
    assert acc.ready(cluster(), 0).ready_nodes == {NODE0}


def test_drain_takes_one_batch_per_partition(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    for p in range(4):
        for _ in range(20):
            acc.append(TopicPartition("t", p), 0, None, b"z" * 90)
    assert all(len(b) >= 2 for b in acc.batches().values())
    drained = acc.drain(cluster(), [NODE0], 1_048_576, 0)
    assert sorted(b.topic_partition.partition for b in drained[0]) == [0, 1, 2, 3]


def test_drain_rotates_when_the_request_size_cuts_it_short(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    for p in range(4):
        for _ in range(40):                                     # about 4 batches per partition
            acc.append(TopicPartition("t", p), 0, None, b"z" * 90)
    seen = []
    for _ in range(4):
        drained = acc.drain(cluster(), [NODE0], 2 * 1024, 0)[0]
        assert len(drained) == 2
        seen.append([b.topic_partition.partition for b in drained])
    assert seen == [[0, 1], [2, 3], [0, 1], [2, 3]]


def test_an_oversized_batch_is_still_drained_alone(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    acc.append(TP0, 0, None, b"x" * 5000)
    acc.append(TopicPartition("t", 1), 0, None, b"y" * 10)
    first = acc.drain(cluster(), [NODE0], 1024, 0)[0]
    assert [b.topic_partition for b in first] == [TP0]
    assert [b.topic_partition.partition for b in acc.drain(cluster(), [NODE0], 1024, 0)[0]] == [1]


def test_drain_groups_batches_by_leader(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    two_nodes = cluster(4, [NODE0, NODE1, NODE0, NODE1])
    for p in range(4):
        acc.append(TopicPartition("t", p), 0, None, b"a")
    assert acc.ready(two_nodes, 0).ready_nodes == {NODE0, NODE1}
    drained = acc.drain(two_nodes, [NODE0, NODE1], 1_048_576, 0)
    assert {n: sorted(b.topic_partition.partition for b in bs) for n, bs in drained.items()} == {0: [0, 2], 1: [1, 3]}


def test_unknown_leaders_are_reported_by_topic(time):
    acc = RecordAccumulator(linger_ms=0, time=time)
    acc.append(TopicPartition("t", 1), 0, None, b"a")
    acc.append(TopicPartition("other", 0), 0, None, b"b")
    result = acc.ready(cluster(4, [NODE0, None, NODE0, NODE0]), 0)
    assert result.ready_nodes == set() and result.unknown_leader_topics == {"t", "other"}


def test_reenqueued_batch_goes_first_and_backs_off(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, retry_backoff_ms=100, time=time)
    acc.append(TP0, 0, None, b"first")
    [batch] = acc.drain(cluster(), [NODE0], 1_048_576, 0)[0]
    acc.append(TP0, 0, None, b"second")
    time.set_milliseconds(10)
    acc.reenqueue(batch, 10)
    assert acc.batches()[TP0][0] is batch and batch.attempts == 1 and batch.retry
    result = acc.ready(cluster(), 50)
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 60
    assert acc.drain(cluster(), [NODE0], 1_048_576, 50)[0] == []    # drain skips a backing-off batch too
    assert acc.ready(cluster(), 110).ready_nodes == {NODE0}
    assert acc.drain(cluster(), [NODE0], 1_048_576, 110)[0] == [batch]


def test_waiters_in_the_buffer_pool_make_every_batch_sendable(time):
    acc = RecordAccumulator(batch_size=1024, total_size=2048, linger_ms=60_000, time=time)
    acc.append(TP0, 0, None, b"a")
    acc.append(TopicPartition("t", 1), 0, None, b"b")         # all memory is in use now
    blocked = threading.Thread(target=lambda: acc.append(TopicPartition("t", 2), 0, None, b"c",
                                                         max_time_to_block_ms=5_000), daemon=True)
    blocked.start()
    while acc.free.queued() == 0:
        threading.Event().wait(0.001)
    assert acc.ready(cluster(), 0).ready_nodes == {NODE0}       # "exhausted"
    [first, second] = acc.drain(cluster(), [NODE0], 1_048_576, 0)[0]
    first.done(0, NO_TIMESTAMP, None)
    acc.deallocate(first)
    blocked.join(5)
    assert not blocked.is_alive() and TopicPartition("t", 2) in acc.batches()


def test_expiry_rules_and_order(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=10, retry_backoff_ms=100, time=time)
    errors = []
    for _ in range(15):                                          # two batches: the first one is full
        acc.append(TP0, 0, None, b"x" * 100, callback=lambda m, e: errors.append(e))
    assert len(acc.batches()[TP0]) == 2
    assert acc.abort_expired_batches(30_000, 30_000) == []      # nobody waited more than 30 s yet
    [full] = acc.abort_expired_batches(30_000, 30_001)          # full: 30 s after its last append
    assert full.record_count == 8 and len(errors) == 8
    assert acc.abort_expired_batches(30_000, 30_010) == []      # the open one: 30 s after creation + linger
    [partial] = acc.abort_expired_batches(30_000, 30_011)
    assert partial.record_count == 7 and TP0 not in acc.batches()
    assert len(errors) == 15 and all(isinstance(e, TimeoutError) for e in errors)
    assert len(acc.incomplete) == 0 and acc.free.available_memory == acc.free.total_memory


def test_expiry_stops_at_the_first_batch_that_has_not_expired(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, retry_backoff_ms=100, time=time)
    acc.append(TP0, 0, None, b"old")
    [batch] = acc.drain(cluster(), [NODE0], 1_048_576, 0)[0]
    time.set_milliseconds(20_000)
    acc.reenqueue(batch, 20_000)                                  # retried at 20 s
    acc.append(TP0, 0, None, b"x" * 2000, now=0)                 # an old, full batch behind it
    assert acc.abort_expired_batches(30_000, 40_000) == []      # the retried head has not expired
    assert len(acc.batches()[TP0]) == 2


def test_muted_partitions_are_neither_ready_drained_nor_expired(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    acc.append(TP0, 0, None, b"a")
    acc.mute(TP0)
    assert acc.ready(cluster(), 0).ready_nodes == set()
    assert acc.drain(cluster(), [NODE0], 1_048_576, 0)[0] == []
    assert acc.abort_expired_batches(10, 100_000) == []
    acc.unmute(TP0)
    assert acc.ready(cluster(), 0).ready_nodes == {NODE0}


def test_flush_makes_lingering_batches_ready_and_waits_for_them(time):
    acc = RecordAccumulator(batch_size=16384, linger_ms=60_000, time=time)
    future = acc.append(TP0, 0, None, b"a").future
    assert acc.ready(cluster(), 0).ready_nodes == set()
    acc.begin_flush()
    assert acc.flush_in_progress() and acc.ready(cluster(), 0).ready_nodes == {NODE0}
    waiter = threading.Thread(target=acc.await_flush_completion, daemon=True)
    waiter.start()
    [batch] = acc.drain(cluster(), [NODE0], 1_048_576, 0)[0]
    assert waiter.is_alive()
    batch.done(7, NO_TIMESTAMP, None)
    waiter.join(5)
    assert not waiter.is_alive() and not acc.flush_in_progress() and future.get(0).offset == 7


def test_close_refuses_appends_and_makes_everything_sendable(time):
    acc = RecordAccumulator(linger_ms=60_000, time=time)
    acc.append(TP0, 0, None, b"a")
    acc.close()
    assert acc.closed and acc.ready(cluster(), 0).ready_nodes == {NODE0}
    with pytest.raises(IllegalStateError):
        acc.append(TP0, 0, None, b"b")


def test_abort_incomplete_batches_fails_queued_and_in_flight_batches(time):
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, time=time)
    in_flight = acc.append(TP0, 0, None, b"a").future
    acc.drain(cluster(), [NODE0], 1_048_576, 0)
    queued = acc.append(TopicPartition("t", 1), 0, None, b"b").future
    acc.close()
    acc.abort_incomplete_batches()
    for future in (in_flight, queued):
        assert isinstance(future.exception(0), IllegalStateError)
    assert not acc.has_unsent() and len(acc.incomplete) == 0


def test_concurrent_appends_lose_nothing(time):
    acc = RecordAccumulator(batch_size=2048, linger_ms=0, time=time)
    futures: list = []

    def worker(n):
        mine = [acc.append(TopicPartition("t", i % 4), 0, b"%d" % n, b"%d-%d" % (n, i)).future for i in range(1000)]
        futures.extend(mine)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batches = [b for bs in acc.batches().values() for b in bs]
    assert sum(b.record_count for b in batches) == 8000 == len(futures)
    values = set()
    for b in batches:
        b.close()
        values.update(r.value for r in MemoryRecords(bytes(b.records.buffer)).records())
    assert len(values) == 8000


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4])
def test_compressed_batches_are_closed_with_their_codec(time, codec):
    acc = RecordAccumulator(batch_size=4096, linger_ms=0, compression=codec, time=time)
    for i in range(200):
        acc.append(TP0, 1000, None, b"value-%04d" % i + b"." * 50)
    batches = acc.drain(cluster(), [NODE0], 1_048_576, 0)[0]
    [batch] = batches
    [decoded] = MemoryRecords(bytes(batch.records.buffer)).batches()
    assert decoded.compression_type is codec and decoded.count == batch.record_count


def test_nothing_to_send_means_no_deadline(time):
    acc = RecordAccumulator(time=time)
    assert acc.ready(cluster(), 0).next_ready_check_delay_ms == NO_DELAY_MS
    assert acc.drain(cluster(), [], 1_048_576, 0) == {}
