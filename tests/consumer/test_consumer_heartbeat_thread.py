"""Beyond 0.10 (KIP-62): the background heartbeat thread, max.poll.interval.ms, and a close() that never hangs.

Real in-process brokers; the waits are generous and end on conditions, never on how fast something was.
"""
from __future__ import annotations

import threading
import time

import pytest
from _consumer_helpers import create_topic, start_broker

from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer

SESSION_MS = 2_000
BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("kip62"), **{"group.min.session.timeout.ms": 1_000})
    create_topic(server, "work", 4)
    yield server
    server.shutdown()


def member(server, group, **extra):
    return KafkaConsumer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200, **extra})


class Poller(threading.Thread):
    """Polls one consumer on its own thread and publishes (generation, assignment) after each poll."""

    def __init__(self, consumer):
        super().__init__(daemon=True)
        self.consumer, self.stop, self.lock = consumer, threading.Event(), threading.Lock()
        self.state: tuple[int, frozenset] = (-1, frozenset())

    def run(self):
        while not self.stop.is_set():
            self.consumer.poll(50)
            with self.lock:
                self.state = (self.consumer.coordinator.generation, frozenset(self.consumer.assignment()))

    def snapshot(self):
        with self.lock:
            return self.state

    def finish(self):
        self.stop.set()
        self.join(30)
        assert not self.is_alive()
        self.consumer.close()


def wait_for(condition, what, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for: {what}"
        time.sleep(0.02)


def settle(a, poller_b):
    """Poll `a` on this thread until both members hold two partitions each in one generation."""
    def settled():
        a.poll(50)
        generation, assignment = poller_b.snapshot()
        return (len(a.assignment()) == 2 and len(assignment) == 2 and generation == a.coordinator.generation
                and not a.assignment() & assignment)
    wait_for(settled, "the group to split the four partitions")
    return a.coordinator.generation


def steps(consumer, since=0):
    return [step for step, _ in list(consumer.coordinator.events)[since:]]


def test_busy_member_keeps_its_partitions_without_a_rebalance(server):
    a, b = member(server, "busy"), member(server, "busy")
    a.subscribe(["work"])
    b.subscribe(["work"])
    poller_b = Poller(b)
    poller_b.start()
    try:
        generation = settle(a, poller_b)
        mine, theirs = set(a.assignment()), poller_b.snapshot()[1]
        marker = len(a.coordinator.events)
        time.sleep(2 * SESSION_MS / 1000)            # "processing": no poll() for two session timeouts
        assert poller_b.snapshot() == (generation, theirs), "b must not have rebalanced or taken a's partitions"
        assert a.coordinator.generation == generation and not a.coordinator.need_rejoin()
        a.poll(0)
        assert set(a.assignment()) == mine and a.coordinator.generation == generation
        assert "JoinGroup" not in steps(a, marker) and "poll timeout" not in steps(a, marker)
        assert a.coordinator.heartbeat_thread.is_alive()
    finally:
        poller_b.finish()
        a.close()


def test_member_that_stops_polling_is_removed_and_the_other_takes_everything(server):
    a = member(server, "stuck", **{"max.poll.interval.ms": 3_000})
    b = member(server, "stuck")
    a.subscribe(["work"])
    b.subscribe(["work"])
    poller_b = Poller(b)
    poller_b.start()
    try:
        generation = settle(a, poller_b)
        marker = len(a.coordinator.events)
        wait_for(lambda: len(poller_b.snapshot()[1]) == 4, "b to own all four partitions")   # a polls no more
        assert poller_b.snapshot()[0] > generation
        assert steps(a, marker)[:2] == ["poll timeout", "LeaveGroup"]   # the thread left; no session expiry
        assert a.coordinator.generation == -1
        wait_for(lambda: a.poll(50) is not None and len(a.assignment()) == 2, "a to rejoin on its next poll()")
    finally:
        poller_b.finish()
        a.close()


def test_close_returns_within_its_timeout_when_the_broker_is_gone(tmp_path):
    server = start_broker(tmp_path)
    try:
        create_topic(server, "gone", 2)
        bootstrap = f"127.0.0.1:{server.bound_port()}"
        producer = KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": BYTES, "value.serializer": BYTES})
        for i in range(20):
            producer.send("gone", b"v%d" % i)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": "orphan", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 60_000,
                                  "session.timeout.ms": 6_000, "heartbeat.interval.ms": 200})
        consumer.subscribe(["gone"])
        read = []
        wait_for(lambda: read.extend(r for rs in consumer.poll(100).values() for r in rs) or len(read) == 20,
                 "every record")
        heartbeat_thread = consumer.coordinator.heartbeat_thread
        assert heartbeat_thread is not None and heartbeat_thread.is_alive()
    finally:
        server.shutdown()                             # now the coordinator is unreachable for good
    outcome = []

    def close():
        try:
            consumer.close(timeout_ms=2_000)          # the auto commit cannot succeed: it must give up
            outcome.append("returned")
        except BaseException as error:
            outcome.append(error)

    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    closer.join(60)
    assert not closer.is_alive(), "close() hung"
    assert outcome == ["returned"]
    assert not heartbeat_thread.is_alive() and consumer.coordinator.heartbeat_thread is None
    with pytest.raises(ValueError):
        consumer.close(timeout_ms=-1)
