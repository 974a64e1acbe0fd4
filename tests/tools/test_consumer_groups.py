"""`kafka-edu consumer-groups`: usage errors (exit 2, one line), and --list / --describe /
--reset-offsets / --delete against a scripted coordinator built on tests/scripted_broker.py (every
state and edge on demand), then against a kafka-edu broker coordinating a live confluent-kafka group.
(--delete against a broker process and kafka-python: tests/compat/test_consumer_groups_delete.py.)"""
from __future__ import annotations

import time

import pytest
from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.consumer_protocol import Assignment, ConsumerProtocol, Subscription
from kafka_edu.tools.cli import run_captured

TP = TopicPartition


def run(*argv):
    return run_captured(["consumer-groups", *argv])


B = ["--bootstrap-server", "127.0.0.1:9"]


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: --bootstrap-server"),
    (B, "one of the arguments --list --describe --delete --reset-offsets is required"),
    (B + ["--list", "--describe"], "not allowed with argument"),
    (B + ["--describe"], "--describe needs --group"),
    (B + ["--delete"], "--delete needs --group"),
    (B + ["--delete", "--group", "g", "--to-earliest"], "--to-earliest is only valid with --reset-offsets"),
    (B + ["--describe", "--group", "g", "--group", "h"], "--describe takes a single --group"),
    (B + ["--reset-offsets", "--group", "g", "--group", "h", "--to-earliest", "--topic", "t"],
     "--reset-offsets takes a single --group"),
    (B + ["--list", "--group", "g"], "--group is not valid with --list"),
    (B + ["--describe", "--group", "g", "--execute"], "--execute is only valid with --reset-offsets"),
    (B + ["--list", "--topic", "t"], "--topic is only valid with --reset-offsets"),
    (B + ["--reset-offsets", "--group", "g", "--topic", "t"], "needs one of --to-earliest"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest"], "needs either --topic or --all-topics"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t", "--all-topics"],
     "needs either --topic or --all-topics"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--to-latest", "--topic", "t"], "not allowed with"),
    (B + ["--reset-offsets", "--group", "g", "--to-offset", "ten", "--topic", "t"], "invalid int value"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t:"], "bad --topic 't:'"),
    (B + ["--reset-offsets", "--group", "g", "--to-earliest", "--topic", "t:1,x"], "partitions must be integers"),
    (B + ["--reset-offsets", "--group", "g", "--to-latest", "--topic", "t", "--execute", "--dry-run"],
     "not allowed with"),
    (B + ["--list", "--timeout", "0"], "--timeout must be positive"),
    (["--bootstrap-server", "nohost", "--list"], "Invalid url in bootstrap.servers"),
])
def test_usage_errors_are_one_line_with_status_2(argv, message):
    status, out, err = run(*argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err and err.startswith("kafka-edu consumer-groups: error:")


def test_unreachable_cluster_fails_with_status_1():
    status, out, err = run("--bootstrap-server", "127.0.0.1:9", "--list", "--timeout", "300")
    assert status == 1 and out == "" and err.count("\n") == 1 and err.startswith("Error: ")


# --- a scripted coordinator ------------------------------------------------------------------

ORDERS = [TP("orders", p) for p in range(3)]
AUDIT = TP("audit", 0)


class Coordinator:
    """One scripted broker holding topics, log bounds, groups and committed offsets."""

    def __init__(self):
        self.log_start = {ORDERS[0]: 5, ORDERS[1]: 0, ORDERS[2]: 0, AUDIT: 0}
        self.log_end = {ORDERS[0]: 120, ORDERS[1]: 80, ORDERS[2]: 45, AUDIT: 7}
        self.groups = {
            "billing": ("Stable", "consumer", "range", [
                ("m-1", "billing-1", "/10.0.0.5", [ORDERS[1], ORDERS[0]]),
                ("m-2", "billing-2", "/10.0.0.6", [ORDERS[2]])]),
            "reports": ("Empty", "consumer", "", []),
            "moving": ("PreparingRebalance", "consumer", "", []),
            "sink": ("Stable", "connect", "default", []),
        }
        self.offsets = {"billing": {ORDERS[0]: 100, ORDERS[1]: 80, AUDIT: 3}, "reports": {ORDERS[0]: 10}}
        self.broker = ScriptedBroker({
            ApiKeys.LIST_OFFSETS: self.list_offsets, ApiKeys.FIND_COORDINATOR: self.find_coordinator,
            ApiKeys.LIST_GROUPS: self.list_groups, ApiKeys.DESCRIBE_GROUPS: self.describe_groups,
            ApiKeys.OFFSET_FETCH: self.offset_fetch, ApiKeys.OFFSET_COMMIT: self.offset_commit,
            ApiKeys.DELETE_GROUPS: self.delete_groups}, node_id=0)
        self.broker.handlers[ApiKeys.METADATA] = metadata_answer([self.broker], {"orders": 3, "audit": 1})

    @property
    def bootstrap(self):
        return "{}:{}".format(*self.broker.address)

    def list_offsets(self, header, body):
        bounds = self.log_start if body["topics"][0]["partitions"][0]["timestamp"] == -2 else self.log_end
        return {"topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
             "offset": bounds[TP(t["name"], p["partition_index"])]} for p in t["partitions"]]}
            for t in body["topics"]]}

    def find_coordinator(self, header, body):
        host, port = self.broker.address
        return {"error_code": 0, "node_id": 0, "host": host, "port": port}

    def list_groups(self, header, body):
        return {"error_code": 0, "groups": [{"group_id": g, "protocol_type": v[1]}
                                            for g, v in sorted(self.groups.items())]}

    def describe_groups(self, header, body):
        described = []
        for group_id in body["groups"]:
            state, protocol_type, protocol, members = self.groups.get(group_id, ("Dead", "", "", []))
            described.append({"error_code": 0, "group_id": group_id, "group_state": state,
                              "protocol_type": protocol_type, "protocol_data": protocol, "members": [
                {"member_id": m, "client_id": c, "client_host": h,
                 "member_metadata": ConsumerProtocol.serialize_subscription(Subscription(["orders"])),
                 "member_assignment": ConsumerProtocol.serialize_assignment(Assignment(tps))}
                for m, c, h, tps in members]})
        return {"groups": described}

    def offset_fetch(self, header, body):
        committed = self.offsets.get(body["group_id"], {})
        return {"error_code": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": tp.partition, "committed_offset": o, "metadata": "", "error_code": 0}
            for tp, o in sorted(committed.items()) if tp.topic == t]} for t in sorted({tp.topic for tp in committed})]}

    def offset_commit(self, header, body):
        committed = self.offsets.setdefault(body["group_id"], {})
        for t in body["topics"]:
            for p in t["partitions"]:
                committed[TP(t["name"], p["partition_index"])] = p["committed_offset"]
        return {"topics": [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": 0} for p in t["partitions"]]}
            for t in body["topics"]]}

    def delete_groups(self, header, body):
        results = []
        for group_id in body["groups_names"]:
            state, _, _, members = self.groups.get(group_id, ("Dead", "", "", []))
            if members or state in ("PreparingRebalance", "AwaitingSync"):
                error = 68                                   # NON_EMPTY_GROUP
            elif group_id in self.groups or group_id in self.offsets:
                self.groups.pop(group_id, None)
                self.offsets.pop(group_id, None)
                error = 0
            else:
                error = 69                                   # GROUP_ID_NOT_FOUND
            results.append({"group_id": group_id, "error_code": error})
        return {"throttle_time_ms": 0, "results": results}

    def commits(self):
        return [body for api, _, body in self.broker.requests if api == ApiKeys.OFFSET_COMMIT]


