"""`kafka-edu preferred-replica-election` and `kafka-edu reassign-partitions`, run as the installed
console script against a real ZooKeeper: usage errors (exit 2, one line), an unreachable ensemble
(exit 1, one line), the znodes each action writes and 0.10's output, line by line.

Each test works under its own chroot, which the tools reach through `--zookeeper host:port/chroot`."""
from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from compat.broker_process import KAFKA_EDU
from external import free_port

from kafka_edu.server.zk.zk_client import NoNodeError
from kafka_edu.server.zk.zk_utils import LeaderAndIsr, ZkUtils, create_zk_client


def kafka_edu(*argv: str, timeout: float = 60) -> tuple[int, str, str]:
    done = subprocess.run([str(KAFKA_EDU), *argv], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def cluster(zookeeper):
    """A chroot holding 0.10's state of a cluster: brokers 1, 2, 3 (no racks), topic `orders` with
    three partitions of two replicas and `audit` with one partition."""
    chroot = f"/t-{uuid.uuid4().hex[:8]}"
    zk = create_zk_client({"zookeeper.connect": zookeeper.connect + chroot})
    zk_utils = ZkUtils(zk)
    zk_utils.setup_common_paths()
    for broker in (1, 2, 3):
        zk_utils.register_broker(broker, "h", 9092, ["PLAINTEXT://h:9092"])
    for topic, assignment in (("orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]}), ("audit", {0: [1]})):
        zk_utils.create_topic_assignment(topic, assignment)
        for p, replicas in assignment.items():
            zk_utils.create_leader_and_isr(topic, p, LeaderAndIsr(replicas[-1], 1, tuple(replicas)), 1)
    zk_utils.connect = zookeeper.connect + chroot
    yield zk_utils
    zk.close()


def data(zk_utils: ZkUtils, path: str) -> str | None:
    try:
        return zk_utils.zk.get(path)[0].decode()
    except NoNodeError:
        return None


def write(tmp_path, name: str, document) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


# --- conventions shared by both tools ---------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["preferred-replica-election"], "the following arguments are required: --zookeeper"),
    (["preferred-replica-election", "--zookeeper", "h:1", "--bogus"], "unrecognized arguments: --bogus"),
    (["preferred-replica-election", "--zookeeper", "h:1", "--timeout", "0"], "--timeout must be positive"),
    (["preferred-replica-election", "--zookeeper", "h:1", "--path-to-json-file", "/nonexistent/e.json"],
     "cannot read --path-to-json-file /nonexistent/e.json"),
    (["reassign-partitions", "--zookeeper", "h:1", "--execute", "--reassignment-json-file", "/nonexistent/r.json"],
     "cannot read --reassignment-json-file /nonexistent/r.json"),
    (["reassign-partitions", "--zookeeper", "h:1"], "one of the arguments --generate --execute --verify is required"),
    (["reassign-partitions", "--zookeeper", "h:1", "--execute", "--verify"], "not allowed with argument"),
    (["reassign-partitions", "--zookeeper", "h:1", "--generate", "--broker-list", "1"],
     "If --generate option is used, command must include both --topics-to-move-json-file and --broker-list options"),
    (["reassign-partitions", "--zookeeper", "h:1", "--execute"],
     "If --execute option is used, command must include --reassignment-json-file that was output during the "
     "--generate option"),
    (["reassign-partitions", "--zookeeper", "h:1", "--verify"],
     "If --verify option is used, command must include --reassignment-json-file that was used during the "
     "--execute option"),
    (["reassign-partitions", "--zookeeper", "h:1", "--verify", "--reassignment-json-file", "f", "--throttle", "5"],
     "--throttle is only valid with --execute"),
    (["reassign-partitions", "--zookeeper", "h:1", "--execute", "--reassignment-json-file", "f", "--throttle", "x"],
     "argument --throttle: invalid int value"),
    (["reassign-partitions", "--zookeeper", "/chroot-only", "--verify", "--reassignment-json-file", __file__],
     "zookeeper.connect has no host"),
])
def test_usage_errors_are_one_line_with_status_2(argv, message):
    status, out, err = kafka_edu(*argv)
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and message in err and err.startswith("kafka-edu"), err


def test_help_lists_every_option_with_its_default():
    status, out, _ = kafka_edu("reassign-partitions", "--help")
    assert status == 0
    flat = " ".join(out.split())
    for option in ("--zookeeper", "--timeout MS", "--generate", "--execute", "--verify", "--topics-to-move-json-file",
                   "--broker-list", "--reassignment-json-file", "--disable-rack-aware", "--throttle BYTES/S"):
        assert option in flat, option
    assert "(default 30000, 0.10's value)" in flat and "(default -1: no limit)" in flat
    status, out, _ = kafka_edu("preferred-replica-election", "--help")
    flat = " ".join(out.split())
    assert status == 0 and "--path-to-json-file FILE" in flat and "(default: every partition of every topic)" in flat


@pytest.mark.parametrize("tool, prefix", [("preferred-replica-election", "Failed to start preferred replica election: "),
                                          ("reassign-partitions", "Partitions reassignment failed due to ")])
def test_unreachable_zookeeper_is_one_line_and_status_1(tool, prefix, tmp_path):
    extra = [] if tool == "preferred-replica-election" else ["--verify", "--reassignment-json-file", __file__]
    started = time.monotonic()
    status, out, err = kafka_edu(tool, "--zookeeper", f"127.0.0.1:{free_port()}", "--timeout", "1000", *extra,
                                 timeout=30)
    assert (status, out) == (1, "") and err.count("\n") == 1, err
    assert err.startswith(prefix + "cannot connect to ZooKeeper at 127.0.0.1:")
    assert time.monotonic() - started < 30


# --- preferred-replica-election ---------------------------------------------------------------------

ELECTION = "/admin/preferred_replica_election"


def test_preferred_election_writes_the_partitions_that_exist(cluster, tmp_path):
    path = write(tmp_path, "e.json", {"partitions": [{"topic": "orders", "partition": 1},
                                                     {"topic": "orders", "partition": 9},
                                                     {"topic": "nope", "partition": 0},
                                                     {"topic": "audit", "partition": 0}]})
    assert kafka_edu("preferred-replica-election", "--zookeeper", cluster.connect, "--path-to-json-file", path) == (
        0, "Successfully started preferred replica election for partitions "
           "Set([orders,1], [orders,9], [nope,0], [audit,0])\n",
        "Skipping preferred replica leader election for partition [orders,9] since it doesn't exist\n"
        "Skipping preferred replica leader election for partition [nope,0] since topic nope doesn't exist\n")
    assert data(cluster, ELECTION) == (
        '{"version":1,"partitions":[{"topic":"orders","partition":1},{"topic":"audit","partition":0}]}')

    status, out, err = kafka_edu("preferred-replica-election", "--zookeeper", cluster.connect,
                                 "--path-to-json-file", path)
    assert (status, out) == (1, "") and err.splitlines()[-1] == (
        "Failed to start preferred replica election: Preferred replica leader election currently in progress for "
        "Set([orders,1], [audit,0]). Aborting operation")
    assert data(cluster, ELECTION).endswith('{"topic":"audit","partition":0}]}')


def test_preferred_election_without_a_file_lists_every_partition(cluster):
    assert kafka_edu("preferred-replica-election", "--zookeeper", cluster.connect) == (
        0, "Successfully started preferred replica election for partitions "
           "Set([audit,0], [orders,0], [orders,1], [orders,2])\n", "")
    assert json.loads(data(cluster, ELECTION)) == {"version": 1, "partitions": [
        {"topic": "audit", "partition": 0}, {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 1}, {"topic": "orders", "partition": 2}]}


@pytest.mark.parametrize("document, message", [
    ({"partitions": [{"topic": "orders", "partition": 1}, {"topic": "orders", "partition": 1}]},
     "Preferred replica election data contains duplicate partitions: [orders,1]"),
    ({"version": 1}, "Preferred replica election data is empty"),
    ({"partitions": [{"partition": 1}]}, 'every entry of "partitions" needs a "topic" and a "partition"'),
    ("{not json", "is not JSON"),
])
def test_preferred_election_refuses_bad_files_and_writes_nothing(cluster, tmp_path, document, message):
    status, out, err = kafka_edu("preferred-replica-election", "--zookeeper", cluster.connect,
                                 "--path-to-json-file", write(tmp_path, "bad.json", document))
    assert (status, out) == (1, "") and err.count("\n") == 1 and message in err, err
    assert err.startswith("Failed to start preferred replica election: ")
    assert data(cluster, ELECTION) is None


# --- reassign-partitions ----------------------------------------------------------------------------

REASSIGN = "/admin/reassign_partitions"


def reassign(cluster, *argv):
    return kafka_edu("reassign-partitions", "--zookeeper", cluster.connect, *argv)


def test_generate_proposes_on_the_listed_brokers_and_writes_nothing(cluster, tmp_path):
    move = write(tmp_path, "move.json", {"topics": [{"topic": "orders"}, {"topic": "audit"}], "version": 1})
    before = {t: data(cluster, f"/brokers/topics/{t}") for t in ("orders", "audit")}
    status, out, err = reassign(cluster, "--generate", "--topics-to-move-json-file", move, "--broker-list", "2,3,7")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[1] == "" and lines[4] == ""
    assert lines[3] == "Proposed partition reassignment configuration" and len(lines) == 6
    assert lines[2] == ('{"version":1,"partitions":[{"topic":"audit","partition":0,"replicas":[1]},'
                        '{"topic":"orders","partition":0,"replicas":[1,2]},{"topic":"orders","partition":1,'
                        '"replicas":[2,3]},{"topic":"orders","partition":2,"replicas":[3,1]}]}')
    proposed = {(e["topic"], e["partition"]): e["replicas"] for e in json.loads(lines[5])["partitions"]}
    assert sorted(proposed) == [("audit", 0), ("orders", 0), ("orders", 1), ("orders", 2)]
    assert all(set(r) <= {2, 3} for r in proposed.values())            # broker 7 is not registered
    assert [len(r) for r in proposed.values()] == [1, 2, 2, 2] and all(len(set(r)) == len(r) for r in proposed.values())
    assert {t: data(cluster, f"/brokers/topics/{t}") for t in ("orders", "audit")} == before
    assert data(cluster, REASSIGN) is None


def test_generate_with_racks(cluster, tmp_path):
    for broker, rack in ((4, "r1"), (5, "r2"), (6, "r1"), (7, "r2")):
        cluster.register_broker(broker, "h", 9092, ["PLAINTEXT://h:9092"], rack=rack)
    move = write(tmp_path, "move.json", {"topics": [{"topic": "orders"}], "version": 1})
    status, out, _ = reassign(cluster, "--generate", "--topics-to-move-json-file", move, "--broker-list", "4,5,6,7")
    assert status == 0
    racks = {4: "r1", 5: "r2", 6: "r1", 7: "r2"}
    for entry in json.loads(out.splitlines()[5])["partitions"]:
        assert {racks[b] for b in entry["replicas"]} == {"r1", "r2"}
    status, out, err = reassign(cluster, "--generate", "--topics-to-move-json-file", move, "--broker-list", "3,4,5")
    assert (status, out) == (1, "") and err == (
        "Partitions reassignment failed due to Not all brokers have rack information. Add --disable-rack-aware in "
        "command line to make replica assignment without rack information.\n")
    status, out, _ = reassign(cluster, "--generate", "--topics-to-move-json-file", move, "--broker-list", "3,4,5",
                              "--disable-rack-aware")
    assert status == 0 and all(set(e["replicas"]) <= {3, 4, 5} for e in json.loads(out.splitlines()[5])["partitions"])


@pytest.mark.parametrize("argv_file, message", [
    (("--broker-list", "2,2", {"topics": [{"topic": "orders"}]}), "Broker list contains duplicate entries: 2"),
    (("--broker-list", "2,3", {"topics": [{"topic": "orders"}, {"topic": "orders"}]}),
     "List of topics to reassign contains duplicate entries: orders"),
    (("--broker-list", "2", {"topics": [{"topic": "orders"}]}), "replication factor: 2 larger than available brokers: 1"),
])
def test_generate_refusals(cluster, tmp_path, argv_file, message):
    option, brokers, document = argv_file
    status, out, err = reassign(cluster, "--generate", "--topics-to-move-json-file", write(tmp_path, "m.json", document),
                                option, brokers)
    assert (status, out, err) == (1, "", f"Partitions reassignment failed due to {message}\n")


def test_execute_then_verify(cluster, tmp_path):
    target = write(tmp_path, "target.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 1, "replicas": [3, 1]}, {"topic": "audit", "partition": 0, "replicas": [2, 3]},
        {"topic": "orders", "partition": 8, "replicas": [1]}]})
    current = ('{"version":1,"partitions":[{"topic":"audit","partition":0,"replicas":[1]},{"topic":"orders",'
               '"partition":0,"replicas":[1,2]},{"topic":"orders","partition":1,"replicas":[2,3]},{"topic":"orders",'
               '"partition":2,"replicas":[3,1]}]}')
    written = ('{"version":1,"partitions":[{"topic":"audit","partition":0,"replicas":[2,3]},{"topic":"orders",'
               '"partition":1,"replicas":[3,1]}]}')
    assert reassign(cluster, "--execute", "--reassignment-json-file", target) == (
        0, f"Current partition replica assignment\n\n{current}\n\n"
           "Save this to use as the --reassignment-json-file option during rollback\n"
           'Successfully started reassignment of partitions {"version":1,"partitions":[{"topic":"audit","partition":0,'
           '"replicas":[2,3]},{"topic":"orders","partition":1,"replicas":[3,1]},{"topic":"orders","partition":8,'
           '"replicas":[1]}]}\n',
        "Skipping reassignment of partition [orders,8] since it doesn't exist\n")
    assert data(cluster, REASSIGN) == written

    status, out, err = reassign(cluster, "--execute", "--reassignment-json-file", target)
    assert status == 1 and err.splitlines()[-1] == (
        "Partitions reassignment failed due to Partition reassignment currently in progress for "
        "Map([audit,0] -> List(2, 3), [orders,1] -> List(3, 1)). Aborting operation")
    assert data(cluster, REASSIGN) == written

    assert reassign(cluster, "--verify", "--reassignment-json-file", target) == (0, (
        "Status of partition reassignment:\n"
        "ERROR: Assigned replicas () don't match the list of replicas for reassignment (1) for partition [orders,8]\n"
        "Reassignment of partition [orders,1] is still in progress\n"
        "Reassignment of partition [audit,0] is still in progress\n"
        "Reassignment of partition [orders,8] failed\n"), "")

    # the controller's last steps: the new assignment, then the partition leaves the znode
    cluster.create_topic_assignment("orders", {0: [1, 2], 1: [3, 1], 2: [3, 1]}, update=True)
    cluster.create_topic_assignment("audit", {0: [3, 2]}, update=True)
    cluster.update_partition_reassignment_data({})
    assert reassign(cluster, "--verify", "--reassignment-json-file", target) == (0, (
        "Status of partition reassignment:\n"
        "ERROR: Assigned replicas (3,2) don't match the list of replicas for reassignment (2,3) for partition [audit,0]\n"
        "ERROR: Assigned replicas () don't match the list of replicas for reassignment (1) for partition [orders,8]\n"
        "Reassignment of partition [orders,1] completed successfully\n"
        "Reassignment of partition [audit,0] failed\n"
        "Reassignment of partition [orders,8] failed\n"), "")


