"""`kafka-edu mirror-maker` between two independent kafka-edu brokers (separate processes, ports,
log dirs and embedded ZooKeepers): acceptance test 19. Keyed records arrive in the same topic and
partition with their timestamps and per-key order; kill -9 and a restart lose nothing and copy
again exactly the records after the last commit; a refused record stops the process with
--abort.on.send.failure true and is only counted with false; the usage errors."""
from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections import defaultdict

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess
from external import wait_for

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition

BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    source = BrokerProcess(tmp_path_factory.mktemp("source"), {"offsets.topic.num.partitions": "1"}).start()
    target = BrokerProcess(tmp_path_factory.mktemp("target"), {"offsets.topic.num.partitions": "1"}).start()
    yield source, target
    assert source.stop() == 0, source.output()
    assert target.stop() == 0, target.output()


def create(broker, topic, partitions, **configs):
    with ClusterAdmin(broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1, configs=configs)]) == {topic: None}


def produce(broker, topic, records):
    with KafkaProducer({"bootstrap.servers": broker.bootstrap, "key.serializer": BYTES,
                        "value.serializer": BYTES, "linger.ms": 5}) as producer:
        for key, value, timestamp in records:
            producer.send(topic, value, key, timestamp=timestamp)


def end_offsets(broker, topic, partitions) -> int:
    with ClusterAdmin(broker.bootstrap) as admin:
        return sum(o.offset for o in admin.list_offsets({TopicPartition(topic, p): -1
                                                          for p in range(partitions)}).values())


def committed(broker, group) -> int:
    with ClusterAdmin(broker.bootstrap) as admin:
        return sum(o.offset for o in admin.list_group_offsets(group).values())


def group_state(broker, group) -> str:
    with ClusterAdmin(broker.bootstrap) as admin:
        return admin.describe_group(group).state