@pytest.fixture
def coordinator():
    c = Coordinator()
    yield c
    c.broker.close()


def test_list(coordinator):
    status, out, err = run("--bootstrap-server", coordinator.bootstrap, "--list")
    assert (status, out, err) == (0, "billing\nmoving\nreports\n", "")


def row(*cells):
    return "{:<30} {:<30} {:<10} {:<15} {:<15} {:<15} {}".format(*cells).rstrip() + "\n"


HEADER = row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER")


def test_describe_a_stable_group(coordinator):
    status, out, err = run("--bootstrap-server", coordinator.bootstrap, "--describe", "--group", "billing")
    assert status == 0 and err == ""
    assert out == (HEADER
                   + row("billing", "orders", 0, 100, 120, 20, "billing-1_/10.0.0.5")
                   + row("billing", "orders", 1, 80, 80, 0, "billing-1_/10.0.0.5")
                   + row("billing", "orders", 2, "unknown", 45, "unknown", "billing-2_/10.0.0.6")
                   + row("billing", "audit", 0, 3, 7, 4, "none"))


def test_describe_other_states(coordinator):
    status, out, _ = run("--bootstrap-server", coordinator.bootstrap, "--describe", "--group", "reports")
    assert status == 0 and out == ("Consumer group `reports` has no active members.\n" + HEADER
                                   + row("reports", "orders", 0, 10, 120, 110, "none"))
    for group in ("moving", "nobody"):
        status, out, _ = run("--bootstrap-server", coordinator.bootstrap, "--describe", "--group", group)
        assert (status, out) == (0, f"Consumer group `{group}` does not exist or is rebalancing.\n")
    status, out, err = run("--bootstrap-server", coordinator.bootstrap, "--describe", "--group", "sink")
    assert status == 1 and out == "" and "protocol type 'connect' is not a consumer group" in err


