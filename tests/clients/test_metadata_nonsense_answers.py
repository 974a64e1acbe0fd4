"""The producer and the consumer against a broker whose Metadata answers are random bodies of the
response schema (brokers at any address, leaders that are not listed, partitions of other topics,
any error code), every other one claiming success: a send ends in metadata or a clear error within
max.block.ms, polls return or raise a KafkaError, nothing fails inside either client, and both close.
The answers are drawn the same way on every run."""
from __future__ import annotations

import itertools
import logging
import threading
import time

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from logged_errors import LoggedErrors
from protocol_strategies import strategy, without_errors
from scripted_broker import ScriptedBroker

from kafka_edu.clients.consumer.consumer_network_client import WakeupException
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import KafkaError

METADATA = ApiKeys.METADATA
ANSWERS = 6


def nonsense_broker(data) -> ScriptedBroker:
    """A broker answering Metadata (at our latest version, which both clients use) with ANSWERS random
    bodies in turn."""
    version = METADATA.max_version
    answers = [without_errors(body) if i % 2 == 0 else body for i, body in enumerate(data.draw(
        st.lists(strategy(METADATA.response_schema(version)), min_size=ANSWERS, max_size=ANSWERS), label="Metadata"))]
    turn = itertools.count()

    def answer(header, body):
        assert header.api_version == version, f"Metadata v{header.api_version}, not v{version}"
        return answers[next(turn) % ANSWERS]
    return ScriptedBroker({METADATA: answer})


def against_nonsense(data, check) -> None:
    """Run `check(bootstrap)` against a nonsense broker: nothing may fail inside the client (no error
    logged), and the client must have asked for metadata."""
    broker = nonsense_broker(data)
    host, port = broker.address
    failures = LoggedErrors()
    logging.getLogger("kafka_edu").addHandler(failures)
    try:
        check(f"{host}:{port}")
        assert failures.messages == []
        assert METADATA.name in {api for api, _ in broker.apis_seen()}
    finally:
        logging.getLogger("kafka_edu").removeHandler(failures)
        broker.close()


@settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
@given(data=st.data())
def test_the_producer_survives_any_metadata_answer(data):
    def check(bootstrap: str) -> None:
        producer = KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": ByteArraySerializer,
                                  "value.serializer": ByteArraySerializer, "max.block.ms": 400,
                                  "request.timeout.ms": 2000, "retry.backoff.ms": 10})
        futures = []
        for i in range(3):
            try:
                futures.append(producer.send("t", b"v%d" % i))
            except (KafkaError, TimeoutError):
                pass
        started = time.monotonic()
        producer.close(2)
        assert time.monotonic() - started < 10
        assert all(f.done() for f in futures), "a send still waits after close"

    against_nonsense(data, check)


@settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
@given(data=st.data())
def test_the_consumer_survives_any_metadata_answer(data):
    def check(bootstrap: str) -> None:
        consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "request.timeout.ms": 2000,
                                  "retry.backoff.ms": 10, "reconnect.backoff.ms": 10})
        consumer.assign([TopicPartition("t", 0)])
        for _ in range(6):
            watchdog = threading.Timer(0.3, consumer.wakeup)     # 0.10's poll may wait for offsets for ever
            watchdog.start()
            try:
                consumer.poll(20)
            except (KafkaError, WakeupException):
                pass
            finally:
                watchdog.cancel()
        consumer.close(2000)

    against_nonsense(data, check)
