"""The figure helpers of kafka_edu.viz read live objects correctly (the notebooks show the pictures)."""
import threading

from kafka_edu.clients.client_request import ClientRequest
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.in_flight_requests import InFlightRequests
from kafka_edu.clients.producer.buffer_pool import BufferPool
from kafka_edu.clients.producer.record_accumulator import RecordAccumulator
from kafka_edu.clients.producer.record_batch import ProducerBatch
from kafka_edu.common.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.legacy_records import encode_message
from kafka_edu.common.record.memory_records import CompressionRateEstimator, MemoryRecordsBuilder
from kafka_edu.common.protocol.header import RequestHeader
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.purgatory.delayed_operation import DelayedOperation, DelayedOperationPurgatory
from kafka_edu.viz.accumulator import append_race_figure, append_race_snapshot
from kafka_edu.viz.buffer_pool import batch_buffers, pool_figure
from kafka_edu.viz.consumer_parts import consumer_parts_figure, consumer_wiring
from kafka_edu.viz.in_flight import in_flight_figure
from kafka_edu.viz.log import recovery_snapshot, segment_lookup_figure
from kafka_edu.viz.message_set import _fields
from kafka_edu.viz.purgatory import purgatory_figure
from kafka_edu.viz.sequence import SequenceRecorder, sequence_figure


class _Counter:
    def __init__(self):
        self.total = 0

    def add(self, n):
        self.total += n
        return self.total


def test_sequence_recorder_traces_in_call_order_and_restores():
    counter = _Counter()
    flow = SequenceRecorder(["caller", "counter"])
    flow.trace(counter, "add", "caller", "counter", lambda n: f"add({n})", lambda total: f"total {total}")
    flow.send("caller", "counter", "hello")
    counter.add(2)
    counter.add(3)
    flow.restore()
    counter.add(4)                                   # no longer traced
    assert [s.text() for s in flow.steps] == ["hello", "add(2) -> total 2", "add(3) -> total 5"]
    assert "add" not in vars(counter)
    assert "3. add(3) -&gt; total 5" in sequence_figure(flow).source


def test_in_flight_figure_points_the_completed_send_at_the_head():
    in_flight = InFlightRequests()
    for number in range(3):
        request = ClientRequest("1", ApiKeys.PRODUCE, {}, created_ms=number, expect_response=number < 2)
        request.header = RequestHeader(ApiKeys.PRODUCE, 2, number, "t")
        request.send = NetworkSend("1", b"x")
        in_flight.add(request)
    source = in_flight_figure(in_flight, [in_flight.last_sent("1").send]).source
    head = source.index("correlation id 2")
    assert source.index("head: last sent") > head and source.index("correlation id 1") > head
    assert "send0 -> node1:r0:n" in source


def test_message_fields_cover_every_byte():
    for message in (encode_message(0, b"k", b"v"), encode_message(1, b"key", None, timestamp=7)):
        fields = _fields(message)
        assert fields[0][1] == 0 and fields[-1][2] == len(message)
        assert all(a[2] == b[1] for a, b in zip(fields, fields[1:], strict=False))
    assert [name for name, _, _ in _fields(encode_message(1, b"key", None, timestamp=7))] == [
        "crc", "magic", "attributes", "timestamp", "key length", "key", "value length"]


def test_batch_buffers_sees_records_outgrow_the_pooled_buffer():
    pool = BufferPool(memory=8192, poolable_size=1024)
    estimator = CompressionRateEstimator()
    for _ in range(30):
        estimator.observe(CompressionType.GZIP, compressed=100, uncompressed=1000)
    builder = MemoryRecordsBuilder(compression=CompressionType.GZIP, write_limit=1024, estimator=estimator)
    batch = ProducerBatch(TopicPartition("t", 0), builder, 0, pool.allocate(1024, 0))
    value = bytes(range(256)) * 4
    while batch.try_append(0, None, value[:60], (), None, now=0) is not None:
        value = value[7:] + value[:7]
    batch.close()
    after = batch_buffers(batch)
    assert after["closed"] and after["size"] > 1024 and not after["in_pooled_buffer"]
    assert "in use by batches 1024 B" in pool_figure(pool).source