def test_execute_can_raise_the_replication_factor(cluster, tmp_path):
    target = write(tmp_path, "rf.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": p, "replicas": [1, 2, 3]} for p in range(3)]})
    assert reassign(cluster, "--execute", "--reassignment-json-file", target)[0] == 0
    assert cluster.get_partitions_being_reassigned() == {("orders", p): [1, 2, 3] for p in range(3)}


@pytest.mark.parametrize("document, message", [
    ({"version": 1, "partitions": []}, "Partition reassignment data file is empty"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2]},
                                   {"topic": "orders", "partition": 0, "replicas": [3]}]},
     "Partition reassignment contains duplicate topic partitions: [orders,0]"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2, 1]},
                                   {"topic": "orders", "partition": 1, "replicas": [3, 3]}]},
     "Partition replica lists may not contain duplicate entries: [orders,0] contains multiple entries for 1. "
     "[orders,1] contains multiple entries for 3"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2]},
                                   {"topic": "orders", "partition": 1, "replicas": []}]},
     "Partition replica list cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "orders", "replicas": [1]}]},
     'every entry of "partitions" needs a "topic", a "partition" and "replicas"'),
])
def test_execute_refuses_bad_files_and_writes_nothing(cluster, tmp_path, document, message):
    status, out, err = reassign(cluster, "--execute", "--reassignment-json-file", write(tmp_path, "r.json", document))
    assert (status, out, err) == (1, "", f"Partitions reassignment failed due to {message}\n")
    assert data(cluster, REASSIGN) is None


