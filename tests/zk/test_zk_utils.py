"""ZkUtils: Kafka 0.10's znode formats byte for byte, and the coordination helpers on both backends.

The literal JSON strings are znode contents as Kafka 0.10 brokers and tools wrote them (as
captured from real clusters with zkCli), so equality here means a real 0.10 cluster and ours
write identical bytes.
"""
from __future__ import annotations

import pytest

from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_client import BadArgumentsError, NodeExistsError
from kafka_edu.server.zk.zk_utils import (
    BrokerInfo, JavaProperties, LeaderAndIsr, ZkUtils, acls_json, config_change_json,
    controller_json, create_zk_client, decode_json, encode_json, entity_config_json, leader_and_isr_json,
    parse_acls_json, parse_controller_id, parse_partitions_json, parse_reassignment_json, partitions_json,
    reassignment_json, replica_assignment_json)
from kafka_edu.viz.zk_tree import zk_tree

BROKER_V3 = ('{"jmx_port":-1,"timestamp":"1518967706758","endpoints":["PLAINTEXT://kafka0.example.com:9092"],'
             '"host":"kafka0.example.com","version":3,"port":9092}')


# ---- formats, byte for byte ------------------------------------------------------------------------
def test_broker_registration_v3():
    info = BrokerInfo(0, "kafka0.example.com", 9092, ("PLAINTEXT://kafka0.example.com:9092",),
                      timestamp=1518967706758)
    assert info.to_json() == BROKER_V3
    assert BrokerInfo.from_json(0, BROKER_V3.encode()) == info


def test_broker_registration_rack_is_written_only_when_set():
    info = BrokerInfo(1, "h", 9092, ("PLAINTEXT://h:9092",), timestamp=5, rack="r1")
    assert info.to_json() == ('{"jmx_port":-1,"timestamp":"5","endpoints":["PLAINTEXT://h:9092"],'
                              '"host":"h","version":3,"port":9092,"rack":"r1"}')
    assert BrokerInfo.from_json(1, info.to_json()).rack == "r1"


def test_broker_registration_older_versions_are_read():
    v1 = BrokerInfo.from_json(1, '{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}')
    assert v1.endpoints == ("PLAINTEXT://172.16.8.243:9091",) and v1.timestamp == 1420485325400
    v2 = BrokerInfo.from_json(0, '{"jmx_port":-1,"timestamp":"1459199184439","endpoints":["PLAINTEXT://Rlyeh:9092"],'
                                 '"host":"Rlyeh","version":2,"port":9092}')
    assert (v2.version, v2.endpoints, v2.rack) == (2, ("PLAINTEXT://Rlyeh:9092",), None)
    assert BrokerInfo(0, "Rlyeh", 9092, ("PLAINTEXT://Rlyeh:9092",), timestamp=1459199184439,
                      version=2).to_json() == ('{"jmx_port":-1,"timestamp":"1459199184439","endpoints":'
                                               '["PLAINTEXT://Rlyeh:9092"],"host":"Rlyeh","version":2,"port":9092}')
    with pytest.raises(ValueError):
        BrokerInfo.from_json(0, '{"version":9}')


def test_partition_state():
    text = '{"controller_epoch":8,"leader":5,"version":1,"leader_epoch":12,"isr":[5,2]}'
    assert leader_and_isr_json(LeaderAndIsr(5, 12, (5, 2)), controller_epoch=8) == text


@pytest.mark.parametrize("assignment, text", [
    ({0: [0]}, '{"version":1,"partitions":{"0":[0]}}'),
    ({0: [0, 1], 1: [1, 0]}, '{"version":1,"partitions":{"1":[1,0],"0":[0,1]}}'),
    ({0: [2, 0, 1], 1: [0, 1, 2], 2: [1, 2, 0]}, '{"version":1,"partitions":{"2":[1,2,0],"1":[0,1,2],"0":[2,0,1]}}'),
    ({0: [2, 0], 1: [0, 1], 2: [1, 2], 3: [2, 1]},
     '{"version":1,"partitions":{"2":[1,2],"1":[0,1],"3":[2,1],"0":[2,0]}}'),
    ({p: [0] for p in range(10)},
     '{"version":1,"partitions":{"8":[0],"4":[0],"9":[0],"5":[0],"6":[0],"1":[0],"0":[0],"2":[0],"7":[0],"3":[0]}}'),
])
def test_topic_assignment(assignment, text):
    assert replica_assignment_json(assignment) == text


