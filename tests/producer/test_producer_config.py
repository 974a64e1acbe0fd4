"""Producer configuration (0.10 keys and defaults), plug-in resolution, interceptors and serializers."""
from __future__ import annotations

import logging

import pytest
from scripted_broker import scripted_cluster

from kafka_edu.clients.producer.interceptors import (InterceptorCallback, ProducerInterceptor, ProducerInterceptors,
                                                     RecordFilteredError)
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.partitioner import DefaultPartitioner
from kafka_edu.clients.producer.producer_config import PRODUCER_CONFIG, ProducerConfig
from kafka_edu.clients.producer.producer_record import ProducerRecord
from kafka_edu.clients.producer.record_batch import RecordMetadata
from kafka_edu.clients.producer.serializers import (ByteArraySerializer, DoubleSerializer, IntegerDeserializer,
                                                    IntegerSerializer, LongSerializer, SerializationError,
                                                    Serializer, StringDeserializer, StringSerializer)
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.config import ConfigException

BASE = {"bootstrap.servers": "127.0.0.1:9", "key.serializer": ByteArraySerializer,
        "value.serializer": ByteArraySerializer}

DEFAULTS_0_10 = {
    "acks": "1", "buffer.memory": 33554432, "compression.type": "none", "retries": 0, "batch.size": 16384,
    "client.id": "", "connections.max.idle.ms": 540000, "linger.ms": 0, "max.block.ms": 60000,
    "max.request.size": 1048576, "receive.buffer.bytes": 32768, "request.timeout.ms": 30000,
    "send.buffer.bytes": 131072, "max.in.flight.requests.per.connection": 5, "metadata.max.age.ms": 300000,
    "reconnect.backoff.ms": 50, "retry.backoff.ms": 100, "interceptor.classes": [],
    "partitioner.class": "kafka_edu.clients.producer.partitioner.DefaultPartitioner",
}


def test_defaults_are_kafka_0_10s():
    values = ProducerConfig(BASE).values
    assert {k: values[k] for k in DEFAULTS_0_10} == DEFAULTS_0_10
    assert [k for k, key in PRODUCER_CONFIG.keys.items() if key.required] == [
        "bootstrap.servers", "key.serializer", "value.serializer"]


@pytest.mark.parametrize("key, value", [("acks", "2"), ("compression.type", "brotli"), ("retries", "-1"),
                                        ("max.in.flight.requests.per.connection", "0"), ("linger.ms", "soon")])
def test_bad_values_name_their_key(key, value):
    with pytest.raises(ConfigException, match=key.replace(".", r"\.")):
        ProducerConfig({**BASE, key: value})


def test_unknown_keys_only_warn(caplog):
    ProducerConfig({**BASE, "block.on.buffer.full": "true"})
    assert "block.on.buffer.full" in caplog.text


def test_plugins_by_path_class_or_instance():
    instance = StringSerializer("latin-1")
    config = ProducerConfig({**BASE, "key.serializer": "kafka_edu.clients.producer.serializers.IntegerSerializer",
                             "value.serializer": instance, "partitioner.class": DefaultPartitioner,
                             "value.serializer.encoding": "utf-16"})
    assert isinstance(config.configured_instance("key.serializer", Serializer, True),
                      IntegerSerializer)
    value = config.configured_instance("value.serializer", Serializer, False)
    assert value is instance and value.encoding == "latin-1"            # instances are not configured
    assert isinstance(config.configured_instance("partitioner.class", object), DefaultPartitioner)


def test_configured_classes_get_the_originals():
    config = ProducerConfig({**BASE, "value.serializer": StringSerializer, "serializer.encoding": "utf-16"})
    serializer = config.configured_instance("value.serializer", Serializer, False)
    assert serializer.encoding == "utf-16"


def test_bad_plugins_fail_with_the_key_named():
    class NotASerializer:
        def configure(self, configs, is_key):
            return None

    for spec in ("no.such.module.Thing", "kafka_edu.clients.producer.serializers.Nope", NotASerializer):
        with pytest.raises(ConfigException, match="key.serializer"):
            KafkaProducer({**BASE, "key.serializer": spec})


def test_duck_typed_plugins_are_accepted():
    class Upper:
        def configure(self, configs, is_key):
            self.configured = True

        def serialize(self, topic, data):
            return data.upper()

        def close(self):
            self.closed = True

    with KafkaProducer({**BASE, "value.serializer": Upper}) as producer:
        assert producer.value_serializer.configured
    assert producer.value_serializer.closed