def test_execute_with_only_missing_partitions_fails(cluster, tmp_path):
    target = write(tmp_path, "r.json", {"version": 1, "partitions": [{"topic": "gone", "partition": 0, "replicas": [1]}]})
    status, out, err = reassign(cluster, "--execute", "--reassignment-json-file", target)
    assert status == 1 and out.endswith("Save this to use as the --reassignment-json-file option during rollback\n")
    assert err == ("Skipping reassignment of partition [gone,0] since topic gone doesn't exist\n"
                   "Failed to reassign partitions Map([gone,0] -> List(1))\n")
    assert data(cluster, REASSIGN) is None


def test_throttle_is_written_as_0_10_1_did_and_removed_by_verify(cluster, tmp_path):
    target = write(tmp_path, "t.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [2, 3]}, {"topic": "orders", "partition": 1, "replicas": [2, 3]}]})
    changes = len(cluster.get_children_parent_may_not_exist("/config/changes"))
    status, out, err = reassign(cluster, "--execute", "--reassignment-json-file", target, "--throttle", "1000")
    assert (status, err) == (0, "")
    assert out.splitlines()[5:] == [
        "Warning: You must run Verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed. You can also alter the throttle by rerunning the Execute command passing a new value.",
        "The throttle limit was set to 1000 B/s",
        'Successfully started reassignment of partitions {"version":1,"partitions":[{"topic":"orders","partition":0,'
        '"replicas":[2,3]},{"topic":"orders","partition":1,"replicas":[2,3]}]}']
    assert cluster.fetch_entity_config("topics", "orders") == {
        "leader.replication.throttled.replicas": "0:1,0:2", "follower.replication.throttled.replicas": "0:3"}
    for broker in (1, 2, 3):
        assert cluster.fetch_entity_config("brokers", str(broker)) == {
            "leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "1000"}
    assert len(cluster.get_children_parent_may_not_exist("/config/changes")) == changes + 4

    assert reassign(cluster, "--execute", "--reassignment-json-file", target, "--throttle", "5000") == (
        0, "There is an existing assignment running.\nThe throttle limit was set to 5000 B/s\n", "")
    assert cluster.fetch_entity_config("brokers", "2")["leader.replication.throttled.rate"] == "5000"

    assert reassign(cluster, "--verify", "--reassignment-json-file", target)[1].splitlines()[-1].endswith(
        "is still in progress")
    assert cluster.fetch_entity_config("brokers", "2") != {}
    cluster.create_topic_assignment("orders", {0: [2, 3], 1: [2, 3], 2: [3, 1]}, update=True)
    cluster.update_partition_reassignment_data({})
    assert reassign(cluster, "--verify", "--reassignment-json-file", target) == (0, (
        "Status of partition reassignment:\n"
        "Reassignment of partition [orders,0] completed successfully\n"
        "Reassignment of partition [orders,1] completed successfully\n"
        "Throttle was removed.\n"), "")
    assert cluster.fetch_entity_config("topics", "orders") == {}
    assert all(cluster.fetch_entity_config("brokers", str(b)) == {} for b in (1, 2, 3))