def test_topic_config_keeps_properties_hashtable_order():
    assert entity_config_json({"retention.ms": "10000", "max.message.bytes": "500", "retention.bytes": "500"}) == \
        '{"version":1,"config":{"retention.ms":"10000","max.message.bytes":"500","retention.bytes":"500"}}'
    # __consumer_offsets' overrides, put in GroupCoordinator's order; two keys share a bucket.
    assert entity_config_json({"cleanup.policy": "compact", "segment.bytes": "104857600",
                               "compression.type": "producer"}) == \
        '{"version":1,"config":{"segment.bytes":"104857600","compression.type":"producer","cleanup.policy":"compact"}}'


def test_hashtable_order_survives_a_rehash():
    keys = [f"key.{n}" for n in range(12)]          # more than 8 entries: the table grows to 23 buckets
    encoded = encode_json(JavaProperties((k, "v") for k in keys))
    assert sorted(decode_json(encoded)) == sorted(keys)
    assert list(decode_json(encoded)) != keys


def test_controller_and_notifications():
    assert controller_json(0, 1465551016470) == '{"version":1,"brokerid":0,"timestamp":"1465551016470"}'
    assert parse_controller_id('{"version":1,"brokerid":3,"timestamp":"1"}') == 3
    assert parse_controller_id(b"2") == 2                       # what 0.8.1 wrote
    assert config_change_json("topics", "test") == '{"version":1,"entity_type":"topics","entity_name":"test"}'
    text = '{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert partitions_json([TopicPartition("t", 0), ("u", 3)]) == text
    assert parse_partitions_json(text) == [("t", 0), ("u", 3)]
    text = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,4,5]}]}'
    assert reassignment_json({("t", 0): [3, 4, 5]}) == text
    assert parse_reassignment_json(text) == {("t", 0): [3, 4, 5]}


def test_acls():
    text = ('{"version":1,"acls":[{"principal":"User:xiaoming","permissionType":"Allow","operation":"Read",'
            '"host":"*"},{"principal":"User:xiaoming","permissionType":"Allow","operation":"Write","host":"*"}]}')
    acls = [("User:xiaoming", "Allow", "Read", "*"), ("User:xiaoming", "Allow", "Write", "*")]
    assert acls_json(acls) == text
    assert parse_acls_json(text) == acls


def test_encoder_rejects_what_json_cannot_hold():
    assert encode_json({"s": 'quote " and \\', "n": None, "b": False}) == '{"s":"quote \\" and \\\\","n":null,"b":false}'
    with pytest.raises(TypeError):
        encode_json({1: "x"})
    with pytest.raises(TypeError):
        encode_json({"x": object()})


# ---- ZkUtils on both backends -----------------------------------------------------------------------
def test_register_broker_writes_the_exact_bytes_and_is_ephemeral(zk_cluster):
    clock = MockTime(start_ms=1518967706758)
    broker = ZkUtils(zk_cluster.client(), clock)
    admin = ZkUtils(zk_cluster.client(), clock)
    admin.setup_common_paths()
    admin.setup_common_paths()                          # idempotent
    broker.register_broker(0, "kafka0.example.com", 9092, ["PLAINTEXT://kafka0.example.com:9092"])
    data, stat = admin.zk.get("/brokers/ids/0")
    assert data.decode() == BROKER_V3 and stat.ephemeral_owner == broker.zk.session_id
    with pytest.raises(NodeExistsError, match="already registered"):
        admin.register_broker(0, "other", 9092, ["PLAINTEXT://other:9092"])
    ZkUtils(zk_cluster.client(), clock).register_broker(10, "h", 1, ["PLAINTEXT://h:1"])
    ZkUtils(zk_cluster.client(), clock).register_broker(9, "h", 1, ["PLAINTEXT://h:1"])
    assert admin.get_all_broker_ids() == [0, 9, 10]
    assert [b.id for b in admin.get_all_brokers_in_cluster()] == [0, 9, 10]
    assert admin.get_broker_info(0).host == "kafka0.example.com"
    broker.zk.close()
    assert admin.get_broker_info(0) is None and admin.get_all_broker_ids() == [9, 10]


