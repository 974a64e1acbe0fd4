"""The producer against a broker whose Produce answers are random bodies of the response's schema (any
error code, any offset, partitions left out or never sent): every send still ends, in metadata or a
KafkaError, and nothing fails inside the Sender. The answers are drawn the same way on every run."""
from __future__ import annotations

import itertools
import logging
import time

from hypothesis import given, settings
from logged_errors import LoggedErrors
from hypothesis import strategies as st
from protocol_strategies import strategy
from scripted_broker import scripted_cluster

from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import KafkaError

PRODUCE = ApiKeys.PRODUCE




@settings(max_examples=3, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_every_send_ends_whatever_the_broker_answers(data):
    answers = {v: data.draw(st.lists(strategy(PRODUCE.response_schema(v)), min_size=8, max_size=8), label=f"v{v}")
               for v in range(PRODUCE.min_version, PRODUCE.max_version + 1)}
    turn = itertools.count()
    broker, = scripted_cluster(1, {"t": 2}, {PRODUCE: lambda header, body: answers[header.api_version][
        next(turn) % 8]})
    failures = LoggedErrors()
    logging.getLogger("kafka_edu").addHandler(failures)
    host, port = broker.address
    try:
        producer = KafkaProducer({"bootstrap.servers": f"{host}:{port}", "key.serializer": ByteArraySerializer,
                                  "value.serializer": ByteArraySerializer,
                                  "linger.ms": 5, "request.timeout.ms": 5000})
        futures = [producer.send("t", b"v%d" % i, partition=i % 2) for i in range(40)]
        deadline = time.monotonic() + 30
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(f.done() for f in futures), "sends still waiting for an answer that will not come"
        for future in futures:
            try:
                future.get(0)
            except KafkaError:
                pass
        producer.close(5)
        assert failures.messages == []
    finally:
        logging.getLogger("kafka_edu").removeHandler(failures)
        broker.close()