def reset(coordinator, group, *extra):
    return run("--bootstrap-server", coordinator.bootstrap, "--reset-offsets", "--group", group, *extra)


def plan(*rows):
    lines = ["{:<30} {:<30} {:<10} {}".format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    lines += ["{:<30} {:<30} {:<10} {}".format(*r) for r in rows]
    return "\n".join(lines) + "\n"


def test_reset_dry_runs_clamp_and_commit_nothing(coordinator):
    status, out, err = reset(coordinator, "reports", "--topic", "orders", "--to-earliest")
    assert status == 0 and out == plan(("reports", "orders", 0, 5), ("reports", "orders", 1, 0),
                                       ("reports", "orders", 2, 0))
    assert "dry run" in err
    status, out, _ = reset(coordinator, "reports", "--topic", "orders:2,0", "--to-offset", "100", "--dry-run")
    assert status == 0 and out == plan(("reports", "orders", 0, 100), ("reports", "orders", 2, 45))
    status, out, _ = reset(coordinator, "reports", "--all-topics", "--shift-by", "-7")
    assert status == 0 and out == plan(("reports", "orders", 0, 5))
    status, out, _ = reset(coordinator, "nobody", "--topic", "audit", "--to-latest")      # a Dead group is inactive
    assert status == 0 and out == plan(("nobody", "audit", 0, 7))
    assert coordinator.commits() == []


def test_reset_execute_commits_for_an_inactive_group(coordinator):
    status, out, _ = reset(coordinator, "reports", "--topic", "orders", "--topic", "audit", "--to-latest", "--execute")
    assert status == 0 and out == plan(("reports", "orders", 0, 120), ("reports", "orders", 1, 80),
                                       ("reports", "orders", 2, 45), ("reports", "audit", 0, 7))
    (commit,) = coordinator.commits()
    assert commit["generation_id_or_member_epoch"] == -1 and commit["member_id"] == ""
    assert coordinator.offsets["reports"] == {ORDERS[0]: 120, ORDERS[1]: 80, ORDERS[2]: 45, AUDIT: 7}
    status, out, _ = run("--bootstrap-server", coordinator.bootstrap, "--describe", "--group", "reports")
    assert row("reports", "orders", 0, 120, 120, 0, "none") in out


def test_reset_refusals(coordinator):
    status, out, err = reset(coordinator, "billing", "--topic", "orders", "--to-earliest", "--execute")
    assert status == 1 and out == "" and err == (
        "Error: Assignments can only be reset if the group 'billing' is inactive, but the current state is Stable.\n")
    status, _, err = reset(coordinator, "reports", "--topic", "orders:7", "--to-earliest")
    assert status == 1 and "orders-7 does not exist" in err
    status, _, err = reset(coordinator, "reports", "--topic", "missing", "--to-earliest")
    assert status == 1 and "topic 'missing' does not exist" in err
    status, _, err = reset(coordinator, "reports", "--topic", "orders:1", "--shift-by", "3")
    assert status == 1 and "--shift-by needs a committed offset" in err
    assert coordinator.commits() == []


def delete(coordinator, *groups):
    return run("--bootstrap-server", coordinator.bootstrap, "--delete", *[a for g in groups for a in ("--group", g)])


def test_delete_inactive_groups(coordinator):
    assert delete(coordinator, "reports") == (0, "Deletion of requested consumer groups ('reports') was successful.\n", "")
    assert "reports" not in coordinator.offsets and "reports" not in coordinator.groups
    coordinator.offsets["orphan"] = {ORDERS[1]: 2}       # offsets of a group nobody is in (0.10's Dead group)
    coordinator.groups["idle"] = ("Empty", "consumer", "", [])
    assert delete(coordinator, "orphan", "idle") == (
        0, "Deletion of requested consumer groups ('orphan', 'idle') was successful.\n", "")
    status, out, _ = run("--bootstrap-server", coordinator.bootstrap, "--list")
    assert (status, out) == (0, "billing\nmoving\n")
    deletes = [body["groups_names"] for api, version, body in coordinator.broker.requests
               if api == ApiKeys.DELETE_GROUPS]
    assert deletes == [["reports"], ["orphan"], ["idle"]]       # one request per group, to its coordinator


def test_delete_reports_each_failure_and_what_was_deleted(coordinator):
    status, out, err = delete(coordinator, "billing", "reports", "nobody", "moving")
    assert status == 1
    assert err == ("Error: Deletion of some consumer groups failed:\n"
                   "* Group 'billing' could not be deleted due to: NON_EMPTY_GROUP (68): The group still has members.\n"
                   "* Group 'nobody' could not be deleted due to: GROUP_ID_NOT_FOUND (69): The group does not exist.\n"
                   "* Group 'moving' could not be deleted due to: NON_EMPTY_GROUP (68): The group still has members.\n")
    assert out == "These consumer groups were deleted successfully: 'reports'\n"
    assert "billing" in coordinator.groups and "reports" not in coordinator.offsets
    status, out, err = delete(coordinator, "nobody")
    assert status == 1 and out == "" and err.count("\n") == 2


# --- a kafka-edu broker and a live confluent-kafka group ------------------------------------------

class LiveGroup:
    """An in-process broker; topic `events` (3 partitions of 10 records); group `dashboards` with one
    confluent-kafka member `dash-1` that committed 4 on partition 0 and 10 on partition 1."""

    def __init__(self, log_dir):
        from confluent_kafka import Consumer, Producer, TopicPartition

        from kafka_edu.server.kafka_config import KafkaConfig
        from kafka_edu.server.kafka_server import KafkaServer
        from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
        self.server = KafkaServer(KafkaConfig({
            "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir), "num.partitions": 3,
            "offsets.topic.num.partitions": 5, "offsets.topic.replication.factor": 1, "log.cleaner.enable": False}),
            embedded_zookeeper=EmbeddedZooKeeper())
        self.server.startup()
        self.bootstrap = f"127.0.0.1:{self.server.bound_port()}"
        producer = Producer({"bootstrap.servers": self.bootstrap})
        for p in range(3):
            for i in range(10):
                producer.produce("events", value=b"e%d" % i, partition=p)
        assert producer.flush(20) == 0
        # librdkafka's default session.timeout.ms (45 s) is above 0.10's group.max.session.timeout.ms (30 s)
        self.consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "dashboards",
                                  "client.id": "dash-1", "enable.auto.commit": False, "session.timeout.ms": 10_000})
        self.consumer.subscribe(["events"])
        deadline = time.monotonic() + 30
        while len(self.consumer.assignment()) < 3:
            assert time.monotonic() < deadline, "no assignment"
            self.consumer.poll(0.1)
        self.consumer.commit(offsets=[TopicPartition("events", 0, 4), TopicPartition("events", 1, 10)],
                             asynchronous=False)

    def close(self):
        self.consumer.close()
        self.server.shutdown()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    group = LiveGroup(tmp_path_factory.mktemp("live"))
    yield group
    group.close()


