"""Beyond 0.10: the idempotent producer (enable.idempotence). Configuration rules, producer ids and
sequence numbers on the wire (scripted broker), exactly one copy after a lost answer (kafka-edu broker
behind a lossy proxy), and a broker we did not write (librdkafka's mock cluster)."""
from __future__ import annotations

import itertools
import logging
import socket
import threading
import time
import uuid

import pytest
from scripted_broker import scripted_cluster

from kafka_edu.clients.admin import ClusterAdmin
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.config import ConfigException
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import decode_request, decode_response, encode_response
from kafka_edu.common.record.memory_records import MemoryRecords
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

SERDE = {"key.serializer": ByteArraySerializer, "value.serializer": ByteArraySerializer}


def idempotent_producer(bootstrap: str, **configs) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, **SERDE, "enable.idempotence": True, **configs})


# --- configuration -------------------------------------------------------------------------------
def test_idempotence_is_off_by_default_and_sets_its_own_defaults():
    plain = KafkaProducer({"bootstrap.servers": "127.0.0.1:9", **SERDE})
    idempotent = idempotent_producer("127.0.0.1:9")
    try:
        assert plain.sender.idempotence is None
        sender = idempotent.sender
        assert sender.idempotence is not None and sender.acks == -1 and sender.retries == 2**31 - 1
        assert sender.guarantee_message_order and sender.client.in_flight_requests.max_in_flight_requests_per_connection == 1
    finally:
        plain.close(0)
        idempotent.close(0)


@pytest.mark.parametrize("key, value", [("acks", "1"), ("acks", "0"), ("retries", 0),
                                        ("max.in.flight.requests.per.connection", 5)])
def test_settings_that_contradict_idempotence_are_refused(key, value):
    with pytest.raises(ConfigException, match=key.replace(".", r"\.")):
        idempotent_producer("127.0.0.1:9", **{key: value})


def test_compatible_explicit_settings_are_kept():
    producer = idempotent_producer("127.0.0.1:9", acks="all", retries=7,
                                   **{"max.in.flight.requests.per.connection": 1})
    try:
        assert (producer.sender.acks, producer.sender.retries) == (-1, 7)
    finally:
        producer.close(0)


# --- on the wire (scripted broker) ---------------------------------------------------------------
class IdempotentScript:
    """InitProducerId hands out ids 1000, 1001, ...; Produce answers are scripted per request."""

    def __init__(self, errors=()):
        self.ids = itertools.count(1000)
        self.errors = list(errors)
        self.produced: list[tuple[int, int, int, int]] = []     # (producer id, epoch, base sequence, count)
        self.lock = threading.Lock()

    def init_producer_id(self, header, body):
        assert body["transactional_id"] is None
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": next(self.ids), "producer_epoch": 0}

    def produce(self, header, body):
        assert body["acks"] == -1
        with self.lock:
            error = self.errors.pop(0) if self.errors else Errors.NONE
            responses = []
            for topic in body["topic_data"]:
                parts = []
                for part in topic["partition_data"]:
                    [batch] = MemoryRecords(bytes(part["records"])).batches()
                    batch.ensure_valid()
                    self.produced.append((batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count))
                    parts.append({"index": part["index"], "error_code": error.code, "base_offset": 0})
                responses.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": responses}


@pytest.fixture
def scripted():
    made = []

    def make(script: IdempotentScript):
        broker, = scripted_cluster(1, {"t": 1}, {ApiKeys.INIT_PRODUCER_ID: script.init_producer_id,
                                                 ApiKeys.PRODUCE: script.produce})
        made.append(broker)
        host, port = broker.address
        return broker, f"{host}:{port}"
    yield make
    for broker in made:
        broker.close()


def send_batches(producer: KafkaProducer, sizes: list[int]) -> list:
    futures = []
    for size in sizes:                          # one flush per batch: each is its own request
        futures += [producer.send("t", b"r", partition=0) for _ in range(size)]
        producer.flush()
    return futures


def test_the_producer_id_comes_first_and_sequences_count_records(scripted):
    script = IdempotentScript()
    broker, bootstrap = scripted(script)
    with idempotent_producer(bootstrap, **{"linger.ms": 60_000}) as producer:
        futures = send_batches(producer, [3, 1, 4])
    assert all(f.exception(0) is None for f in futures)
    apis = [api for api, _ in broker.apis_seen()]
    assert apis.index("INIT_PRODUCER_ID") < apis.index("PRODUCE")
    assert script.produced == [(1000, 0, 0, 3), (1000, 0, 3, 1), (1000, 0, 4, 4)]


