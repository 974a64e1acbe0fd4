"""ProducerBatch: futures and callbacks from one result, the fit test, close into the pooled buffer."""
from __future__ import annotations

import random
import threading

import pytest

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.producer.record_batch import ProducerBatch, ProduceRequestResult
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import CompressionRateEstimator, MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.record.record import NO_TIMESTAMP

TP = TopicPartition("t", 3)


def batch(limit: int = 16384, codec=CompressionType.NONE, buffer=None) -> ProducerBatch:
    builder = MemoryRecordsBuilder(compression=codec, write_limit=limit, estimator=CompressionRateEstimator())
    return ProducerBatch(TP, builder, created_ms=0, buffer=buffer)


def test_callbacks_run_in_append_order_before_get_returns():
    b = batch()
    events = []
    futures = [b.try_append(100 + i, b"k", b"v%d" % i, (), lambda m, e, i=i: events.append((i, m.offset)), 0)
               for i in range(3)]
    released = threading.Event()

    def waiter():
        futures[2].get(5)
        events.append("get returned")
        released.set()

    t = threading.Thread(target=waiter)
    t.start()
    b.done(42, NO_TIMESTAMP, None)
    t.join(5)
    assert events == [(0, 42), (1, 43), (2, 44), "get returned"]
    metadata = futures[1].get(0)
    assert (metadata.topic, metadata.partition, metadata.offset, metadata.timestamp) == ("t", 3, 43, 101)
    assert (metadata.serialized_key_size, metadata.serialized_value_size) == (1, 2)


def test_log_append_time_replaces_the_create_time():
    b = batch()
    f = b.try_append(100, None, b"v", (), None, 0)
    b.done(0, 99_999, None)
    assert f.get(0).timestamp == 99_999 and f.get(0).serialized_key_size == -1


def test_an_error_reaches_every_callback_and_future():
    b = batch()
    seen = []
    futures = [b.try_append(0, None, b"v", (), lambda m, e: seen.append((m, e.error)), 0) for _ in range(2)]
    b.done(-1, NO_TIMESTAMP, KafkaError(Errors.MESSAGE_TOO_LARGE))
    assert seen == [(None, Errors.MESSAGE_TOO_LARGE)] * 2
    for f in futures:
        with pytest.raises(KafkaError):
            f.get(0)
        assert f.exception(0).error is Errors.MESSAGE_TOO_LARGE


def test_a_failing_callback_does_not_stop_the_others(caplog):
    b = batch()
    seen = []
    b.try_append(0, None, b"v", (), lambda m, e: 1 / 0, 0)
    b.try_append(0, None, b"v", (), lambda m, e: seen.append(m.offset), 0)
    b.done(5, NO_TIMESTAMP, None)
    assert seen == [6] and "ZeroDivisionError" in caplog.text


def test_a_batch_completes_once():
    b = batch()
    b.try_append(0, None, b"v", (), None, 0)
    b.done(0, NO_TIMESTAMP, None)
    with pytest.raises(IllegalStateError):
        b.done(0, NO_TIMESTAMP, None)


def test_acks_zero_offsets_are_unknown():
    b = batch()
    f = b.try_append(0, None, b"v", (), None, 0)
    b.done(-1, NO_TIMESTAMP, None)
    assert f.get(0).offset == -1


def test_a_result_is_set_once_and_released_by_done():
    result = ProduceRequestResult(TP)
    result.set(1, NO_TIMESTAMP, None)
    assert not result.completed and not result.wait(0)
    result.done()
    assert result.completed and result.wait(0)
    with pytest.raises(IllegalStateError):
        result.set(2, NO_TIMESTAMP, None)


def test_get_times_out_while_pending():
    f = batch().try_append(0, None, b"v", (), None, 0)
    assert not f.done()
    with pytest.raises(TimeoutError):
        f.get(0.01)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
@pytest.mark.parametrize("size", [1, 50, 500, 3000])
def test_the_fit_test_fills_exactly_as_the_builder_alone(codec, size):
    value = bytes(range(256)) * (size // 256) + b"q" * (size % 256)
    ours = batch(4096, codec)
    while ours.try_append(0, b"key", value, (), None, 0) is not None:
        pass
    alone = MemoryRecordsBuilder(compression=codec, write_limit=4096, estimator=CompressionRateEstimator())
    count = 0
    while alone.has_room_for(b"key", value, (), 0):
        alone.append(0, b"key", value)
        count += 1
    assert ours.record_count == count


def test_headers_take_the_exact_path():
    b = batch(300)                                      # 61 + 2 records of ~99 bytes fit, a third does not
    headers = (("h" * 40, b"x" * 40),)
    assert b.try_append(0, None, b"v" * 10, headers, None, 0) is not None
    assert b.try_append(0, None, b"v" * 10, headers, None, 0) is not None
    assert b.try_append(0, None, b"v" * 10, headers, None, 0) is None


def test_close_moves_the_records_into_the_pooled_buffer():
    buffer = bytearray(16384)
    b = batch(buffer=buffer)
    for i in range(10):
        b.try_append(1000, None, b"value-%d" % i, (), None, 0)
    records = b.close()
    assert b.close() is records and b.is_closed and b.is_full()
    assert bytes(buffer[:records.size_in_bytes]) == bytes(records.buffer)
    assert [r.value for r in MemoryRecords(bytes(records.buffer)).records()] == [b"value-%d" % i for i in range(10)]
    assert b.try_append(0, None, b"late", (), None, 0) is None


def test_records_larger_than_the_buffer_keep_their_own_bytes():
    buffer = bytearray(100)
    b = batch(limit=100, buffer=buffer)
    b.try_append(0, None, b"x" * 500, (), None, 0)      # the first record always fits
    records = b.close()
    assert records.size_in_bytes > 100 and buffer == bytearray(100)


def _random_records(rng: random.Random, count: int) -> list[tuple]:
    """Keys and values of any size or null, timestamps that jump (long varints), now and then headers."""
    def field():
        return None if rng.random() < 0.15 else rng.randbytes(rng.choice([0, 1, 7, 63, 64, 200, 1500, 9000]))
    records, timestamp = [], 1_700_000_000_000
    for _ in range(count):
        timestamp += rng.choice([0, 1, 5000, 10**9, -(10**6)])
        headers = (("h", field()),) if rng.random() < 0.1 else ()
        records.append((timestamp, field(), field(), headers))
    return records


@pytest.mark.parametrize("seed", range(6))
def test_the_running_room_ends_batches_where_the_builder_alone_would(seed):
    """Batches of 1-16 KiB filled record by record: same records per batch, same bytes, same is_full answers."""
    rng = random.Random(seed)
    limit = rng.choice([1024, 4096, 16384])
    pending = _random_records(rng, 400)
    while pending:
        ours = batch(limit)
        alone = MemoryRecordsBuilder(write_limit=limit, estimator=CompressionRateEstimator())
        taken = 0
        for timestamp, key, value, headers in pending:
            fits = alone.has_room_for(key, value, headers, timestamp)
            future = ours.try_append(timestamp, key, value, headers, None, 0)
            assert (future is not None) == fits
            if not fits:
                break
            alone.append(timestamp, key, value, headers)
            taken += 1
            assert ours.is_full() == alone.is_full()
        assert taken and ours.record_count == taken
        assert bytes(ours.close().buffer) == bytes(alone.build().buffer)
        pending = pending[taken:]