def test_topic_assignment_and_conditional_leader_isr_update(zk_cluster):
    admin, leader, controller = (ZkUtils(zk_cluster.client(), MockTime()) for _ in range(3))
    admin.create_topic_assignment("t", {0: [1, 2], 1: [2, 1]})
    assert admin.zk.get("/brokers/topics/t")[0] == b'{"version":1,"partitions":{"1":[2,1],"0":[1,2]}}'
    with pytest.raises(NodeExistsError, match="already exists"):
        admin.create_topic_assignment("t", {0: [1]})
    admin.create_topic_assignment("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]}, update=True)
    assert admin.get_partition_assignment_for_topics(["t", "missing"]) == {
        "t": {0: [1, 2], 1: [2, 1], 2: [1, 2]}, "missing": {}}
    assert admin.get_replica_assignment_for_topics(["t"])[("t", 2)] == [1, 2]
    assert admin.get_all_topics() == ["t"]

    assert admin.get_leader_and_isr("t", 0) is None
    admin.create_leader_and_isr("t", 0, LeaderAndIsr(1, 0, (1, 2)), controller_epoch=1)
    assert admin.zk.get("/brokers/topics/t/partitions/0/state")[0] == \
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    assert admin.get_all_partitions() == {("t", 0)}
    seen_by_leader = leader.get_leader_and_isr("t", 0)
    seen_by_controller = controller.get_leader_and_isr("t", 0)
    assert seen_by_leader.leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 0) and seen_by_leader.controller_epoch == 1

    elected = LeaderAndIsr(2, 1, (2,), seen_by_controller.leader_and_isr.zk_version)
    assert controller.update_leader_and_isr("t", 0, elected, controller_epoch=2) == (True, 1)
    shrunk = LeaderAndIsr(1, 0, (1,), seen_by_leader.leader_and_isr.zk_version)     # stale: version 0
    assert leader.update_leader_and_isr("t", 0, shrunk, controller_epoch=1) == (False, -1)
    now = leader.get_leader_and_isr("t", 0)
    assert now.leader_and_isr == LeaderAndIsr(2, 1, (2,), 1) and now.controller_epoch == 2
    retried = LeaderAndIsr(2, 1, (2,), now.leader_and_isr.zk_version)
    assert leader.update_leader_and_isr("t", 0, retried, controller_epoch=2) == (True, 2)
    assert leader.update_leader_and_isr("t", 9, retried, controller_epoch=2) == (False, -1)   # no such znode


def test_controller_election_and_epoch(zk_cluster):
    a, b, observer = (ZkUtils(zk_cluster.client(), MockTime(start_ms=7)) for _ in range(3))
    assert observer.get_controller_id() is None and observer.get_controller_epoch() is None
    assert a.create_controller_path(1) is True
    assert b.create_controller_path(2) is False
    assert observer.get_controller_id() == 1
    assert observer.zk.get("/controller")[0] == b'{"version":1,"brokerid":1,"timestamp":"7"}'
    observer.create_persistent_path("/controller_epoch", "1")
    assert observer.get_controller_epoch() == (1, 0)
    a.zk.close()
    assert b.create_controller_path(2) is True and observer.get_controller_id() == 2


