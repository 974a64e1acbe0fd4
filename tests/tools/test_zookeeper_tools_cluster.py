"""The chapter-5 tools against a running cluster: in-process brokers on a real ZooKeeper (their own
chroot), the tools run as the installed `kafka-edu` command.

Chapter-5 test 1: `topics --create` on four brokers without racks spreads preferred leaders and
replicas evenly, and the controller makes every first replica the leader.
T16: leadership moved off a partition's preferred replica comes back to it after
`preferred-replica-election`; the controller deletes the request znode.
T18 (chapter-5 test 11): `reassign-partitions --execute` moves a partition [1,2,3] -> [3,4,5] and
raises another's replication factor; `--verify` reports completion, the old replicas' logs are gone
and every acknowledged record is still there. A target naming a dead broker is dropped."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from compat.broker_process import KAFKA_EDU
from external import wait_for

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.zk_utils import PREFERRED_REPLICA_ELECTION_PATH, ZkUtils, create_zk_client


def kafka_edu(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    done = subprocess.run([str(KAFKA_EDU), *argv], input=stdin, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


class Brokers:
    """Brokers 0..n-1 in this process on `connect`; stop and start them by id."""

    def __init__(self, connect: str, data_dir, n: int = 3):
        self.connect, self.data_dir = connect, data_dir
        self.servers: dict[int, KafkaServer] = {}
        for broker in range(n):
            self.start(broker)

    def start(self, broker: int) -> None:
        config = KafkaConfig({"broker.id": broker, "listeners": "PLAINTEXT://127.0.0.1:0",
                              "log.dirs": str(self.data_dir / f"broker-{broker}"), "zookeeper.connect": self.connect,
                              "num.network.threads": 1, "num.io.threads": 2, "background.threads": 2,
                              "auto.leader.rebalance.enable": False, "offsets.topic.replication.factor": 1,
                              "replica.lag.time.max.ms": 2000, "controlled.shutdown.retry.backoff.ms": 200})
        self.servers[broker] = KafkaServer(config)
        self.servers[broker].startup()

    def stop(self, broker: int) -> None:
        self.servers.pop(broker).shutdown()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{s.bound_port()}" for s in self.servers.values())

    def close(self) -> None:
        for broker in list(self.servers):
            self.servers.pop(broker).shutdown(controlled=False)


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    connect = f"{zookeeper.connect}/c-{uuid.uuid4().hex[:8]}"
    brokers = Brokers(connect, tmp_path, getattr(request, "param", 3))
    zk = create_zk_client({"zookeeper.connect": connect})
    brokers.zk_utils = ZkUtils(zk)
    yield brokers
    brokers.close()
    zk.close()


def state(cluster, partition: int):
    found = cluster.zk_utils.get_leader_and_isr("t", partition)
    return None if found is None else found.leader_and_isr


@pytest.mark.parametrize("cluster", [4], indirect=True)
def test_create_on_four_brokers_spreads_leaders_and_replicas(cluster):
    assert kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "t", "--partitions",
                     "6", "--replication-factor", "3") == (0, 'Created topic "t".\n', "")
    document = json.loads(cluster.zk_utils.zk.get("/brokers/topics/t")[0])
    assert document["version"] == 1 and sorted(document["partitions"], key=int) == [str(p) for p in range(6)]
    assignment = {int(p): r for p, r in document["partitions"].items()}
    assert all(len(set(r)) == 3 and set(r) <= {0, 1, 2, 3} for r in assignment.values())
    assert set(Counter(r[0] for r in assignment.values()).values()) <= {1, 2}
    assert set(Counter(b for r in assignment.values() for b in r).values()) <= {4, 5}
    expected = [f"\tTopic: t\tPartition: {p}\tLeader: {r[0]}\tReplicas: {','.join(map(str, r))}"
                f"\tIsr: {','.join(map(str, r))}" for p, r in sorted(assignment.items())]
    # every broker answers Metadata from its own cache, which the controller updates asynchronously
    wait_for(lambda: kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "t")[1]
             .splitlines()[1:] == expected, 20, "the first replicas leading, as --describe shows")


def test_t16_preferred_replica_election_moves_leadership_back(cluster, tmp_path):
    assert kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "t",
                     "--replica-assignment", "0:1:2,1:2:0")[0] == 0
    wait_for(lambda: all(state(cluster, p) and state(cluster, p).leader == p for p in (0, 1)), 20, "leaders 0 and 1")

    cluster.stop(1)                                  # controlled shutdown: partition 1's leadership moves on
    wait_for(lambda: state(cluster, 1).leader == 2, 20, "partition 1 led by broker 2")
    cluster.start(1)
    wait_for(lambda: 1 in state(cluster, 1).isr, 30, "broker 1 back in partition 1's ISR")
    before = state(cluster, 1)
    assert before.leader == 2

    election = tmp_path / "election.json"
    election.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 1}]}))
    assert kafka_edu("preferred-replica-election", "--zookeeper", cluster.connect,
                     "--path-to-json-file", str(election)) == (
        0, "Successfully started preferred replica election for partitions Set([t,1])\n", "")
    wait_for(lambda: state(cluster, 1).leader == 1, 20, "partition 1 led by its preferred replica")
    after = state(cluster, 1)
    assert (sorted(after.isr), after.leader_epoch) == (sorted(before.isr), before.leader_epoch + 1)
    wait_for(lambda: cluster.zk_utils.zk.exists(PREFERRED_REPLICA_ELECTION_PATH) is None, 20, "the znode removed")
    assert state(cluster, 0).leader == 0


@pytest.mark.parametrize("cluster", [6], indirect=True)
def test_t18_reassignment_completes_and_verify_says_so(cluster, tmp_path):
    for topic, assignment in (("t", "1:2:3"), ("u", "0:1")):
        assert kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
                         "--replica-assignment", assignment)[0] == 0
    records = [f"record-{i}" for i in range(200)]
    assert kafka_edu("console-producer", "--broker-list", cluster.bootstrap, "--topic", "t",
                     "--request-required-acks", "all", "--timeout", "10", stdin="\n".join(records) + "\n")[0] == 0
    wait_for(lambda: state(cluster, 0) and sorted(state(cluster, 0).isr) == [1, 2, 3], 20, "t-0 fully replicated")

    target = tmp_path / "target.json"
    target.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [3, 4, 5]}, {"topic": "u", "partition": 0, "replicas": [0, 1, 2]}]}))
    status, out, err = kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--execute",
                                 "--reassignment-json-file", str(target))
    assert (status, err) == (0, "") and out.splitlines()[-1].startswith("Successfully started reassignment")

    def verified():
        status, out, _ = kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--verify",
                                   "--reassignment-json-file", str(target))
        assert status == 0 and "failed" not in out, out
        return out if "in progress" not in out else None
    assert wait_for(verified, 40, "the reassignment", interval=0.2) == (
        "Status of partition reassignment:\n"
        "Reassignment of partition [t,0] completed successfully\n"
        "Reassignment of partition [u,0] completed successfully\n")

    assert cluster.zk_utils.get_replica_assignment_for_topics(["t", "u"]) == {("t", 0): [3, 4, 5], ("u", 0): [0, 1, 2]}
    assert state(cluster, 0).leader in (3, 4, 5) and set(state(cluster, 0).isr) <= {3, 4, 5}
    assert cluster.zk_utils.zk.exists("/admin/reassign_partitions") is None
    wait_for(lambda: not any((cluster.data_dir / f"broker-{b}" / "t-0").exists() for b in (1, 2)), 20,
             "t-0's logs removed from brokers 1 and 2")
    status, out, _ = kafka_edu("console-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", "t",
                               "--from-beginning", "--max-messages", "200", "--timeout-ms", "20000")
    assert status == 0 and out.splitlines() == records


def test_t18_a_reassignment_to_a_dead_broker_is_dropped(cluster, tmp_path):
    assert kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "t",
                     "--replica-assignment", "0:1")[0] == 0
    wait_for(lambda: state(cluster, 0), 20, "t-0 online")
    target = tmp_path / "target.json"
    target.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 7]}]}))
    assert kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--execute",
                     "--reassignment-json-file", str(target))[0] == 0
    wait_for(lambda: cluster.zk_utils.zk.exists("/admin/reassign_partitions") is None, 20, "the request dropped")
    assert kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, "--verify",
                     "--reassignment-json-file", str(target)) == (0, (
        "Status of partition reassignment:\n"
        "ERROR: Assigned replicas (0,1) don't match the list of replicas for reassignment (1,7) for partition [t,0]\n"
        "Reassignment of partition [t,0] failed\n"), "")


def test_a_throttled_move_is_held_back_until_the_throttle_is_raised(cluster, tmp_path):
    """Beyond 0.10 (KIP-73): `--throttle 1` holds the new replica back (one fetch of 1 MB, then
    nothing while the quota's windows last) while the old one leads; rerunning `--execute` with a large throttle lets the move finish, and
    `--verify` then removes the throttle from the topic and every broker."""
    assert kafka_edu("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "big",
                     "--replica-assignment", "0")[0] == 0
    wait_for(lambda: cluster.zk_utils.get_leader_and_isr("big", 0), 20, "big-0 online")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for _ in range(8000):
        producer.produce("big", b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    leader = cluster.servers[0].replica_manager.get_partition(("big", 0)).local_replica

    def follower_end() -> int:
        partition = cluster.servers[1].replica_manager.get_partition(("big", 0))
        return -1 if partition is None or partition.local_replica is None else partition.local_replica.log_end_offset

    target = tmp_path / "target.json"
    target.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [0, 1]}]}))
    execute = ("reassign-partitions", "--zookeeper", cluster.connect, "--execute", "--reassignment-json-file",
               str(target), "--throttle")
    assert kafka_edu(*execute, "1")[0] == 0
    wait_for(lambda: follower_end() > 0, 20, "broker 1 fetching")
    wait_for(lambda: cluster.servers[1].replica_manager.quotas.follower.is_quota_exceeded(), 20, "the quota reached")
    held = follower_end()
    time.sleep(2)
    assert follower_end() == held < leader.log_end_offset, (held, leader.log_end_offset)
    verify = ("reassign-partitions", "--zookeeper", cluster.connect, "--verify", "--reassignment-json-file", str(target))
    assert kafka_edu(*verify)[1].splitlines()[-1] == "Reassignment of partition [big,0] is still in progress"

    assert kafka_edu(*execute, "100000000") == (
        0, "There is an existing assignment running.\nThe throttle limit was set to 100000000 B/s\n", "")
    wait_for(lambda: follower_end() == leader.log_end_offset == 8000, 30, "broker 1 caught up")

    def finished():
        out = kafka_edu(*verify)[1]
        return None if "in progress" in out else out
    assert wait_for(finished, 30, "the move completed", interval=0.2) == (
        "Status of partition reassignment:\nReassignment of partition [big,0] completed successfully\n"
        "Throttle was removed.\n")
    assert cluster.zk_utils.fetch_entity_config("topics", "big") == {}
    assert all(cluster.zk_utils.fetch_entity_config("brokers", str(b)) == {} for b in range(3))
