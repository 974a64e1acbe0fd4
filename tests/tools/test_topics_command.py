"""`kafka-edu topics` against a kafka-edu broker started as its own process: usage errors (exit 2,
one line), the create/list/describe/alter/delete round trip in 0.10's output formats, the errors the
cluster answers (exit 1, one line), and what real clients (kafka-python, kcat) see of it."""
from __future__ import annotations

import subprocess
import uuid

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess
from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.tools.cli import run_captured

ERROR = "Error while executing topic command : "


def run(*argv):
    return run_captured(["topics", *argv])


B = ["--bootstrap-server", "127.0.0.1:9"]


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: --bootstrap-server"),
    (B, "one of the arguments --create --list --describe --alter --delete is required"),
    (B + ["--list", "--describe"], "not allowed with argument"),
    (B + ["--create", "--partitions", "1", "--replication-factor", "1"], "--create needs --topic"),
    (B + ["--create", "--topic", "t"], "--create needs --partitions and --replication-factor"),
    (B + ["--create", "--topic", "t", "--partitions", "1"], "--create needs --partitions and --replication-factor"),
    (B + ["--create", "--topic", "t", "--partitions", "1", "--replica-assignment", "0"],
     "--replica-assignment cannot be used with --partitions"),
    (B + ["--create", "--topic", "t", "--replica-assignment", "0:a"], "bad --replica-assignment '0:a'"),
    (B + ["--create", "--topic", "t", "--partitions", "x", "--replication-factor", "1"], "invalid int value"),
    (B + ["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", "--config", "a"],
     "expected KEY=VALUE"),
    (B + ["--alter", "--topic", "t"], "--alter needs --partitions"),
    (B + ["--alter", "--partitions", "3"], "--alter needs --topic"),
    (B + ["--delete"], "--delete needs --topic"),
    (B + ["--describe", "--partitions", "3"], "--partitions is only valid with --create or --alter"),
    (B + ["--alter", "--topic", "t", "--partitions", "3", "--replication-factor", "2"],
     "--replication-factor is only valid with --create"),
    (B + ["--alter", "--topic", "t", "--partitions", "3", "--config", "a=b"], "--config is only valid with --create"),
    (B + ["--delete", "--topic", "t", "--if-not-exists"], "--if-not-exists is only valid with --create"),
    (B + ["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", "--if-exists"],
     "--if-exists is only valid with --alter or --delete"),
    (B + ["--list", "--unavailable-partitions"], "--unavailable-partitions is only valid with --describe"),
    (B + ["--describe", "--unavailable-partitions", "--under-replicated-partitions"], "not allowed with"),
    (B + ["--describe", "--topic", "a(b"], "--topic 'a(b' is not a valid regular expression"),
    (B + ["--list", "--timeout", "0"], "--timeout must be positive"),
    (["--bootstrap-server", "nohost", "--list"], "Invalid url in bootstrap.servers"),
])
def test_usage_errors_are_one_line_with_status_2(argv, message):
    status, out, err = run(*argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err and err.startswith("kafka-edu topics: error:"), err


def test_unreachable_cluster_fails_with_status_1():
    status, out, err = run("--bootstrap-server", "127.0.0.1:9", "--list", "--timeout", "300")
    assert status == 1 and out == "" and err.count("\n") == 1 and err.startswith(ERROR)


# --- a broker process -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("topics"), {"offsets.topic.num.partitions": "2"}).start()
    yield proc
    assert proc.stop() == 0, proc.output()


def on(broker, *argv):
    return run("--bootstrap-server", broker.bootstrap, *argv)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def partition_line(topic, partition, leader=0, replicas="0", isr="0"):
    return f"\tTopic: {topic}\tPartition: {partition}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}\n"


def test_create_list_describe_alter_delete_round_trip(broker):
    topic = unique("orders")
    assert on(broker, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=60000", "--config", "cleanup.policy=compact") == (
        0, f'Created topic "{topic}".\n', "")
    status, out, _ = on(broker, "--list")
    assert status == 0 and topic in out.splitlines() and out.splitlines() == sorted(out.splitlines())
    assert on(broker, "--describe", "--topic", topic) == (0, (
        f"Topic:{topic}\tPartitionCount:3\tReplicationFactor:1\tConfigs:cleanup.policy=compact,retention.ms=60000\n"
        + "".join(partition_line(topic, p) for p in range(3))), "")

    status, out, err = on(broker, "--alter", "--topic", topic, "--partitions", "5")
    assert (status, err) == (0, "") and out.endswith("Adding partitions succeeded!\n")
    assert out.startswith("WARNING: If partitions are increased")
    status, out, _ = on(broker, "--describe", "--topic", topic)
    assert status == 0 and out.count(f"\tTopic: {topic}\t") == 5 and "PartitionCount:5\t" in out
    assert partition_line(topic, 4) in out

    assert on(broker, "--delete", "--topic", topic) == (0, f"Topic {topic} is marked for deletion.\n", "")
    status, out, _ = on(broker, "--list")
    assert status == 0 and topic not in out.splitlines()


def test_create_with_a_replica_assignment_and_a_topic_regex(broker):
    stem = unique("fam")
    for suffix in ("a", "b"):
        assert on(broker, "--create", "--topic", f"{stem}-{suffix}", "--replica-assignment", "0,0")[0] == 0
    status, out, _ = on(broker, "--describe", "--topic", f"{stem}-.*")
    assert status == 0 and out == "".join(
        f"Topic:{stem}-{s}\tPartitionCount:2\tReplicationFactor:1\tConfigs:\n"
        + partition_line(f"{stem}-{s}", 0) + partition_line(f"{stem}-{s}", 1) for s in ("a", "b"))
    assert on(broker, "--list", "--topic", f"{stem}-b,{stem}-a") == (0, f"{stem}-a\n{stem}-b\n", "")
    status, out, _ = on(broker, "--describe", "--topics-with-overrides", "--topic", f"{stem}-.*")
    assert (status, out) == (0, "")
    assert on(broker, "--describe", "--under-replicated-partitions", "--topic", f"{stem}-.*") == (0, "", "")
    assert on(broker, "--describe", "--unavailable-partitions", "--topic", f"{stem}-.*") == (0, "", "")
    status, out, _ = on(broker, "--delete", "--topic", f"{stem}-.*")
    assert status == 0 and out == f"Topic {stem}-a is marked for deletion.\nTopic {stem}-b is marked for deletion.\n"


def test_create_errors(broker):
    topic = unique("dup")
    create = ["--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"]
    assert on(broker, *create)[0] == 0
    status, out, err = on(broker, *create)
    assert (status, out) == (1, "") and err == f"{ERROR}TOPIC_ALREADY_EXISTS (36): Topic '{topic}' already exists.\n"
    assert on(broker, *create, "--if-not-exists") == (0, "", "")
    # AdminUtils' wording is 0.10's ("replication factor: 2 larger ...") or Kafka 1.0's ("Replication factor: 2 ... 1.")
    cases = [
        (["--partitions", "1", "--replication-factor", "2"], "INVALID_REPLICATION_FACTOR (38): ",
         "eplication factor: 2 larger than available brokers: 1"),
        (["--partitions", "0", "--replication-factor", "1"], "INVALID_PARTITIONS (37): ",
         "umber of partitions must be larger than 0"),
        (["--partitions", "1", "--replication-factor", "0"], "INVALID_REPLICATION_FACTOR (38): ",
         "eplication factor must be larger than 0"),
        (["--partitions", "1", "--replication-factor", "1", "--config", "retention.ms=soon"], "INVALID_CONFIG (40)", ""),
        (["--replica-assignment", "0,7"], "INVALID_REPLICA_ASSIGNMENT (39): Unknown broker(s) in replica assignment", ""),
    ]
    fresh = unique("never")
    for extra, message, wording in cases:
        status, out, err = on(broker, "--create", "--topic", fresh, *extra)
        assert status == 1 and out == "" and err.startswith(ERROR + message) and err.count("\n") == 1, err
        assert wording in err, err
    status, _, err = on(broker, "--create", "--topic", "bad/name", "--partitions", "1", "--replication-factor", "1")
    assert status == 1 and "INVALID_TOPIC_EXCEPTION (17)" in err
    status, _, err = on(broker, "--create", "--topic", "with_underscore", "--partitions", "1", "--replication-factor", "1")
    assert status == 0 and err.startswith("WARNING: Due to limitations in metric names")
    assert fresh not in on(broker, "--list")[1].splitlines()


def test_unknown_topics(broker):
    missing = unique("missing")
    for argv in (["--describe", "--topic", missing], ["--alter", "--topic", missing, "--partitions", "3"],
                 ["--delete", "--topic", missing]):
        assert on(broker, *argv) == (1, "", f"{ERROR}Topic '{missing}' does not exist.\n")
    assert on(broker, "--alter", "--topic", missing, "--partitions", "3", "--if-exists") == (0, "", "")
    assert on(broker, "--delete", "--topic", missing, "--if-exists") == (0, "", "")
    assert on(broker, "--list", "--topic", missing) == (0, "", "")


def test_alter_errors_and_internal_topics(broker):
    from kafka_edu.clients.admin import ClusterAdmin
    topic = unique("grow")
    assert on(broker, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1")[0] == 0
    for count, message in (("2", "Topic currently has 3 partitions, which is higher than the requested 2."),
                           ("3", "Topic already has 3 partitions.")):
        status, _, err = on(broker, "--alter", "--topic", topic, "--partitions", count)
        assert status == 1 and err == f"{ERROR}INVALID_PARTITIONS (37): {message}\n"
    status, _, err = on(broker, "--alter", "--topic", topic, "--partitions", "5", "--replica-assignment", "0")
    assert status == 1 and "INVALID_REPLICA_ASSIGNMENT (39)" in err
    assert on(broker, "--alter", "--topic", topic, "--partitions", "5", "--replica-assignment", "0,0")[0] == 0
    assert "PartitionCount:5\t" in on(broker, "--describe", "--topic", topic)[1]

    with ClusterAdmin(broker.bootstrap) as admin:
        admin.find_coordinator("any-group")          # creates __consumer_offsets
    status, out, _ = on(broker, "--describe", "--topic", "__consumer_offsets")
    assert status == 0 and out.startswith(
        "Topic:__consumer_offsets\tPartitionCount:2\tReplicationFactor:1\tConfigs:cleanup.policy=compact,")
    assert on(broker, "--alter", "--topic", "__consumer_offsets", "--partitions", "3") == (
        1, "", f"{ERROR}The number of partitions for the offsets topic cannot be changed.\n")
    assert on(broker, "--delete", "--topic", "__consumer_offsets") == (1, "", (
        f"{ERROR}Topic __consumer_offsets is a kafka internal topic and is not allowed to be marked for deletion.\n"))


def test_deletion_disabled_is_reported(tmp_path):
    from kafka_edu.server.kafka_config import KafkaConfig
    from kafka_edu.server.kafka_server import KafkaServer
    from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
    server = KafkaServer(KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}),
                         embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    try:
        b = ["--bootstrap-server", f"127.0.0.1:{server.bound_port()}"]
        assert run(*b, "--create", "--topic", "keep", "--partitions", "1", "--replication-factor", "1")[0] == 0
        assert run(*b, "--delete", "--topic", "keep") == (1, "", f"{ERROR}TOPIC_DELETION_DISABLED (73): topic 'keep'\n")
        assert run(*b, "--list") == (0, "keep\n", "")
    finally:
        server.shutdown()


# --- a scripted broker: what a single live broker cannot show -------------------------------------

def test_describe_shows_replicas_on_brokers_that_are_down():
    """Broker 0 is up; broker 1, which holds a replica of both partitions and leads partition 1, is down."""
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {"t": 2}, placements={
        ("t", 0): (0, [0, 1], [0]), ("t", 1): (-1, [1], [])})
    broker.handlers[ApiKeys.DESCRIBE_CONFIGS] = lambda h, b: {"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": r.resource_name, "configs": [
            {"name": "retention.ms", "value": "1000", "read_only": False, "config_source": 1, "is_sensitive": False,
             "synonyms": []},
            {"name": "segment.bytes", "value": "2048", "read_only": False, "config_source": 4, "is_sensitive": False,
             "synonyms": []}]} for r in b.resources]}
    b = ["--bootstrap-server", "{}:{}".format(*broker.address)]
    try:
        assert run(*b, "--describe") == (0, (
            "Topic:t\tPartitionCount:2\tReplicationFactor:2\tConfigs:retention.ms=1000\n"
            + partition_line("t", 0, replicas="0,1", isr="0") + partition_line("t", 1, "none", "1", "")), "")
        assert run(*b, "--describe", "--under-replicated-partitions") == (
            0, partition_line("t", 0, replicas="0,1", isr="0") + partition_line("t", 1, "none", "1", ""), "")
        assert run(*b, "--describe", "--unavailable-partitions") == (0, partition_line("t", 1, "none", "1", ""), "")
    finally:
        broker.close()


def test_the_console_script_and_real_clients_agree(broker, kcat):
    topic = unique("seen")
    done = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic",
                           topic, "--partitions", "4", "--replication-factor", "1"], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, f'Created topic "{topic}".\n', "")
    listed = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-t", topic], capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0 and f'topic "{topic}" with 4 partitions' in listed.stdout, listed.stdout
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        other = unique("kp")
        admin.create_topics([NewTopic(other, 2, 1, topic_configs={"retention.ms": "1000"})])
    finally:
        admin.close()
    status, out, _ = on(broker, "--describe", "--topic", other)
    assert status == 0 and out.startswith(f"Topic:{other}\tPartitionCount:2\tReplicationFactor:1\tConfigs:retention.ms=1000\n")
    usage = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", broker.bootstrap, "--alter", "--topic",
                            topic], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and usage.stdout == "" and usage.stderr.count("\n") == 1
    missing = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", broker.bootstrap, "--delete", "--topic",
                              unique("nope")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.startswith(ERROR)
