"""T28 / the ACL matrix: a broker with SASL_PLAINTEXT + PLAIN and SimpleAclAuthorizer; `kafka-edu acls`
grants principals (through ZooKeeper, and Beyond 0.10 through --bootstrap-server); each principal then
gets exactly what its ACLs allow across Produce, Fetch, Metadata, the group APIs and the admin APIs,
and the super user gets everything. Raw requests check the exact error codes; our producer and
confluent-kafka check that real clients see the same."""
from __future__ import annotations

import time

import pytest
from blocking_client import CodecConnection
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.tools.cli import main as kafka_edu
from kafka_edu.tools.cli import run_captured

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
ZK = ["acls", "--authorizer-properties", "zookeeper.connect=embedded"]
TOPIC, GROUP = "matrix", "matrix-group"
AUTH = {"TOPIC": Errors.TOPIC_AUTHORIZATION_FAILED.code, "GROUP": Errors.GROUP_AUTHORIZATION_FAILED.code,
        "CLUSTER": Errors.CLUSTER_AUTHORIZATION_FAILED.code}


def broker_config(broker_id, log_dir) -> KafkaConfig:
    return KafkaConfig({
        "broker.id": broker_id, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": log_dir, "num.network.threads": 1, "num.io.threads": 2,
        "log.cleaner.enable": "false", "offsets.topic.num.partitions": 1, "delete.topic.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS"}, warn_unknown=False)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """On the process-wide embedded ZooKeeper, which `zookeeper.connect=embedded` reaches."""
    server = KafkaServer(broker_config(0, str(tmp_path_factory.mktemp("logs"))))
    server.startup()
    with login(server, "admin") as admin:
        assert admin.call(ApiKeys.CREATE_TOPICS, 2, {"topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 20_000}).topics[0].error_code == 0
    yield server
    with login(server, "admin") as admin:       # leave the shared embedded ZooKeeper without our ACLs
        admin.call(ApiKeys.DELETE_ACLS, 1, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None,
                                                           "pattern_type_filter": 1, "principal_filter": None,
                                                           "host_filter": None, "operation": 1, "permission_type": 1}]})
    server.shutdown()


@pytest.fixture(scope="module")
def second_broker(broker, tmp_path_factory):
    server = KafkaServer(broker_config(1, str(tmp_path_factory.mktemp("logs1"))))
    server.startup()
    yield server
    server.shutdown()


def login(server, user) -> CodecConnection:
    conn = CodecConnection(server.bound_port("SASL_PLAINTEXT"), timeout=20)
    assert conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
    assert conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0{user}\0{USERS[user]}".encode()}).error_code == 0
    return conn


@pytest.fixture(scope="module")
def granted(broker, tmp_path_factory):
    assert kafka_edu([*ZK, "--add", "--allow-principal", "User:alice", "--producer", "--topic", TOPIC]) == 0
    assert kafka_edu([*ZK, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", TOPIC,
                      "--group", GROUP]) == 0
    command_config = tmp_path_factory.mktemp("cfg") / "admin.properties"
    command_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                              "sasl.username=admin\nsasl.password=admin-secret\n")
    bootstrap = f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}"
    assert kafka_edu(["acls", "--bootstrap-server", bootstrap, "--command-config", str(command_config), "--add",
                      "--allow-principal", "User:carol", "--operation", "Delete", "--topic", "doomed"]) == 0
    return broker