def test_keyword_overrides_use_underscores_and_client_ids_are_generated():
    first = KafkaProducer(BASE, linger_ms=7)
    second = KafkaProducer(BASE, client_id="mine")
    try:
        assert first.config["linger.ms"] == 7 and first.accumulator.linger_ms == 7
        assert first.client_id.startswith("producer-") and second.client_id == "mine"
        assert second.io_thread.name == "kafka-producer-network-thread | mine" and second.io_thread.daemon
    finally:
        first.close(0)
        second.close(0)


def test_bad_bootstrap_servers_fail_before_any_thread_starts():
    with pytest.raises(ValueError, match="bootstrap"):
        KafkaProducer({**BASE, "bootstrap.servers": "nohostport"})


def test_serializers_round_trip_and_refuse_bad_data():
    assert IntegerDeserializer().deserialize("t", IntegerSerializer().serialize("t", -5)) == -5
    assert LongSerializer().serialize("t", 1) == b"\x00" * 7 + b"\x01"
    assert DoubleSerializer().deserialize("t", DoubleSerializer().serialize("t", 2.5)) == 2.5
    assert StringDeserializer().deserialize("t", StringSerializer().serialize("t", "ключ")) == "ключ"
    assert ByteArraySerializer().serialize("t", bytearray(b"ab")) == b"ab"
    for serializer, data in [(IntegerSerializer(), "1"), (StringSerializer(), b"x"), (ByteArraySerializer(), "x"),
                             (IntegerSerializer(), 2**31)]:
        with pytest.raises(SerializationError):
            serializer.serialize("t", data)
    with pytest.raises(SerializationError):
        IntegerDeserializer().deserialize("t", b"\x00")
    assert all(s.serialize("t", None) is None for s in (IntegerSerializer(), StringSerializer()))


def test_send_raises_for_data_the_serializer_refuses():
    broker, = scripted_cluster(1, {"t": 1})
    host, port = broker.address
    with KafkaProducer({**BASE, "bootstrap.servers": f"{host}:{port}"}) as producer:
        with pytest.raises(SerializationError):
            producer.send("t", "not bytes", partition=0)
        with pytest.raises(TypeError):
            producer.send("t", b"x", headers=[("k", "not bytes")])
    broker.close()


class Tag(ProducerInterceptor):
    def on_send(self, record):
        return record._replace(headers=record.headers + (("tag", b"1"),))


class DropOdd(ProducerInterceptor):
    def __init__(self):
        self.acks = []

    def on_send(self, record):
        return None if record.key % 2 else record

    def on_acknowledgement(self, metadata, exception):
        self.acks.append((metadata.topic_partition, type(exception).__name__))


class Explodes(ProducerInterceptor):
    def on_send(self, record):
        raise RuntimeError("boom")

    def on_acknowledgement(self, metadata, exception):
        raise RuntimeError("boom")


def test_interceptor_chain_passes_each_result_on_and_swallows_errors(caplog):
    chain = ProducerInterceptors([Explodes(), Tag(), Tag()])
    with caplog.at_level(logging.WARNING):
        record = chain.on_send(ProducerRecord("t", key=1, value=b"v"))
    assert record.headers == (("tag", b"1"), ("tag", b"1")) and "Explodes" in caplog.text
    chain.on_acknowledgement(RecordMetadata(TopicPartition("t", 0), 1, 1, 1, 1), None)


def test_a_filtered_record_fails_its_future_and_tells_everyone():
    dropper = DropOdd()
    seen = []
    with KafkaProducer({**BASE, "key.serializer": IntegerSerializer, "interceptor.classes": [dropper]}) as producer:
        future = producer.send("t", b"v", key=1, callback=lambda m, e: seen.append(e))
    assert isinstance(future.exception(0), RecordFilteredError) and isinstance(seen[0], RecordFilteredError)
    assert dropper.acks == [(TopicPartition("t", -1), "RecordFilteredError")]


def test_interceptor_callback_runs_interceptors_then_the_application():
    order = []

    class Watch(ProducerInterceptor):
        def on_acknowledgement(self, metadata, exception):
            order.append(("interceptor", metadata.offset, exception))

    tp = TopicPartition("t", 2)
    callback = InterceptorCallback(lambda m, e: order.append(("app", m, e)), ProducerInterceptors([Watch()]), tp)
    error = RuntimeError("x")
    callback(None, error)
    assert order == [("interceptor", -1, error), ("app", None, error)]