def test_admin_paths_and_notifications(zk_cluster):
    zk = ZkUtils(zk_cluster.client(), MockTime())
    zk.setup_common_paths()
    zk.mark_topic_for_deletion("old")
    assert zk.get_topics_marked_for_deletion() == ["old"] and zk.zk.get("/admin/delete_topics/old")[0] == b""

    zk.update_partition_reassignment_data({("t", 0): [3, 4]})
    assert zk.get_partitions_being_reassigned() == {("t", 0): [3, 4]}
    zk.update_partition_reassignment_data({})
    assert zk.zk.exists("/admin/reassign_partitions") is None
    zk.update_partition_reassignment_data({})                # nothing to delete: still fine

    zk.write_preferred_replica_election([("t", 0)])
    with pytest.raises(NodeExistsError):
        zk.write_preferred_replica_election([("t", 1)])      # one election at a time
    assert zk.get_partitions_undergoing_preferred_replica_election() == [("t", 0)]

    assert zk.propagate_isr_changes([("t", 0)]) == "/isr_change_notification/isr_change_0000000000"
    assert zk.propagate_isr_changes([("t", 1)]) == "/isr_change_notification/isr_change_0000000001"
    assert zk.zk.get("/isr_change_notification/isr_change_0000000001")[0] == \
        b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'

    assert zk.change_entity_config("topics", "t", {"retention.ms": "10000"}) == \
        "/config/changes/config_change_0000000000"
    assert zk.fetch_entity_config("topics", "t") == {"retention.ms": "10000"}
    assert zk.fetch_entity_config("topics", "none") == {}
    assert zk.get_all_entities_with_config("topics") == ["t"]
    assert zk.zk.get("/config/changes/config_change_0000000000")[0] == \
        b'{"version":1,"entity_type":"topics","entity_name":"t"}'

    assert zk.create_acl_change_notification("Topic:test") == "/kafka-acl-changes/acl_changes_0000000000"
    assert zk.zk.get("/kafka-acl-changes/acl_changes_0000000000")[0] == b"Topic:test"


def test_generated_broker_ids_count_up_from_the_reserved_maximum(zk_cluster):
    zk = ZkUtils(zk_cluster.client(), MockTime())
    assert zk.get_broker_sequence_id(1000) == 1000           # /brokers/seqid created on first use
    zk.setup_common_paths()
    assert [zk.get_broker_sequence_id(1000) for _ in range(2)] == [1001, 1002]


# ---- the factory -------------------------------------------------------------------------------------
def test_create_zk_client_embedded_when_zookeeper_connect_is_unset():
    server = EmbeddedZooKeeper()
    a = create_zk_client({"broker.id": 0}, embedded=server)
    b = create_zk_client({"zookeeper.connect": ""}, embedded=server)
    try:
        a.create("/shared", b"1")
        assert b.get("/shared")[0] == b"1"
    finally:
        a.close()
        b.close()


def test_create_zk_client_kazoo_with_chroot(zookeeper):
    config = {"zookeeper.connect": f"{zookeeper.connect}/kafka/edu", "zookeeper.session.timeout.ms": 4000}
    zk = create_zk_client(config)
    root = create_zk_client({"zookeeper.connect": zookeeper.connect})
    try:
        assert type(zk).__name__ == "KazooZkClient" and zk.chroot == "/kafka/edu"
        ZkUtils(zk).setup_common_paths()
        assert root.exists("/kafka/edu/brokers/ids") is not None
        assert zk.create("/x/seq-", b"", sequential=True, makepath=True) == "/x/seq-0000000000"
    finally:
        root.delete("/kafka", recursive=True)
        zk.close()
        root.close()
    with pytest.raises(BadArgumentsError):
        create_zk_client({"zookeeper.connect": "/only-a-chroot"})


# ---- the figure ------------------------------------------------------------------------------------------
def test_zk_tree_is_deterministic_and_marks_ephemerals():
    def build():
        server = EmbeddedZooKeeper(MockTime())
        zk = ZkUtils(server.connect(), MockTime())
        zk.setup_common_paths()
        zk.register_broker(0, "h", 9092, ["PLAINTEXT://h:9092"])
        zk.create_topic_assignment("t", {0: [0]})
        source = zk_tree(zk.zk).source
        zk.zk.close()
        return source
    first = build()
    assert first == build()
    ephemeral = [line for line in first.splitlines() if "dashed" in line]
    assert len(ephemeral) == 1 and "jmx_port" in ephemeral[0] and "ephemeral, session" in ephemeral[0]
    assert "zookeeper" not in first and "quota" not in first


def test_zk_tree_renders_awkward_names_and_data():
    zk = EmbeddedZooKeeper().connect()
    try:
        zk.create("/consumers/group:1/ids", 'quote " and a trailing backslash \\', makepath=True)
        svg = zk_tree(zk).pipe(format="svg").decode()
        assert "group:1" in svg and "backslash" in svg
    finally:
        zk.close()
