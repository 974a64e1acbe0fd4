"""Replication across broker processes on a real ZooKeeper, with real clients: a topic's lifecycle
(create, produce, SIGKILL the leader, election, restart, catch-up, reassignment, delete), and the
durability of acknowledged records under repeated SIGKILLs of a partition leader or of the controller.

DURABILITY_KILLS (environment, default 20) sets how many times the durability run kills a leader;
CONTROLLER_KILLS (default 10) how many times the controller run kills the controller. Each run prints
one line "durability victim=..., kills ..., acknowledged ..., lost ..., duplicated ..." (pytest -s).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from collections import Counter

import pytest
from broker_process import KAFKA_EDU
from process_cluster import ProcessCluster

from kafka_edu.server.zk.zk_utils import REASSIGN_PARTITIONS_PATH
from kafka_edu.viz.elections import SESSION_EXPIRY, ElectionRecorder

pytestmark = pytest.mark.zookeeper

# Followers fetch every 100 ms at most, so the leader's HW and the ISR follow within a fraction of a second.
REPLICATED = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false", "default.replication.factor": "3",
              "replica.lag.time.max.ms": "3000", "auto.create.topics.enable": "false"}


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    pytest.importorskip("confluent_kafka")
    chroot = request.node.name.replace("[", "-").replace("]", "")
    started = ProcessCluster(tmp_path, zookeeper.connect, chroot, 3, REPLICATED).start()
    yield started
    started.shutdown()


def create_topic(cluster: ProcessCluster, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 3)], operation_timeout=30).values():
        future.result(60)
    wait_full_isr(cluster, name, partitions)


def wait_full_isr(cluster: ProcessCluster, topic: str, partitions: int, timeout: float = 60) -> None:
    """Every partition has a live leader and all three replicas in its ISR."""
    def full():
        states = [cluster.partition_state(topic, p) for p in range(partitions)]
        return all(s is not None and len(s.leader_and_isr.isr) == 3 and s.leader_and_isr.leader in cluster.registered()
                   for s in states)
    cluster.wait_until(full, timeout, what=f"{topic}: every ISR complete")


def leader(cluster: ProcessCluster, topic: str, partition: int) -> int:
    return cluster.partition_state(topic, partition).leader_and_isr.leader


def producer(cluster: ProcessCluster, **extra):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 120_000, "retry.backoff.ms": 100, "linger.ms": 5,
                     "topic.metadata.refresh.interval.ms": 1000, **extra})


def log_end(consumer, partition) -> int:
    """The partition's high watermark. Brokers learn of a new leader a moment after ZooKeeper does
    (UpdateMetadata), so NOT_LEADER_FOR_PARTITION from a lagging metadata cache is asked again."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)[1]
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_all(cluster: ProcessCluster, topic: str, partitions: int,
             offsets: dict | None = None) -> dict[int, list[bytes]]:
    """Every record of every partition, from the beginning to the high watermark; `offsets`, if given,
    receives the offsets each (partition, value) was read at."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: log_end(consumer, TopicPartition(topic, p)) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(len(found[p]) < ends[p] for p in found) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                found[message.partition()].append(message.value())
                if offsets is not None:
                    offsets.setdefault((message.partition(), message.value()), []).append(message.offset())
        return found
    finally:
        consumer.close()


def test_topic_lifecycle_through_a_leader_sigkill(cluster, tmp_path):
    create_topic(cluster, "life", 1)
    acked = []
    p = producer(cluster)
    for i in range(200):
        p.produce("life", f"r{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
    assert p.flush(60) == 0 and len(acked) == 200
    old = leader(cluster, "life", 0)
    cluster.kill(old)
    cluster.wait_until(lambda: leader(cluster, "life", 0) not in (old, -1), what="a new leader")
    state = cluster.partition_state("life", 0).leader_and_isr
    assert state.leader != old and old not in state.isr and state.leader_epoch >= 1
    for i in range(200, 300):
        p.produce("life", f"r{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
    assert p.flush(60) == 0 and len(acked) == 300
    cluster.restart(old)
    wait_full_isr(cluster, "life", 1)
    assert read_all(cluster, "life", 1)[0] == acked
    reassign_away_from_the_leader(cluster, "life", tmp_path)
    assert read_all(cluster, "life", 1)[0] == acked
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics(["life"], operation_timeout=30)["life"].result(60)
    cluster.wait_until(lambda: "life" not in cluster.zk_utils.get_all_topics(), what="the topic's deletion")
    cluster.wait_until(lambda: not any((b.log_dir / "life-0").exists() for b in cluster.brokers), what="logs removed")


def kafka_edu(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), *argv], capture_output=True, text=True, timeout=60)


def reassign_away_from_the_leader(cluster: ProcessCluster, topic: str, tmp_path) -> None:
    """`reassign-partitions --execute` moves partition 0 to the two replicas that do not lead it;
    `--verify` until completed, then the old leader no longer holds the partition's log."""
    state = cluster.partition_state(topic, 0).leader_and_isr
    target = sorted(b for b in range(3) if b != state.leader)
    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}))
    started = kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--execute",
                        "--reassignment-json-file", str(plan))
    assert started.returncode == 0 and "Successfully started reassignment" in started.stdout, started.stderr

    def verified():
        done = kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--verify",
                         "--reassignment-json-file", str(plan))
        assert done.returncode == 0 and "failed" not in done.stdout, done.stdout + done.stderr
        return "completed successfully" in done.stdout
    cluster.wait_until(verified, 60, what="the reassignment", interval=0.3)
    assert cluster.zk_utils.get_replica_assignment_for_topics([topic]) == {(topic, 0): target}
    assert cluster.zk_utils.zk.exists(REASSIGN_PARTITIONS_PATH) is None
    moved = cluster.partition_state(topic, 0).leader_and_isr
    assert moved.leader in target and sorted(moved.isr) == target and moved.leader_epoch > state.leader_epoch
    cluster.wait_until(lambda: not (cluster.brokers[state.leader].log_dir / f"{topic}-0").exists(), 30,
                       what="the old leader's log removed")