def test_a_retry_is_sent_with_the_same_sequence(scripted):
    script = IdempotentScript([Errors.NOT_LEADER_OR_FOLLOWER])
    _, bootstrap = scripted(script)
    with idempotent_producer(bootstrap, **{"linger.ms": 60_000, "retry.backoff.ms": 10}) as producer:
        futures = send_batches(producer, [2, 2])
    assert all(f.exception(0) is None for f in futures)
    assert script.produced == [(1000, 0, 0, 2), (1000, 0, 0, 2), (1000, 0, 2, 2)]


def test_a_duplicate_answer_counts_as_success(scripted):
    script = IdempotentScript([Errors.DUPLICATE_SEQUENCE_NUMBER])
    _, bootstrap = scripted(script)
    with idempotent_producer(bootstrap) as producer:
        assert producer.send("t", b"x", partition=0).exception(10) is None


def test_a_sequence_failure_brings_a_new_producer_id(scripted, caplog):
    script = IdempotentScript([Errors.OUT_OF_ORDER_SEQUENCE_NUMBER])
    broker, bootstrap = scripted(script)
    with idempotent_producer(bootstrap, **{"linger.ms": 60_000}) as producer:
        first, second = send_batches(producer, [1, 1])
    assert first.exception(0).error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and second.exception(0) is None
    assert script.produced == [(1000, 0, 0, 1), (1001, 0, 0, 1)]
    assert [api for api, _ in broker.apis_seen()].count("INIT_PRODUCER_ID") == 2


# --- exactly one copy after a lost answer (kafka-edu broker) --------------------------------------
def _read_frame(sock):
    size = sock.recv(4, socket.MSG_WAITALL)
    return None if len(size) < 4 else sock.recv(int.from_bytes(size, "big"), socket.MSG_WAITALL)


class LossyProxy:
    """Forwards to one broker (advertising itself in Metadata); drops the first Produce answer."""

    def __init__(self, broker_port: int):
        self.broker_port = broker_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        with client, socket.create_connection(("127.0.0.1", self.broker_port)) as broker:
            while (request := _read_frame(client)) is not None:
                header, _ = decode_request(request)
                broker.sendall(len(request).to_bytes(4, "big") + request)
                response = _read_frame(broker)
                if header.api_key == ApiKeys.PRODUCE and not self.dropped:
                    self.dropped += 1
                    return
                if header.api_key == ApiKeys.METADATA:
                    body = decode_response(response, header.api_key, header.api_version)[1].to_dict()
                    for b in body["brokers"]:
                        b["port"] = self.port
                    response = encode_response(header.correlation_id, header.api_key, header.api_version, body)[4:]
                client.sendall(len(response).to_bytes(4, "big") + response)

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    server = KafkaServer(KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "num.partitions": 1,
                                      "log.cleaner.enable": "false",
                                      "log.dirs": str(tmp_path_factory.mktemp("idempotence"))}),
                         embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield server
    server.shutdown()


def values_in(server: KafkaServer, topic: str) -> list[bytes]:
    with ClusterAdmin(f"127.0.0.1:{server.bound_port()}") as admin:
        leader = admin.describe_topics([topic])[topic][0].leader
        body = admin.call(leader, ApiKeys.FETCH, {"max_wait_ms": 0, "min_bytes": 0, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    return [r.value for r in MemoryRecords(bytes(body["responses"][0]["partitions"][0]["records"])).records()]


@pytest.mark.parametrize("idempotent, copies", [(False, 2), (True, 1)])
def test_a_lost_answer_duplicates_only_without_idempotence(broker, idempotent, copies):
    proxy = LossyProxy(broker.bound_port())
    topic = f"lossy-{uuid.uuid4().hex[:8]}"
    try:
        with KafkaProducer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", **SERDE, "acks": "all", "retries": 3,
                            "linger.ms": 60_000, "enable.idempotence": idempotent}) as producer:
            futures = [producer.send(topic, b"v%d" % i, partition=0) for i in range(3)]
            producer.flush()
            offsets = [f.get(0).offset for f in futures]
    finally:
        proxy.close()
    assert proxy.dropped == 1
    assert values_in(broker, topic) == [b"v0", b"v1", b"v2"] * copies
    assert offsets == [3 * (copies - 1) + i for i in range(3)]


# --- a broker we did not write -------------------------------------------------------------------
@pytest.mark.mock_cluster
def test_idempotent_producer_against_the_mock_cluster(mock_cluster):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    topic = f"h11-idem-{uuid.uuid4().hex[:8]}"
    with idempotent_producer(mock_cluster.bootstrap, **{"linger.ms": 5}) as producer:
        futures = [producer.send(topic, b"m%d" % i, partition=i % 2) for i in range(200)]
        producer.flush()
        assert all(f.exception(0) is None for f in futures)
        assert producer.sender.idempotence.has_producer_id
    consumer = Consumer({"bootstrap.servers": mock_cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        got, deadline = [], time.monotonic() + 30
        while len(got) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"m%d" % i for i in range(200))
