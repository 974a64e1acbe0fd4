"""The Sender's protocol behaviour against scripted brokers (tests/scripted_broker.py): acknowledgements,
acks=0, retries and backoff, metadata waits, in-flight limits and muting, request timeouts and
disconnections, and down-conversion for old Produce versions (the seed's acceptance tests 6-11)."""
from __future__ import annotations

import threading
import time

import pytest
from scripted_broker import api_versions_answer, scripted_cluster

from kafka_edu.clients.producer.interceptors import ProducerInterceptor
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.record.memory_records import MemoryRecords


class ProduceScript:
    """Answers Produce like a log (offsets per partition), after optional errors or holds."""

    def __init__(self, errors: list[Errors] | None = None, answer: bool = True):
        self.errors = list(errors or [])
        self.answer = answer
        self.release = threading.Event()
        self.release.set()
        self.bodies: list = []
        self.times: list[float] = []
        self.next_offset: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()

    def __call__(self, header, body):
        with self.lock:
            self.bodies.append(body)
            self.times.append(time.monotonic())
            error = self.errors.pop(0) if self.errors else Errors.NONE
        self.release.wait(10)
        if not self.answer or body["acks"] == 0:
            return None
        responses = []
        for topic in body["topic_data"]:
            parts = []
            for part in topic["partition_data"]:
                key = (topic["name"], part["index"])
                count = sum(b.count for b in MemoryRecords(bytes(part["records"])).batches())
                base = -1
                if error is Errors.NONE:
                    base = self.next_offset.get(key, 0)
                    self.next_offset[key] = base + count
                parts.append({"index": part["index"], "error_code": error.code, "base_offset": base})
            responses.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": responses}

    def records(self, index: int = 0) -> list:
        return [r for t in self.bodies[index]["topic_data"] for p in t["partition_data"]
                for r in MemoryRecords(bytes(p["records"])).records()]


@pytest.fixture
def cluster_with(request):
    """cluster_with(script, topics) -> one scripted broker (node 1); closed after the test."""
    made = []

    def make(script: ProduceScript, topics=None, extra=None):
        broker, = scripted_cluster(1, topics or {"t": 2}, {ApiKeys.PRODUCE: script, **(extra or {})})
        made.append(broker)
        return broker
    yield make
    for broker in made:
        broker.close()


def producer_for(broker, **configs) -> KafkaProducer:
    host, port = broker.address
    return KafkaProducer({"bootstrap.servers": f"{host}:{port}", "key.serializer": ByteArraySerializer,
                          "value.serializer": ByteArraySerializer, **configs})


def count(broker, api: ApiKeys) -> int:
    return sum(1 for name, _ in broker.apis_seen() if name == api.name)


class Recorder(ProducerInterceptor):
    events: list = []

    def on_acknowledgement(self, metadata, exception):
        Recorder.events.append(("interceptor", metadata.offset))


def test_one_batch_acknowledged_at_42_completes_in_order_interceptor_first(cluster_with):
    script = ProduceScript()
    script.next_offset[("t", 0)] = 42
    broker = cluster_with(script)
    Recorder.events = []
    with producer_for(broker, **{"linger.ms": 60_000, "interceptor.classes": [Recorder]}) as producer:
        futures = [producer.send("t", b"v%d" % i, partition=0,
                                 callback=lambda m, e: Recorder.events.append(("callback", m.offset)))
                   for i in range(3)]
        producer.flush()
    assert len(script.bodies) == 1 and [r.value for r in script.records()] == [b"v0", b"v1", b"v2"]
    assert [f.get(0).offset for f in futures] == [42, 43, 44]
    assert Recorder.events == [("interceptor", 42), ("callback", 42), ("interceptor", 43), ("callback", 43),
                               ("interceptor", 44), ("callback", 44)]


def test_an_error_reaches_every_callback(cluster_with):
    broker = cluster_with(ProduceScript([Errors.CORRUPT_MESSAGE]))
    seen = []
    with producer_for(broker, **{"linger.ms": 60_000}) as producer:
        for _ in range(3):
            producer.send("t", b"x", partition=1, callback=lambda m, e: seen.append((m, e.error)))
        producer.flush()
    assert seen == [(None, Errors.CORRUPT_MESSAGE)] * 3


def test_a_partition_the_answer_leaves_out_fails_and_a_stray_one_is_ignored(cluster_with, caplog):
    """The answer is read for the batches sent: partition 1, left out, fails at once (nobody can tell
    whether it was written) instead of waiting for ever; the stray partition is only logged."""
    script = ProduceScript()

    def partial(header, body):
        answer = script(header, body)
        topic = answer["responses"][0]
        topic["partition_responses"] = [p for p in topic["partition_responses"] if p["index"] == 0]
        answer["responses"].append({"name": "ghost", "partition_responses": [dict(
            topic["partition_responses"][0], index=7)]})
        return answer
    broker = cluster_with(partial)
    with producer_for(broker, **{"linger.ms": 60_000}) as producer:
        kept, lost = producer.send("t", b"a", partition=0), producer.send("t", b"b", partition=1)
        producer.flush()
        assert kept.get(10).offset == 0
        with pytest.raises(KafkaError) as failed:
            lost.get(10)
        assert failed.value.error is Errors.UNKNOWN_SERVER_ERROR
    assert "answers for partitions it was not sent: [TopicPartition(topic='ghost', partition=7)]" in caplog.text
    assert "uncaught" not in caplog.text