def metadata_by_kcat(kcat: str, bootstrap: str, topic: str) -> dict:
    out = subprocess.run([kcat, "-b", bootstrap, "-L", "-J", "-t", topic, "-m", "10"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    m = json.loads(out)
    return {"brokers": sorted(b["id"] for b in m["brokers"]),
            "partitions": sorted((p["partition"], p["leader"], sorted(r["id"] for r in p["replicas"]),
                                  sorted(r["id"] for r in p["isrs"])) for t in m["topics"] for p in t["partitions"])}


def metadata_by_kafka_python(bootstrap: str, topic: str) -> dict:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_topics([topic])[0]
        brokers = sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()
    return {"brokers": brokers,
            "partitions": sorted((p["partition_index"], p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
                                 for p in described["partitions"])}


def kill_and_restart(cluster: ProcessCluster, victim_kind: str, round_: int, topic: str, partitions: int) -> int:
    """SIGKILL one broker (a partition's leader, partitions in turn, or the controller), wait for
    its successor, restart it and wait until every ISR is complete again."""
    if victim_kind == "leader":
        partition = round_ % partitions
        victim = leader(cluster, topic, partition)
        cluster.kill(victim)
        cluster.wait_until(lambda: leader(cluster, topic, partition) not in (victim, -1), what="a new leader")
    else:
        victim = cluster.controller_id()
        cluster.kill(victim)
        cluster.wait_until(lambda: cluster.controller_id() not in (victim, None), what="a new controller")
    cluster.restart(victim)
    wait_full_isr(cluster, topic, partitions)
    return victim


class EpochBumps(logging.Handler):
    """The lines of librdkafka's EOS debug log in which the producer bumps its epoch."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "bumped epoch" in record.getMessage():
            self.lines.append(record.getMessage())


def producer_watching_its_epoch(cluster: ProcessCluster) -> tuple:
    """The durability test's producer, with one request in flight per connection.

    librdkafka's idempotent producer bumps its epoch when a request that follows a failed one is
    answered OUT_OF_ORDER_SEQUENCE_NUMBER (R1 refused with NOT_LEADER_FOR_PARTITION by a broker that
    became leader just before R2 arrived), and it then re-sends, under the new epoch and from sequence
    0, the batches that other partitions had in flight to a broker that died. Those may be in the log
    already, and no broker can tell them from new records: a new epoch starts a new sequence
    (confluentinc/librdkafka#4953, still open). This test saw it twice under load: a 1,356-record batch
    and 2 records written twice, each time right after such a bump. With one request in flight per
    connection no request ever follows a failed one; retries of the same batch, which the broker
    must recognise, still happen after every kill. The debug log is kept to name any bump.
    """
    bumps = EpochBumps()
    logger = logging.getLogger(f"durability-producer-{time.monotonic_ns()}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(bumps)
    return producer(cluster, **{"max.in.flight.requests.per.connection": 1, "debug": "eos",
                                "logger": logger}), bumps


@pytest.mark.parametrize("victim_kind", ["leader", "controller"])
def test_acknowledged_records_survive_repeated_kills(cluster, kcat, victim_kind):
    kills_wanted = int(os.environ.get("DURABILITY_KILLS" if victim_kind == "leader" else "CONTROLLER_KILLS",
                                      "20" if victim_kind == "leader" else "10"))
    epoch_before = cluster.zk_utils.get_controller_epoch()[0]
    recorder = ElectionRecorder(cluster.zk_utils)    # figure 4-65's history, on the real ZooKeeper
    topic, partitions = "durable", 3
    create_topic(cluster, topic, partitions)
    acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    failed = []
    stop = threading.Event()
    p, bumps = producer_watching_its_epoch(cluster)

    def delivered(err, msg):
        if err is None:
            acked[msg.partition()].append(msg.value())
        else:
            failed.append(str(err))

    def produce():
        n = 0
        while not stop.is_set():
            try:
                p.produce(topic, f"v{n}".encode(), partition=n % partitions, on_delivery=delivered)
                n += 1
            except BufferError:
                pass
            p.poll(0.002)
        p.flush(120)

    writer = threading.Thread(target=produce, name="durability-producer")
    writer.start()
    kills = 0
    try:
        while kills < kills_wanted:
            kill_and_restart(cluster, victim_kind, kills, topic, partitions)
            kills += 1
    finally:
        stop.set()
        writer.join(180)
        recorder.close()
    elections = recorder.wait_for(len(recorder.elections))
    total = sum(len(v) for v in acked.values())
    read_at: dict[tuple[int, bytes], list[int]] = {}
    found = read_all(cluster, topic, partitions, read_at)
    lost = duplicated = 0
    for part in range(partitions):
        counts = Counter(found[part])
        lost += sum(1 for v in acked[part] if counts[v] == 0)
        duplicated += sum(c - 1 for c in counts.values() if c > 1)
    # two offsets: the log holds the record twice; one offset twice: the reader was handed it twice
    doubles = {key: at for key, at in read_at.items() if len(at) > 1}
    epochs = cluster.zk_utils.get_controller_epoch()[0] - epoch_before
    print(f"\ndurability victim={victim_kind}, kills {kills}, controller elections {epochs}, acknowledged {total}, "
          f"lost {lost}, duplicated {duplicated}, failed sends {len(failed)}, producer epoch bumps {len(bumps.lines)}")
    assert total > 0 and lost == 0 and duplicated == 0, \
        f"read twice (partition, value): offsets {doubles}; producer epoch bumps: {bumps.lines}"
    # Every election after the first was set off by a SIGKILLed controller's expired session, and the
    # epochs the recorder saw are the ones ZooKeeper went through, in order.
    assert [e["trigger"] for e in elections[1:]] == [SESSION_EXPIRY] * epochs
    assert [e["epoch"] for e in elections] == list(range(epoch_before, epoch_before + epochs + 1))
    if victim_kind == "controller":
        assert epochs == kills
    for part in range(partitions):   # in order: the log holds the acknowledged records in send order
        wanted = set(acked[part])
        assert [v for v in found[part] if v in wanted] == acked[part]
    # ZooKeeper had every ISR complete again before the last kill's round ended; the brokers' metadata
    # caches hear of ISR changes later (the controller batches the notifications), so wait for them first
    expected = {"brokers": [0, 1, 2], "partitions": [(p, leader(cluster, topic, p), [0, 1, 2], [0, 1, 2])
                                                     for p in range(partitions)]}
    cluster.wait_until(lambda: all(metadata_by_kcat(kcat, b.bootstrap, topic) == expected for b in cluster.brokers),
                       30, what="every broker's metadata as ZooKeeper has it (kcat)")
    for broker in cluster.brokers:
        assert metadata_by_kafka_python(broker.bootstrap, topic) == expected


@pytest.mark.parametrize("victim_kind", ["leader", "follower"])
def test_a_broker_whose_disk_refuses_a_write_halts_and_the_cluster_loses_nothing(cluster, victim_kind):
    """4.5.1: a leader whose append fails in the operating system (here: a file-size limit set on the
    process, EFBIG) halts, as 0.10 does, so leadership moves to a replica whose disk works; a follower
    whose append fails halts too. Every acknowledged record is then read back exactly once, in order,
    and the halted broker, restarted, catches up. Before, the leader answered every produce with
    UNKNOWN_SERVER_ERROR and kept its leadership: nothing could be written to the partition."""
    create_topic(cluster, "disk", 1)
    lead = leader(cluster, "disk", 0)
    victim = lead if victim_kind == "leader" else next(b.broker_id for b in cluster.brokers if b.broker_id != lead)
    broker = cluster.brokers[victim]
    sender = producer(cluster, **{"max.in.flight.requests.per.connection": 1})   # see producer_watching_its_epoch
    acked, failed = [], []

    def delivered(err, msg):
        (failed if err else acked).append(msg.value())

    def send(values):
        for value in values:
            sender.produce("disk", value, on_delivery=delivered)
            sender.poll(0)

    values = [f"{i:08d}".encode().ljust(1000, b".") for i in range(6000)]
    send(values[:2000])
    assert sender.flush(60) == 0 and len(acked) == 2000
    segment = broker.log_dir / "disk-0" / "00000000000000000000.log"
    broker.limit_file_size(max(segment.stat().st_size, (broker.workdir / "broker.log").stat().st_size) + 300_000)
    send(values[2000:])
    assert broker.proc.wait(60) == 1
    reason = ("unrecoverable I/O error while handling produce request: I/O error in append to log disk-0"
              if victim_kind == "leader" else "disk error while replicating data for disk-0: I/O error in append to log disk-0")
    assert f"halting: {reason}" in broker.output()
    assert sender.flush(120) == 0 and not failed and len(acked) == len(values)
    assert leader(cluster, "disk", 0) != victim
    cluster.restart(victim)
    wait_full_isr(cluster, "disk", 1)
    assert read_all(cluster, "disk", 1)[0] == acked