def read_all(broker, topic, partitions, expected):
    consumer = KafkaConsumer({"bootstrap.servers": broker.bootstrap})
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records = []
    for _ in range(60):
        records += [r for rs in consumer.poll(500).values() for r in rs]
        if len(records) >= expected:
            break
    consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def mirror_maker(tmp_path, source, target, group, whitelist, *extra, producer_props=""):
    (tmp_path / f"{group}-consumer.properties").write_text(
        f"bootstrap.servers={source.bootstrap}\ngroup.id={group}\nauto.offset.reset=earliest\n"
        "session.timeout.ms=6000\nheartbeat.interval.ms=2000\n")  # a killed member leaves the group sooner
    (tmp_path / f"{group}-producer.properties").write_text(f"bootstrap.servers={target.bootstrap}\n{producer_props}")
    return subprocess.Popen([str(KAFKA_EDU), "mirror-maker", "--consumer.config",
                             str(tmp_path / f"{group}-consumer.properties"), "--producer.config",
                             str(tmp_path / f"{group}-producer.properties"), "--whitelist", whitelist, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_and_restart_lose_nothing(clusters, tmp_path):
    source, target = clusters
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"mm-{uuid.uuid4().hex[:6]}"
    create(source, topic, 3)
    create(target, topic, 3)
    sent = [(b"k%d" % (i % 10), b"k%d:%04d" % (i % 10, i), 1_600_000_000_000 + i) for i in range(1000)]
    produce(source, topic, sent[:500])
    args = ("--offset.commit.interval.ms", "200", "--num.streams", "2", "--status.interval.ms", "0")
    first = mirror_maker(tmp_path, source, target, group, f"{topic}.*", *args)
    wait_for(lambda: committed(source, group) == 500, 30, "the first 500 records committed")
    produce(source, topic, sent[500:])
    wait_for(lambda: end_offsets(target, topic, 3) >= 600, 30, "more records mirrored")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    time.sleep(0.5)                         # a produce request already on the wire may still land
    at_kill, committed_at_kill = end_offsets(target, topic, 3), committed(source, group)
    assert 500 <= committed_at_kill <= at_kill <= 1000

    second = mirror_maker(tmp_path, source, target, group, f"{topic}.*", *args)
    wait_for(lambda: committed(source, group) == 1000, 30, "everything committed after the restart")
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert second.communicate()[1].splitlines()[-1] == f"Mirrored {1000 - committed_at_kill} records, dropped 0; stopped."

    total = end_offsets(target, topic, 3)
    assert total == at_kill + 1000 - committed_at_kill      # the duplicates: exactly those after the last commit
    mirrored = read_all(target, topic, 3, total)
    assert len(mirrored) == total and {r.value for r in mirrored} == {v for _, v, _ in sent}
    original = {r.value: r for r in read_all(source, topic, 3, 1000)}
    by_key = defaultdict(list)
    for r in mirrored:
        assert (r.partition, r.key, r.timestamp) == (original[r.value].partition, original[r.value].key,
                                                    original[r.value].timestamp)
        by_key[r.key].append(r.value)
    for values in by_key.values():          # per key: in order, apart from a replayed stretch
        firsts = list(dict.fromkeys(values))
        assert firsts == sorted(firsts)


def test_send_failure_aborts_or_is_counted(clusters, tmp_path):
    source, target = clusters
    topic = f"audit-{uuid.uuid4().hex[:6]}"
    create(source, topic, 1)
    create(target, topic, 1, **{"max.message.bytes": "300"})
    produce(source, topic, [(None, b"small-1", 1), (None, b"x" * 1000, 2), (None, b"small-2", 3)])
    one_per_batch = "batch.size=200\n"      # the target checks max.message.bytes per batch: keep the big one alone

    aborting = mirror_maker(tmp_path, source, target, "abort", topic, "--offset.commit.interval.ms", "100",
                            producer_props=one_per_batch)
    assert aborting.wait(60) == 1
    err = aborting.communicate()[1]
    assert "ERROR Error when sending message to topic" in err and "MESSAGE_TOO_LARGE" in err
    assert "skip committing offsets" in err
    assert committed(source, "abort") <= 1

    counting = mirror_maker(tmp_path, source, target, "count", topic, "--abort.on.send.failure", "false",
                            "--offset.commit.interval.ms", "100", "--status.interval.ms", "200",
                            producer_props=one_per_batch)
    wait_for(lambda: committed(source, "count") == 3, 30, "all three records committed")
    time.sleep(0.6)                         # a status line or more (every 200 ms)
    counting.send_signal(signal.SIGINT)
    assert counting.wait(30) == 0
    err = counting.communicate()[1].splitlines()
    assert err[-1] == "Mirrored 3 records, dropped 1; stopped."
    assert any(line.startswith("Mirrored ") and line.endswith(", dropped 1") for line in err[:-1])
    assert b"small-2" in {r.value for r in read_all(target, topic, 1, 2)}


def test_a_second_signal_ends_a_flush_that_cannot_finish(clusters, tmp_path):
    source, _ = clusters
    topic = f"stuck-{uuid.uuid4().hex[:6]}"
    create(source, topic, 1)
    produce(source, topic, [(None, b"v", 1)])
    nowhere = BrokerProcess(tmp_path / "nowhere")       # never started: its port refuses connections
    proc = mirror_maker(tmp_path, source, nowhere, "stuck", topic, "--status.interval.ms", "100")
    wait_for(lambda: group_state(source, "stuck") == "Stable", 30, "the mirror maker's group")
    time.sleep(1.0)                                     # its poll takes the record; its send then waits for ever
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert proc.poll() is None                          # flushing to a target that is not there
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 130
    assert committed(source, "stuck") == 0


@pytest.mark.parametrize("argv, message", [
    (["--consumer.config", "c", "--producer.config", "p"], "the following arguments are required: --whitelist"),
    (["--consumer.config", "/nonexistent", "--producer.config", "p", "--whitelist", "t"],
     "cannot read --consumer.config"),
    (["--consumer.config", "c", "--producer.config", "p", "--whitelist", "(unclosed"], "not a valid regular expression"),
    (["--consumer.config", "c", "--producer.config", "p", "--whitelist", "t", "--num.streams", "0"],
     "--num.streams must be positive"),
    (["--consumer.config", "c", "--producer.config", "p", "--whitelist", "t", "--abort.on.send.failure", "yes"],
     "invalid choice"),
])
def test_usage_errors(argv, message):
    done = subprocess.run([str(KAFKA_EDU), "mirror-maker", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