def test_acks_zero_expects_no_response_and_offsets_are_unknown(cluster_with):
    script = ProduceScript()
    broker = cluster_with(script)
    with producer_for(broker, acks="0") as producer:
        futures = [producer.send("t", b"fire", partition=0) for _ in range(5)]
        producer.flush()
        assert producer.sender.client.in_flight_request_count() == 0
    deadline = time.monotonic() + 10          # flush returns once sent; the broker reads in its own time
    while not script.bodies and time.monotonic() < deadline:
        time.sleep(0.01)
    assert script.bodies and {body["acks"] for body in script.bodies} == {0}
    assert [f.get(0).offset for f in futures] == [-1] * 5


@pytest.mark.parametrize("acks, wire", [("1", 1), ("all", -1), ("-1", -1)])
def test_acks_setting_goes_on_the_wire(cluster_with, acks, wire):
    script = ProduceScript()
    broker = cluster_with(script)
    with producer_for(broker, acks=acks) as producer:
        producer.send("t", b"x").get(10)
    assert script.bodies[0]["acks"] == wire and script.bodies[0]["timeout_ms"] == 30_000


def test_a_retriable_error_is_retried_after_the_backoff_with_fresh_metadata(cluster_with):
    script = ProduceScript([Errors.NOT_LEADER_OR_FOLLOWER])
    broker = cluster_with(script)
    outcomes = []
    with producer_for(broker, retries=3, **{"retry.backoff.ms": 300}) as producer:
        producer.partitions_for("t")
        metadata_before = count(broker, ApiKeys.METADATA)
        future = producer.send("t", b"important", partition=0, callback=lambda m, e: outcomes.append((m.offset, e)))
        assert future.get(10).offset == 0
    assert outcomes == [(0, None)]
    assert len(script.bodies) == 2 and script.times[1] - script.times[0] >= 0.29
    assert count(broker, ApiKeys.METADATA) == metadata_before + 1


def test_without_retries_the_first_error_is_final(cluster_with):
    script = ProduceScript([Errors.NOT_LEADER_OR_FOLLOWER])
    broker = cluster_with(script)
    with producer_for(broker) as producer:                      # retries=0, 0.10's default
        error = producer.send("t", b"x", partition=0).exception(10)
    assert isinstance(error, KafkaError) and error.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert len(script.bodies) == 1


def test_retries_run_out(cluster_with, caplog):
    script = ProduceScript([Errors.NOT_ENOUGH_REPLICAS] * 10)
    broker = cluster_with(script)
    with producer_for(broker, retries=2, **{"retry.backoff.ms": 10}) as producer:
        error = producer.send("t", b"x", partition=0).exception(10)
    assert error.error is Errors.NOT_ENOUGH_REPLICAS and len(script.bodies) == 3
    assert caplog.text.count("retrying") == 2


def test_authorization_failures_are_never_retried(cluster_with):
    script = ProduceScript([Errors.TOPIC_AUTHORIZATION_FAILED] * 5)
    broker = cluster_with(script)
    with producer_for(broker, retries=5) as producer:
        error = producer.send("t", b"x", partition=0).exception(10)
    assert error.error is Errors.TOPIC_AUTHORIZATION_FAILED and "t" in str(error)
    assert len(script.bodies) == 1


def test_in_flight_limit_one_mutes_the_partition_until_the_answer(cluster_with):
    script = ProduceScript()
    broker = cluster_with(script)
    with producer_for(broker, **{"max.in.flight.requests.per.connection": 1, "batch.size": 100}) as producer:
        producer.partitions_for("t")
        script.release.clear()
        first = producer.send("t", b"a" * 80, partition=0)
        deadline = time.monotonic() + 5
        while not script.bodies:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        second = producer.send("t", b"b" * 80, partition=0)
        time.sleep(0.2)
        assert len(script.bodies) == 1 and not second.done()
        assert TopicPartition("t", 0) in producer.accumulator.muted
        script.release.set()
        assert second.get(10).offset == first.get(10).offset + 1
        assert not producer.accumulator.muted
    assert len(script.bodies) == 2


def test_up_to_five_requests_in_flight_per_connection(cluster_with):
    script = ProduceScript()
    broker = cluster_with(script)
    with producer_for(broker, **{"batch.size": 100}) as producer:
        producer.partitions_for("t")
        script.release.clear()
        futures = [producer.send("t", b"x" * 80, partition=0) for _ in range(12)]
        client = producer.sender.client
        deadline = time.monotonic() + 5
        while client.in_flight_request_count("1") < 5:
            assert time.monotonic() < deadline, "the producer did not pipeline requests"
            time.sleep(0.005)
        time.sleep(0.1)
        assert client.in_flight_request_count("1") == 5
        script.release.set()
        offsets = [f.get(10).offset for f in futures]
    assert offsets == list(range(12))


