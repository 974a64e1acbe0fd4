"""The consumer against a broker whose answers are random bodies of each response's schema (any error
code, any offset, records that are random bytes, coordinators anywhere, assignments that do not parse):
every poll returns or raises a KafkaError, nothing fails inside the consumer or its heartbeat thread,
and close() ends. The answers are drawn the same way on every run."""
from __future__ import annotations

import itertools
import logging
import threading
import time

from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from logged_errors import LoggedErrors
from protocol_strategies import strategy, without_errors
from scripted_broker import scripted_cluster

from kafka_edu.clients.consumer.assignors import RangeAssignor
from kafka_edu.clients.consumer.consumer_network_client import WakeupException
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.consumer_protocol import Assignment, ConsumerProtocol
from kafka_edu.common.protocol.errors import KafkaError

PARTITIONS = [TopicPartition("t", 0), TopicPartition("t", 1)]
ANSWERS = 12          # drawn per API, answered in turn
POLLS = 30
# A random error code is almost never 0, so every other answer claims success. SyncGroup's cycle is
# prime to JoinGroup's successes, so every kind of join meets every kind of sync within a few rounds.
KINDS = {None: ("claims success", "random", "plausible", "random"),
         ApiKeys.SYNC_GROUP: ("plausible", "claims success", "random")}
SENT_AT = {ApiKeys.LEAVE_GROUP: 2}      # the consumer pins LeaveGroup to v2 (one member, mock-cluster safe)
GROUP_APIS = (ApiKeys.FIND_COORDINATOR, ApiKeys.JOIN_GROUP, ApiKeys.SYNC_GROUP, ApiKeys.HEARTBEAT,
              ApiKeys.OFFSET_FETCH, ApiKeys.OFFSET_COMMIT, ApiKeys.LEAVE_GROUP)


def plausible(api: ApiKeys, body: dict) -> dict:
    """A claimed success that also names what this consumer can use (our assignor, a readable
    assignment), so the random values further on get their turn: offsets, fetches, heartbeats."""
    if api is ApiKeys.JOIN_GROUP:
        return {**body, "protocol_name": RangeAssignor().name}
    if api is ApiKeys.SYNC_GROUP:
        return {**body, "assignment": ConsumerProtocol.serialize_assignment(Assignment(PARTITIONS))}
    return body


def nonsense(data, api: ApiKeys):
    """A handler answering `api` with ANSWERS random bodies, in turn, at the version the consumer uses
    against a broker that serves what it does (our latest, unless it pins one). The answers take the
    kinds of KINDS in turn, so the consumer sees errors, successes that make no sense, and successes it
    can go on from."""
    version = SENT_AT.get(api, api.max_version)
    drawn = data.draw(st.lists(strategy(api.response_schema(version)), min_size=ANSWERS, max_size=ANSWERS),
                      label=f"{api.name} v{version}")
    kinds = KINDS.get(api, KINDS[None])
    shaped = {"random": lambda body: body, "claims success": without_errors,
              "plausible": lambda body: plausible(api, without_errors(body))}
    answers = [shaped[kinds[i % len(kinds)]](body) for i, body in enumerate(drawn)]
    turn = itertools.count()

    def answer(header, body):
        assert header.api_version == version, f"{api.name} v{header.api_version}, not v{version}"
        return answers[next(turn) % ANSWERS]
    return answer


def at(broker, handler):
    """FindCoordinator answers with the rest random but the address this broker's, so the group path
    gets past the lookup at least sometimes."""
    host, port = broker.address

    def answer(header, body):
        return {**handler(header, body), "host": host, "port": port}
    return answer


def poll_through(consumer, seconds: float) -> list[BaseException]:
    """Poll POLLS times (a watchdog wakes a poll that blocks, as 0.10's poll may); the errors raised."""
    raised: list[BaseException] = []
    deadline = time.monotonic() + seconds
    for _ in range(POLLS):
        if time.monotonic() > deadline:
            break
        watchdog = threading.Timer(0.5, consumer.wakeup)
        watchdog.start()
        try:
            consumer.poll(20)
        except (KafkaError, WakeupException) as exc:
            raised.append(exc)
        finally:
            watchdog.cancel()
    return raised


def run(brokers, configure, extra_config=None) -> list[str]:
    failures = LoggedErrors()
    logging.getLogger("kafka_edu").addHandler(failures)
    host, port = brokers[0].address
    try:
        consumer = KafkaConsumer({"bootstrap.servers": f"{host}:{port}", "auto.offset.reset": "earliest",
                                  "request.timeout.ms": 3000, "retry.backoff.ms": 10,
                                  "reconnect.backoff.ms": 10, **(extra_config or {})})
        configure(consumer)
        raised = poll_through(consumer, 6)
        unexpected = [e for e in raised if not isinstance(e, (KafkaError, WakeupException))]
        assert unexpected == []
        started = time.monotonic()
        consumer.close(2000)
        assert time.monotonic() - started < 10, "close() outlived its timeout by far"
        return failures.messages
    finally:
        logging.getLogger("kafka_edu").removeHandler(failures)
        for broker in brokers:
            broker.close()


def assign_at_zero(consumer) -> None:
    """Positions set, so the consumer fetches at once (an out-of-range answer sends it to ListOffsets)."""
    consumer.assign(PARTITIONS)
    for tp in PARTITIONS:
        consumer.seek(tp, 0)


@settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
@given(data=st.data())
def test_assigned_partitions_survive_any_fetch_and_offset_answer(data):
    brokers = scripted_cluster(1, {"t": 2}, {api: nonsense(data, api)
                                            for api in (ApiKeys.LIST_OFFSETS, ApiKeys.FETCH)})
    errors = run(brokers, assign_at_zero)
    assert errors == []
    assert "FETCH" in {api for api, _ in brokers[0].apis_seen()}


@settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
@given(data=st.data())
def test_a_group_member_survives_any_coordinator_answer(data):
    brokers = scripted_cluster(1, {"t": 2}, {api: nonsense(data, api)
                                            for api in (*GROUP_APIS, ApiKeys.LIST_OFFSETS, ApiKeys.FETCH)})
    broker = brokers[0]
    broker.handlers[ApiKeys.FIND_COORDINATOR] = at(broker, broker.handlers[ApiKeys.FIND_COORDINATOR])
    errors = run(brokers, lambda c: c.subscribe(["t"]),
                 {"group.id": "g", "session.timeout.ms": 6000, "heartbeat.interval.ms": 50,
                  "enable.auto.commit": True, "auto.commit.interval.ms": 50})
    assert errors == []
    assert "SYNC_GROUP" in {api for api, _ in broker.apis_seen()}