def produce(conn):
    builder = MemoryRecordsBuilder(magic=2)
    builder.append(0, None, b"v")
    answer = conn.call(ApiKeys.PRODUCE, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 10_000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": bytes(builder.build().buffer)}]}]})
    return answer.responses[0].partition_responses[0].error_code


def fetch(conn):
    answer = conn.call(ApiKeys.FETCH, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                          "isolation_level": 0, "topics": [{"topic": TOPIC, "partitions": [
                                              {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    return answer.responses[0].partitions[0].error_code


def metadata_all(conn):
    return {t.name for t in conn.call(ApiKeys.METADATA, 1, {"topics": None}).topics}


def metadata_named(conn):
    return conn.call(ApiKeys.METADATA, 1, {"topics": [{"name": TOPIC}]}).topics[0].error_code


def join(conn):
    return conn.call(ApiKeys.JOIN_GROUP, 1, {"group_id": GROUP, "session_timeout_ms": 10_000,
                                             "rebalance_timeout_ms": 10_000, "member_id": "", "protocol_type": "x",
                                             "protocols": [{"name": "p", "metadata": b""}]}).error_code


def commit(conn):
    answer = conn.call(ApiKeys.OFFSET_COMMIT, 2, {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                                                  "member_id": "", "retention_time_ms": -1, "topics": [
                                                      {"name": TOPIC, "partitions": [
                                                          {"partition_index": 0, "committed_offset": 0,
                                                           "committed_metadata": ""}]}]})
    return answer.topics[0].partitions[0].error_code


def create_topic(conn, name):
    return conn.call(ApiKeys.CREATE_TOPICS, 2, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                                           "assignments": [], "configs": []}],
                                                "timeout_ms": 20_000}).topics[0].error_code


def delete_topic(conn, name):
    return conn.call(ApiKeys.DELETE_TOPICS, 1, {"topic_names": [name], "timeout_ms": 20_000}).responses[0].error_code


def leader_and_isr(conn):
    return conn.call(ApiKeys.LEADER_AND_ISR, 0, {"controller_id": 0, "controller_epoch": 99,
                                                 "ungrouped_partition_states": [], "live_leaders": []}).error_code


def epoch_end(conn):
    answer = conn.call(ApiKeys.OFFSET_FOR_LEADER_EPOCH, 2, {"replica_id": 1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    return answer.topics[0].partitions[0].error_code


def alter_configs(conn):
    answer = conn.call(ApiKeys.ALTER_CONFIGS, 0, {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configs": [{"name": "retention.ms", "value": "3600000"}]}]})
    return answer.responses[0].error_code


def test_matrix(granted):
    with login(granted, "alice") as alice, login(granted, "bob") as bob, login(granted, "carol") as carol, \
            login(granted, "admin") as admin:
        assert [produce(c) for c in (alice, bob, carol, admin)] == [0, AUTH["TOPIC"], AUTH["TOPIC"], 0]
        assert [fetch(c) for c in (alice, bob, carol, admin)] == [AUTH["TOPIC"], 0, AUTH["TOPIC"], 0]
        assert [TOPIC in metadata_all(c) for c in (alice, bob, carol, admin)] == [True, True, False, True]
        assert metadata_named(carol) == AUTH["TOPIC"] and metadata_named(alice) == 0
        assert join(alice) == AUTH["GROUP"] and join(carol) == AUTH["GROUP"]
        assert join(bob) not in AUTH.values() and join(admin) not in AUTH.values()
        # bob and admin pass authorization (the coordinator may still be loading: NOT_COORDINATOR is fine)
        assert [commit(c) for c in (alice, carol)] == [AUTH["GROUP"], AUTH["GROUP"]]
        assert commit(bob) not in AUTH.values() and commit(admin) not in AUTH.values()
        # the admin APIs: alice's --producer includes Create on the cluster; carol may only delete "doomed"
        assert create_topic(carol, "doomed") == AUTH["TOPIC"] and create_topic(alice, "doomed") == 0
        assert delete_topic(bob, "doomed") == AUTH["TOPIC"] and delete_topic(carol, "doomed") == 0
        assert leader_and_isr(alice) == AUTH["CLUSTER"]
        assert epoch_end(bob) == AUTH["CLUSTER"] and epoch_end(admin) == 0
        assert alter_configs(bob) == AUTH["TOPIC"] and alter_configs(admin) == 0
        assert admin.call(ApiKeys.DESCRIBE_ACLS, 0, {"resource_type_filter": 1, "resource_name_filter": None,
                                                     "principal_filter": "User:carol", "host_filter": None,
                                                     "operation": 1, "permission_type": 1}).resources[0].resource_name \
            == "doomed"
        assert carol.call(ApiKeys.DESCRIBE_ACLS, 0, {"resource_type_filter": 1, "resource_name_filter": None,
                                                     "principal_filter": None, "host_filter": None, "operation": 1,
                                                     "permission_type": 1}).error_code == AUTH["CLUSTER"]


def group_call(conn, api, version, body):
    return conn.call(api, version, {"group_id": GROUP, **body}).error_code


def test_group_apis(granted):
    with login(granted, "alice") as alice, login(granted, "bob") as bob, login(granted, "carol") as carol, \
            login(granted, "admin") as admin:
        find = {"key": GROUP, "key_type": 0}
        assert alice.call(ApiKeys.FIND_COORDINATOR, 1, find).error_code == AUTH["GROUP"]
        assert bob.call(ApiKeys.FIND_COORDINATOR, 1, find).error_code not in AUTH.values()
        fetch_offsets = {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        assert alice.call(ApiKeys.OFFSET_FETCH, 2, fetch_offsets).error_code == AUTH["GROUP"]
        assert bob.call(ApiKeys.OFFSET_FETCH, 2, fetch_offsets).error_code not in AUTH.values()
        member = {"generation_id": 1, "member_id": "m"}
        assert group_call(alice, ApiKeys.HEARTBEAT, 0, member) == AUTH["GROUP"]
        assert group_call(alice, ApiKeys.SYNC_GROUP, 0, {**member, "assignments": []}) == AUTH["GROUP"]
        assert group_call(alice, ApiKeys.LEAVE_GROUP, 0, {"member_id": "m"}) == AUTH["GROUP"]
        assert group_call(bob, ApiKeys.HEARTBEAT, 0, member) not in AUTH.values()
        described = carol.call(ApiKeys.DESCRIBE_GROUPS, 0, {"groups": [GROUP]}).groups[0]
        assert described.error_code == AUTH["GROUP"]
        assert bob.call(ApiKeys.LIST_GROUPS, 0, {}).error_code == AUTH["CLUSTER"]
        # the offsets topic bob's FindCoordinator created may still be loading: a client asks again
        listed = wait_for(lambda: (r := admin.call(ApiKeys.LIST_GROUPS, 0, {})).error_code
                          != Errors.COORDINATOR_LOAD_IN_PROGRESS.code and r, timeout=30, what="offsets loaded")
        assert listed.error_code == 0
        assert bob.call(ApiKeys.DELETE_GROUPS, 0, {"groups_names": [GROUP]}).results[0].error_code == AUTH["GROUP"]


def test_metadata_auto_creation_needs_create(granted):
    for user in ("alice", "bob"):
        assert kafka_edu([*ZK, "--add", "--allow-principal", f"User:{user}", "--operation", "Describe",
                          "--topic", f"ghost-{user}"]) == 0
    with login(granted, "alice") as alice, login(granted, "bob") as bob:
        answer = alice.call(ApiKeys.METADATA, 4, {"topics": [{"name": "ghost-alice"}], "allow_auto_topic_creation": True})
        assert answer.topics[0].error_code in (0, Errors.LEADER_NOT_AVAILABLE.code)    # alice has Create (--producer)
        answer = bob.call(ApiKeys.METADATA, 4, {"topics": [{"name": "ghost-bob"}], "allow_auto_topic_creation": True})
        assert answer.topics[0].error_code == AUTH["TOPIC"]
    assert "ghost-bob" not in granted.zk_utils.get_all_topics()
    assert "ghost-alice" in granted.zk_utils.get_all_topics()


def test_t28_every_broker_follows_the_tool_within_two_seconds(granted, second_broker):
    with login(second_broker, "carol") as carol:
        assert TOPIC not in metadata_all(carol)
        assert kafka_edu([*ZK, "--add", "--allow-principal", "User:carol", "--operation", "Describe",
                          "--topic", TOPIC]) == 0
        started = time.monotonic()
        wait_for(lambda: TOPIC in metadata_all(carol))
        assert time.monotonic() - started < 2
        assert kafka_edu([*ZK, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Describe",
                          "--topic", TOPIC]) == 0
        wait_for(lambda: TOPIC not in metadata_all(carol))


def test_deny_then_remove_through_the_tool(granted):
    with login(granted, "bob") as bob:
        assert kafka_edu([*ZK, "--add", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1",
                          "--operation", "Read", "--topic", TOPIC]) == 0
        wait_for(lambda: fetch(bob) == AUTH["TOPIC"])            # the broker follows the notification
        assert kafka_edu([*ZK, "--remove", "--force", "--deny-principal", "User:bob", "--deny-host", "127.0.0.1",
                          "--operation", "Read", "--topic", TOPIC]) == 0
        wait_for(lambda: fetch(bob) == 0)


def test_remove_without_force_at_the_end_of_input_removes_nothing():
    """A script with standard input closed gets a "no", not a traceback; only "y" removes."""
    topic = ["--topic", "unconfirmed"]
    assert kafka_edu([*ZK, "--add", "--allow-principal", "User:alice", "--operation", "Read", *topic]) == 0
    try:
        for answer in (b"", b"n\n"):
            status, out, err = run_captured([*ZK, "--remove", *topic], answer)
            assert (status, err) == (0, "") and out.startswith("Are you sure you want to remove all ACLs"), out
            assert "User:alice" in run_captured([*ZK, "--list", *topic])[1]
        status, out, err = run_captured([*ZK, "--remove", *topic], b"y\n")
        assert status == 0 and "User:alice" not in run_captured([*ZK, "--list", *topic])[1]
    finally:
        kafka_edu([*ZK, "--remove", "--force", *topic])


def test_real_clients(granted):
    from kafka_edu.clients.producer.kafka_producer import KafkaProducer
    byte_array = "kafka_edu.clients.producer.serializers.ByteArraySerializer"
    port = granted.bound_port("SASL_PLAINTEXT")
    common = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "key.serializer": byte_array, "value.serializer": byte_array, "max.block.ms": 10_000, "retries": 0}
    with KafkaProducer({**common, "sasl.username": "alice", "sasl.password": USERS["alice"]}) as producer:
        assert producer.send(TOPIC, b"ours").get(20).offset >= 0
    confluent_kafka = pytest.importorskip("confluent_kafka")
    delivered = []
    carol = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanism": "PLAIN", "sasl.username": "carol",
                                      "sasl.password": USERS["carol"], "message.timeout.ms": 10_000})
    carol.produce(TOPIC, b"no", on_delivery=lambda err, msg: delivered.append(err))
    carol.flush(20)
    assert delivered and delivered[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    kafka = pytest.importorskip("kafka")
    bob = kafka.KafkaConsumer(TOPIC, bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password=USERS["bob"],
                              group_id=GROUP, auto_offset_reset="earliest", consumer_timeout_ms=15_000)
    try:
        assert any(message.value == b"ours" for message in bob), "bob's kafka-python consumer read nothing"
    finally:
        bob.close()


BAD_ARGUMENTS = [
    [*ZK, "--add", "--allow-principal", "User:x", "--operation", "Read", "--cluster"],   # Read is no cluster operation
    [*ZK, "--add", "--operation", "Read"],                                            # no resource
    [*ZK, "--add", "--topic", "t"],                                                   # no principal
    [*ZK, "--add", "--allow-principal", "alice", "--topic", "t"],                     # not <type>:<name>
    [*ZK, "--add", "--allow-principal", "User:x", "--operation", "Fly", "--topic", "t"],
    [*ZK, "--add", "--allow-host", "1.2.3.4", "--deny-principal", "User:x", "--topic", "t"],
    [*ZK, "--add", "--allow-principal", "User:x", "--consumer", "--topic", "t"],      # --consumer without --group
    [*ZK, "--add", "--allow-principal", "User:x", "--producer", "--operation", "Read", "--topic", "t"],
    [*ZK, "--list", "--remove"],
    ["acls", "--authorizer-properties", "zookeeper.session.timeout.ms=1", "--list"],
    ["acls", "--bootstrap-server", "127.0.0.1:1", "--authorizer-properties", "zookeeper.connect=embedded", "--list"],
    [*ZK, "--list", "--command-config", "/nonexistent"],
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=" ".join)
def test_a_bad_argument_is_one_line_and_exit_2(argv):
    status, out, err = run_captured(argv)
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("kafka-edu acls: error: "), err


@pytest.mark.parametrize("where", [["--bootstrap-server", "127.0.0.1:1"],
                                   ["--authorizer-properties", "zookeeper.connect=127.0.0.1:1"]])
def test_an_unreachable_cluster_is_one_line_and_exit_1(where):
    status, out, err = run_captured(["acls", *where, "--list", "--timeout", "1000"])
    assert status == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_resource_name_no_znode_can_hold_is_one_line_and_exit_1():
    """Beyond 0.10: `team/app` would be stored two levels down, where a restarted broker never looks."""
    status, out, err = run_captured([*ZK, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                                     "--group", "team/app"])
    assert status == 1 and len(err.strip().splitlines()) == 1 and "cannot have ACLs" in err, err


def test_a_commit_to_an_unreadable_topic_is_refused_and_stores_nothing(granted):
    """bob may read the group and `matrix`, not `secret`: his commit to both stores `matrix` only."""
    def commit_both(conn):
        answer = conn.call(ApiKeys.OFFSET_COMMIT, 2, {
            "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                   "committed_metadata": ""}]} for t in (TOPIC, "secret")]})
        return {t.name: t.partitions[0].error_code for t in answer.topics}

    def committed(conn, topic):
        answer = conn.call(ApiKeys.OFFSET_FETCH, 2, {"group_id": GROUP,
                                                     "topics": [{"name": topic, "partition_indexes": [0]}]})
        return answer.error_code, answer.topics[0].partitions[0].committed_offset

    loading = {Errors.NOT_COORDINATOR.code, Errors.COORDINATOR_LOAD_IN_PROGRESS.code}
    with login(granted, "bob") as bob, login(granted, "admin") as admin:
        assert create_topic(admin, "secret") == 0
        # as a client would: finding the coordinator creates the offsets topic if no earlier test did
        assert bob.call(ApiKeys.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0}).error_code not in AUTH.values()
        deadline = time.monotonic() + 10
        while loading & set((errors := commit_both(bob)).values()):     # the coordinator still loading
            assert time.monotonic() < deadline, errors
            time.sleep(0.05)
        assert errors == {TOPIC: 0, "secret": AUTH["TOPIC"]}
        assert committed(admin, TOPIC) == (0, 42) and committed(admin, "secret") == (0, -1)