def test_unknown_topic_times_out_after_max_block_ms(cluster_with):
    broker = cluster_with(ProduceScript(), topics={"t": 1})
    outcomes = []
    with producer_for(broker, **{"max.block.ms": 400, "retry.backoff.ms": 100}) as producer:
        started = time.monotonic()
        future = producer.send("missing", b"x", callback=lambda m, e: outcomes.append(e))
        elapsed = time.monotonic() - started
        assert isinstance(future.exception(0), TimeoutError) and isinstance(outcomes[0], TimeoutError)
        assert 0.35 <= elapsed
        with pytest.raises(TimeoutError):
            producer.partitions_for("missing")
    metadata_requests = count(broker, ApiKeys.METADATA)
    assert 2 <= metadata_requests <= 12          # refreshes are spaced by retry.backoff.ms, not a busy loop


def test_explicit_partition_beyond_the_topic_waits_then_times_out(cluster_with):
    broker = cluster_with(ProduceScript(), topics={"t": 2})
    with producer_for(broker, **{"max.block.ms": 300}) as producer:
        assert isinstance(producer.send("t", b"x", partition=5).exception(5), TimeoutError)
        with pytest.raises(ValueError):
            producer.send("t", b"x", partition=-1)


def test_a_broker_that_never_answers_times_out_and_the_batch_is_retried(cluster_with):
    script = ProduceScript()
    script.answer = False
    broker = cluster_with(script)
    with producer_for(broker, retries=1, **{"request.timeout.ms": 300, "retry.backoff.ms": 10}) as producer:
        producer.partitions_for("t")
        future = producer.send("t", b"x", partition=0)
        deadline = time.monotonic() + 5
        while len(script.bodies) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        script.answer = True                              # the retry, on a new connection, is answered
        assert future.get(10).offset == 0
    assert len(script.bodies) == 2 and broker.accepted >= 3    # bootstrap, node 1, node 1 again


def test_disconnection_fails_in_flight_batches_with_network_exception(cluster_with):
    script = ProduceScript()
    broker = cluster_with(script)
    with producer_for(broker) as producer:
        producer.partitions_for("t")
        script.release.clear()
        future = producer.send("t", b"x", partition=0)
        deadline = time.monotonic() + 5
        while not script.bodies:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        broker.drop_connections()
        error = future.exception(10)
        script.release.set()
    assert error.error is Errors.NETWORK_EXCEPTION


def old_broker_versions(header, body):
    answer = api_versions_answer(header, body)
    for entry in answer["api_keys"]:
        if entry["api_key"] == ApiKeys.PRODUCE:
            entry["max_version"] = 2
    return answer


def test_an_old_broker_gets_message_format_v1(cluster_with):
    script = ProduceScript()
    broker = cluster_with(script, extra={ApiKeys.API_VERSIONS: old_broker_versions})
    with producer_for(broker) as producer:
        ok = producer.send("t", b"value", key=b"key", partition=0, timestamp=1_700_000_000_000)
        assert ok.get(10).offset == 0
        with_headers = producer.send("t", b"v", partition=0, headers=[("h", b"1")])
        error = with_headers.exception(10)
    assert ("PRODUCE", 2) in broker.apis_seen()
    [batch] = MemoryRecords(bytes(script.bodies[0]["topic_data"][0]["partition_data"][0]["records"])).batches()
    assert batch.magic == 1
    [record] = list(batch.records())
    assert (record.key, record.value, record.timestamp) == (b"key", b"value", 1_700_000_000_000)
    assert error.error is Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_a_batch_too_new_for_the_broker_unmutes_its_partition(cluster_with):
    """With an in-flight limit of 1 the failed batch was muted when drained; no answer will unmute it."""
    script = ProduceScript()
    broker = cluster_with(script, extra={ApiKeys.API_VERSIONS: old_broker_versions})
    producer = producer_for(broker, **{"max.in.flight.requests.per.connection": 1})
    try:
        with_headers = producer.send("t", b"v", partition=0, headers=[("h", b"1")])
        assert with_headers.exception(10).error is Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
        assert producer.send("t", b"plain", partition=0).get(5).offset == 0
        assert not producer.accumulator.muted
    finally:
        producer.close(0)                     # a partition left muted would keep close() waiting forever


def test_close_from_a_callback_does_not_deadlock(cluster_with):
    broker = cluster_with(ProduceScript())
    producer = producer_for(broker)
    closed = threading.Event()

    def close_now(metadata, exception):
        producer.close(timeout=5)                 # on the network thread: becomes close(0)
        closed.set()

    producer.send("t", b"x", partition=0, callback=close_now)
    assert closed.wait(10)
    producer.io_thread.join(5)
    assert not producer.io_thread.is_alive()