class _Waits(DelayedOperation):
    def __init__(self, name, done):
        super().__init__(1000)
        self.name, self.done = name, done

    def try_complete(self):
        return self.force_complete() if self.done[self.name] else False

    def on_complete(self):
        self.done[self.name + " answered"] = True

    def on_expiration(self):
        self.done[self.name + " expired"] = True


def test_purgatory_figure_shows_completed_operations_still_listed():
    purgatory = DelayedOperationPurgatory("P", reaper_enabled=False, time=MockTime(start_ms=0))
    done = {"a": False, "b": False}
    purgatory.try_complete_else_watch(_Waits("a", done), ["k1", "k2"])
    purgatory.try_complete_else_watch(_Waits("b", done), ["k1"])
    done["a"] = True
    purgatory.check_and_complete("k2")
    source = purgatory_figure(purgatory, name_of=lambda op: op.name).source
    purgatory.shutdown()
    assert "a\\ncompleted, still listed" in source and "b\\npending" in source
    assert "1 operations delayed" in source and done["a answered"]


def test_log_figures_follow_the_live_log(tmp_path):
    config = LogConfig(segment_bytes=3 * 1000, message_format_version="0.10.0")
    log = Log(str(tmp_path / "t-0"), config, time=MockTime(start_ms=0))
    builder = MemoryRecordsBuilder(1, CompressionType.NONE, 0)
    builder.append(0, None, b"x" * 900)
    for _ in range(7):
        log.append(bytes(builder.build()))
    snapshot = recovery_snapshot(log, "after")
    log.close()
    assert snapshot["log_end_offset"] == 7 and snapshot["segments"][0] == 0 and len(snapshot["segments"]) > 1
    assert 0 < snapshot["recovery_point"] <= 7
    chosen = max(b for b in snapshot["segments"] if b <= 5)
    assert f"floor entry of offset 5 is segment {chosen}" in segment_lookup_figure(log, 5).source


def test_append_race_snapshot_reads_a_thread_inside_append():
    broker = Node(0, "b", 9092)
    cluster = Cluster([broker], [PartitionInfo("t", 0, broker, (broker,), (broker,))])
    accumulator = RecordAccumulator(batch_size=1024, total_size=1024, linger_ms=0, time=MockTime())
    tp = TopicPartition("t", 0)
    accumulator.append(tp, 0, None, b"x" * 900)          # the pool's only buffer, with no room for 100 more bytes
    results = {}
    thread = threading.Thread(target=lambda: results.update(W=accumulator.append(
        tp, 0, None, b"y" * 100, max_time_to_block_ms=10_000)), name="W", daemon=True)
    thread.start()
    for _ in range(10_000):
        if accumulator.free.queued():
            break
        threading.Event().wait(0.001)
    waiting = append_race_snapshot(accumulator, tp, [thread], results)
    assert waiting["threads"]["W"]["calls"][:1] == ["allocate"] and waiting["threads"]["W"]["buffer"] is None
    assert waiting["pool"]["queued"] == 1 and len(waiting["batches"]) == 1
    [sent] = accumulator.drain(cluster, [broker], 1_048_576, 0)[0]
    accumulator.deallocate(sent)                          # its buffer goes to the waiting thread
    thread.join(10)
    done = append_race_snapshot(accumulator, tp, [thread], results)
    assert done["threads"]["W"]["result"].new_batch_created and done["threads"]["W"]["batch"] == 0
    source = append_race_figure({"waiting": waiting, "done": done}).source
    assert "waits for memory" in source and "record 0" in source


def test_consumer_parts_follow_the_live_references():
    consumer = KafkaConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "client.id": "parts"})
    try:
        parts, edges = consumer_wiring(consumer)
        wiring = {(type(parts[i]).__name__, type(parts[j]).__name__, name) for i, j, name in edges}
        assert {("Fetcher", "LoginCheckingClient", "client"), ("ConsumerCoordinator", "LoginCheckingClient", "client"),
                ("LoginCheckingClient", "NetworkClient", "client")} <= wiring
        assert sum(part is consumer.client for part in parts) == 1       # one shared client, drawn once
        source = consumer_parts_figure(consumer).source
        assert "AutoCommitTask" in source and "HeartbeatThread" not in source   # not joined: no heartbeat thread
    finally:
        consumer.close(timeout_ms=0)
