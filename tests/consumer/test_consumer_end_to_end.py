"""KafkaConsumer end to end against an in-process kafka-edu broker (and with confluent-kafka in the group)."""
from __future__ import annotations

import threading
import time

import pytest
from _consumer_helpers import create_topic, start_broker

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.consumer.consumer_network_client import WakeupException
from kafka_edu.clients.consumer.kafka_consumer import ConcurrentModificationError, KafkaConsumer
from kafka_edu.clients.consumer.subscription_state import ConsumerRebalanceListener, OffsetAndMetadata
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition

PARTITIONS, PER_PARTITION = 4, 50
STRING = "kafka_edu.clients.producer.serializers.StringSerializer"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("e2e"))
    for topic in ("orders", "auto", "interop", "misc"):
        create_topic(server, topic, PARTITIONS)
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "linger.ms": 2,
                              "key.serializer": STRING, "value.serializer": STRING})
    for topic in ("orders", "auto", "interop", "misc"):
        for i in range(PARTITIONS * PER_PARTITION):
            producer.send(topic, f"{topic}-{i % PARTITIONS}-{i // PARTITIONS}", partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    yield server
    server.shutdown()


def consumer(server, group, **extra):
    return KafkaConsumer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "max.poll.records": 17,
                          "value.deserializer": "kafka_edu.clients.producer.serializers.StringDeserializer",
                          **extra})


def test_group_splits_rebalances_and_reads_every_record_once_in_order(server):
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    lock = threading.Lock()
    assignments: dict[str, list] = {"a": [], "b": []}
    b_ready, b_stop = threading.Event(), threading.Event()

    class Track(ConsumerRebalanceListener):
        def __init__(self, name):
            self.name = name

        def on_partitions_assigned(self, partitions):
            assignments[self.name].append(sorted(tp.partition for tp in partitions))

    def consume(c, stop_when):
        while not stop_when():
            for tp, records in c.poll(100).items():
                with lock:
                    seen[tp.partition].extend(r.offset for r in records)
                    assert all(r.value == f"orders-{tp.partition}-{r.offset}" for r in records)
            c.commit_sync()                        # process, then commit: nothing read twice after a rebalance

    a = consumer(server, "e2e")
    a.subscribe(["orders"], Track("a"))
    b = consumer(server, "e2e")
    b.subscribe(["orders"], Track("b"))

    def run_b():
        b_ready.set()
        consume(b, b_stop.is_set)
        b.close()                                  # LeaveGroup: a takes everything over

    thread = threading.Thread(target=run_b, daemon=True)
    thread.start()
    b_ready.wait(10)
    total = lambda: sum(map(len, seen.values()))  # noqa: E731
    consume(a, lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2 and total() >= 40)
    b_stop.set()
    thread.join(20)
    assert not thread.is_alive()
    # b may have read all of its partitions already: wait for a to take them over too
    consume(a, lambda: total() >= PARTITIONS * PER_PARTITION and len(a.assignment()) == PARTITIONS)
    a.commit_sync()
    assert [len(x) for x in assignments["b"]][-1:] == [2]
    assert any(len(x) == 2 for x in assignments["a"]) and assignments["a"][-1] == list(range(PARTITIONS))
    for p in range(PARTITIONS):
        assert seen[p] == list(range(PER_PARTITION)), f"partition {p}"
    for p in range(PARTITIONS):
        assert a.committed(TopicPartition("orders", p)) == OffsetAndMetadata(PER_PARTITION)
    a.close()


def test_auto_commit_survives_and_next_member_resumes(server):
    c = consumer(server, "auto-group", **{"enable.auto.commit": True, "auto.commit.interval.ms": 50})
    c.subscribe(["auto"])
    got = 0
    while got < 60:
        got += sum(map(len, c.poll(200).values()))
    positions = {tp: c.position(tp) for tp in c.assignment()}
    c.close()                                          # the last auto commit happens here
    d = consumer(server, "auto-group")
    d.subscribe(["auto"])
    first = {}
    while len(first) < sum(1 for tp in positions if positions[tp] < PER_PARTITION):
        for tp, records in d.poll(200).items():
            first.setdefault(tp, records[0].offset)
    assert all(first[tp] == positions[tp] for tp in first)
    d.close()


def test_assign_seek_pause_and_positions_without_group(server):
    c = KafkaConsumer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "auto.offset.reset": "latest"})
    p0, p1 = TopicPartition("misc", 0), TopicPartition("misc", 1)
    c.assign([p0, p1])
    assert c.position(p0) == PER_PARTITION
    c.seek(p0, 45)
    c.seek_to_beginning([p1])
    c.pause([p1])
    records = {}
    for _ in range(50):
        for tp, rs in c.poll(100).items():
            records.setdefault(tp, []).extend(r.offset for r in rs)
        if len(records.get(p0, [])) == 5:
            break
    assert records == {p0: [45, 46, 47, 48, 49]} and c.paused() == {p1}
    assert [p.partition for p in c.partitions_for("misc")] == list(range(PARTITIONS))
    c.close()


def test_not_thread_safe_and_wakeup(server):
    c = consumer(server, "solo")
    c.assign([TopicPartition("misc", 2)])
    c.seek(TopicPartition("misc", 2), PER_PARTITION)
    errors = []
    started = threading.Event()

    def other():
        started.wait(5)
        time.sleep(0.1)
        try:
            c.position(TopicPartition("misc", 2))
        except ConcurrentModificationError as e:
            errors.append(e)
        c.wakeup()

    threading.Thread(target=other).start()
    started.set()
    with pytest.raises(WakeupException):
        c.poll(10_000)
    assert errors
    c.close()
    with pytest.raises(IllegalStateError):
        c.poll(0)


def test_interop_with_confluent_kafka_in_one_group(server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = f"127.0.0.1:{server.bound_port()}"
    theirs = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "mixed",
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                       "partition.assignment.strategy": "range",
                                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
    theirs.subscribe(["interop"])
    ours = consumer(server, "mixed")
    ours.subscribe(["interop"])
    stop = threading.Event()
    their_offsets: dict[int, list[int]] = {}

    def run_theirs():
        while not stop.is_set():
            message = theirs.poll(0.05)
            if message is not None and message.error() is None:
                their_offsets.setdefault(message.partition(), []).append(message.offset())

    thread = threading.Thread(target=run_theirs, daemon=True)
    thread.start()
    our_offsets: dict[int, list[int]] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for tp, records in ours.poll(100).items():
            our_offsets.setdefault(tp.partition, []).extend(r.offset for r in records)
        mine = {tp.partition for tp in ours.assignment()}
        if len(mine) == 2 and sum(len(v) for p, v in our_offsets.items() if p in mine) >= 2 * PER_PARTITION:
            break
    stop.set()
    thread.join(10)
    mine = {tp.partition for tp in ours.assignment()}
    theirs_now = {tp.partition for tp in theirs.assignment()}
    assert len(mine) == 2 and mine.isdisjoint(theirs_now) and mine | theirs_now == set(range(PARTITIONS))
    for p in mine:
        assert our_offsets[p][-PER_PARTITION:] == list(range(PER_PARTITION))
    theirs.close()
    ours.close()