def test_real_broker_list(live):
    assert run("--bootstrap-server", live.bootstrap, "--list") == (0, "dashboards\n", "")


def test_real_broker_describe_shows_the_lag_of_a_live_group(live):
    status, out, err = run("--bootstrap-server", live.bootstrap, "--describe", "--group", "dashboards")
    owner = "dash-1_/127.0.0.1"
    assert (status, err) == (0, "")
    assert out == (HEADER + row("dashboards", "events", 0, 4, 10, 6, owner) + row("dashboards", "events", 1, 10, 10, 0, owner)
                   + row("dashboards", "events", 2, "unknown", 10, "unknown", owner))


def test_real_broker_reset_offsets_of_a_group_once_it_is_empty(live):
    status, _, err = run("--bootstrap-server", live.bootstrap, "--reset-offsets", "--group", "dashboards",
                         "--topic", "events", "--to-earliest", "--execute")
    assert status == 1 and "the current state is Stable" in err
    live.consumer.close()                                # leaves the group: no members any more
    reset = ("--bootstrap-server", live.bootstrap, "--reset-offsets", "--group", "dashboards", "--topic", "events")
    status, out, err = run(*reset, "--to-offset", "2")
    assert status == 0 and out == plan(*[("dashboards", "events", p, 2) for p in range(3)]) and "dry run" in err
    status, out, _ = run("--bootstrap-server", live.bootstrap, "--describe", "--group", "dashboards")
    assert out == ("Consumer group `dashboards` has no active members.\n" + HEADER
                   + row("dashboards", "events", 0, 4, 10, 6, "none") + row("dashboards", "events", 1, 10, 10, 0, "none"))
    status, out, err = run(*reset, "--to-offset", "2", "--execute")
    assert (status, err) == (0, "")
    status, out, _ = run("--bootstrap-server", live.bootstrap, "--describe", "--group", "dashboards")
    assert out == ("Consumer group `dashboards` has no active members.\n" + HEADER
                   + "".join(row("dashboards", "events", p, 2, 10, 8, "none") for p in range(3)))
