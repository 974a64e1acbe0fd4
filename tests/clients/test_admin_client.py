"""ClusterAdmin and ConsumerProtocol: byte formats; topics and log offsets against an in-process
kafka-edu broker; group calls (and their retries) against scripted brokers; coordinator, offsets
and ListOffsets against librdkafka's mock cluster."""
from __future__ import annotations

import socket
import uuid

import pytest
from scripted_broker import ScriptedBroker, metadata_answer, scripted_cluster

from kafka_edu.clients.admin import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClusterAdmin, ConfigEntry, ConfigSource, NewPartitions, NewTopic,
    OffsetAndMetadata, OffsetAndTimestamp, UnknownTopicOrPartitionError,
)
from kafka_edu.common.cluster import Node, TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.consumer_protocol import (
    SUBSCRIPTION_V1, VERSION, Assignment, ConsumerProtocol, Subscription,
)
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.protocol.types import INT32, ProtocolError
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder

TP = TopicPartition


# --- the consumer protocol -------------------------------------------------------------------

def test_subscription_and_assignment_bytes():
    sub = Subscription(["b", "a"], b"ud", [TP("a", 2), TP("a", 0)])
    v0 = ConsumerProtocol.serialize_subscription(sub)
    assert v0 == bytes.fromhex("0000" "00000002" "0001" "61" "0001" "62" "00000002" "7564")
    assert ConsumerProtocol.deserialize_subscription(v0) == Subscription(["a", "b"], b"ud", [])
    v1 = ConsumerProtocol.serialize_subscription(sub, version=1)
    assert ConsumerProtocol.deserialize_subscription(v1) == Subscription(["a", "b"], b"ud", [TP("a", 0), TP("a", 2)])
    assignment = Assignment([TP("t", 1), TP("s", 0), TP("t", 0)])
    raw = ConsumerProtocol.serialize_assignment(assignment)
    assert raw == bytes.fromhex("0000" "00000002" "0001" "73" "00000001" "00000000"
                                "0001" "74" "00000002" "00000000" "00000001" "ffffffff")
    assert ConsumerProtocol.deserialize_assignment(raw) == Assignment([TP("s", 0), TP("t", 0), TP("t", 1)])


def test_newer_versions_decode_as_a_prefix_and_bad_bytes_raise():
    v3 = (VERSION.write({"version": 3}) + SUBSCRIPTION_V1.write({"topics": ["t"], "user_data": None,
                                                                 "owned_partitions": []})
          + INT32.write(12) + b"\x00\x02r1")
    assert ConsumerProtocol.deserialize_subscription(v3) == Subscription(["t"])
    assignment_v2 = b"\x00\x02" + ConsumerProtocol.serialize_assignment(Assignment([TP("t", 0)]))[2:] + b"new"
    assert ConsumerProtocol.deserialize_assignment(assignment_v2).partitions == [TP("t", 0)]
    with pytest.raises(ProtocolError, match="unsupported assignment version -1"):
        ConsumerProtocol.deserialize_assignment(b"\xff\xff" + bytes(8))
    with pytest.raises(ProtocolError, match="trailing"):
        ConsumerProtocol.deserialize_assignment(ConsumerProtocol.serialize_assignment(Assignment([])) + b"x")
    with pytest.raises(ProtocolError):
        ConsumerProtocol.deserialize_subscription(b"\x00\x00\x00\x00\x00\x05")
    with pytest.raises(ValueError, match="version 7"):
        ConsumerProtocol.serialize_subscription(Subscription([]), version=7)


# --- topics and log offsets on a kafka-edu broker ----------------------------------------------

@pytest.fixture(scope="module")
def kafka_edu_broker(tmp_path_factory):
    from kafka_edu.server.kafka_config import KafkaConfig
    from kafka_edu.server.kafka_server import KafkaServer
    from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
    config = KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.cleaner.enable": "false",
                          "log.dirs": str(tmp_path_factory.mktemp("admin-logs")), "delete.topic.enable": "true"})
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield f"127.0.0.1:{server.bound_port()}"
    server.shutdown()


def produce(admin, topic, partition, count, first_timestamp):
    builder = MemoryRecordsBuilder(magic=2)
    for i in range(count):
        builder.append(first_timestamp + 1000 * i, None, b"v")
    leader = admin.describe_cluster([topic]).leader_for(TP(topic, partition))
    response = admin.call(leader, ApiKeys.PRODUCE, {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(builder.build())}]}]})
    assert response.responses[0].partition_responses[0].error_code == 0


def test_topics_and_offsets_on_a_kafka_edu_broker(kafka_edu_broker):
    with ClusterAdmin(kafka_edu_broker) as admin:
        cluster = admin.describe_cluster()
        assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0
        created = admin.create_topics([NewTopic("adm-orders", 3, 1, configs={"retention.ms": "600000"}),
                                       NewTopic("adm-manual", replica_assignment={0: [0], 1: [0]}),
                                       NewTopic("adm-bad", 0, 1)])
        assert created["adm-orders"] is None and created["adm-manual"] is None
        assert created["adm-bad"].error is Errors.INVALID_PARTITIONS
        again = admin.create_topics([NewTopic("adm-orders", 3, 1)])
        assert again["adm-orders"].error is Errors.TOPIC_ALREADY_EXISTS
        described = admin.describe_topics(["adm-orders", "adm-manual"])
        assert [p.partition for p in described["adm-orders"]] == [0, 1, 2]
        assert [p.partition for p in described["adm-manual"]] == [0, 1]
        with pytest.raises(KafkaError) as missing:
            admin.describe_topics(["adm-missing"])
        assert missing.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION

        produce(admin, "adm-orders", 0, 6, 1_000_000)
        tps = [TP("adm-orders", p) for p in range(3)]
        assert admin.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps}) == {tp: OffsetAndTimestamp(0, -1)
                                                                               for tp in tps}
        latest = admin.list_offsets({tp: LATEST_TIMESTAMP for tp in tps})
        assert [latest[tp].offset for tp in tps] == [6, 0, 0]
        assert admin.list_offsets({tps[0]: 1_003_500}) == {tps[0]: OffsetAndTimestamp(4, 1_004_000)}
        assert admin.list_offsets({tps[0]: 9_000_000})[tps[0]].offset == -1
        with pytest.raises(KafkaError, match="adm-orders-7 does not exist"):
            admin.list_offsets({TP("adm-orders", 7): LATEST_TIMESTAMP})

        deleted = admin.delete_topics(["adm-manual", "adm-never"])
        assert deleted["adm-manual"] is None and deleted["adm-never"].error is Errors.UNKNOWN_TOPIC_OR_PARTITION

        configs = admin.describe_configs(["adm-orders"])["adm-orders"]
        assert configs["retention.ms"] == ConfigEntry("retention.ms", "600000", ConfigSource.TOPIC_CONFIG)
        assert configs["cleanup.policy"].source is ConfigSource.DEFAULT_CONFIG and configs["cleanup.policy"].is_default
        assert [name for name, e in configs.items() if e.source is ConfigSource.TOPIC_CONFIG] == ["retention.ms"]
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_configs(["adm-orders", "adm-missing"])

        grown = admin.create_partitions({"adm-orders": 4, "adm-never": 2})
        assert grown["adm-orders"] is None and grown["adm-never"].error is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert len(admin.describe_topics(["adm-orders"])["adm-orders"]) == 4
        assert admin.create_partitions({"adm-orders": NewPartitions(6, [[0], [0]])}) == {"adm-orders": None}
        refused = admin.create_partitions({"adm-orders": 5})["adm-orders"]
        assert refused.error is Errors.INVALID_PARTITIONS and "currently has 6 partitions" in str(refused)


# --- groups on scripted brokers -------------------------------------------------------------

def describe_answer(groups: dict):
    def answer(header, body):
        return {"groups": [{"error_code": 0, "group_id": g, **groups[g]} if g in groups else
                           {"error_code": 0, "group_id": g, "group_state": "Dead", "protocol_type": "",
                            "protocol_data": "", "members": []} for g in body["groups"]]}
    return answer


def test_group_calls_across_brokers():
    brokers = scripted_cluster(2, {"t": 2})
    one, two = brokers
    one.handlers[ApiKeys.LIST_GROUPS] = lambda h, b: {"error_code": 0, "groups": [
        {"group_id": "g1", "protocol_type": "consumer"}]}
    two.handlers[ApiKeys.LIST_GROUPS] = lambda h, b: {"error_code": 0, "groups": [
        {"group_id": "g0", "protocol_type": "consumer"}, {"group_id": "c", "protocol_type": "connect"}]}
    attempts = []

    def find(header, body):
        attempts.append(body["key"])
        if len(attempts) == 1:
            return {"error_code": Errors.COORDINATOR_NOT_AVAILABLE.code, "node_id": -1, "host": "", "port": -1}
        return {"error_code": 0, "node_id": 2, "host": two.address[0], "port": two.address[1]}

    for b in brokers:
        b.handlers[ApiKeys.FIND_COORDINATOR] = find
    two.handlers[ApiKeys.DESCRIBE_GROUPS] = describe_answer({"g0": {
        "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range", "members": [
            {"member_id": "m-1", "client_id": "c1", "client_host": "/10.1.1.1",
             "member_metadata": ConsumerProtocol.serialize_subscription(Subscription(["t"]), version=1),
             "member_assignment": ConsumerProtocol.serialize_assignment(Assignment([TP("t", 1), TP("t", 0)]))},
            {"member_id": "m-2", "client_id": "c2", "client_host": "/10.1.1.2",
             "member_metadata": b"", "member_assignment": b"\x00"}]}})
    two.handlers[ApiKeys.OFFSET_FETCH] = lambda h, b: {"error_code": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 42, "metadata": "meta", "error_code": 0},
        {"partition_index": 1, "committed_offset": -1, "metadata": None, "error_code": 0}]}]}
    commits = []
    two.handlers[ApiKeys.OFFSET_COMMIT] = lambda h, b: commits.append((h.api_version, b)) or {"topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                            "error_code": 25 if p["committed_offset"] < 0 else 0}
                                           for p in t["partitions"]]} for t in b["topics"]]}
    try:
        with ClusterAdmin(f"{one.address[0]}:{one.address[1]}", retry_backoff_ms=10) as admin:
            assert admin.find_coordinator("g0").id == 2 and len(attempts) == 2
            assert [(g.group_id, g.protocol_type, g.coordinator.id) for g in admin.list_groups()] == [
                ("c", "connect", 2), ("g0", "consumer", 2), ("g1", "consumer", 1)]
            group = admin.describe_group("g0")
            assert (group.state, group.protocol, group.coordinator.id) == ("Stable", "range", 2)
            assert group.members[0].assignment == Assignment([TP("t", 0), TP("t", 1)])
            assert group.members[0].subscription == Subscription(["t"])
            assert group.members[1].assignment is None and group.members[1].subscription is None
            assert admin.describe_group("nope").state == "Dead"
            assert admin.list_group_offsets("g0") == {TP("t", 0): OffsetAndMetadata(42, "meta")}
            assert two.requests[-1][2]["topics"] is None                  # v2+: null = every partition
            admin.list_group_offsets("g0", [TP("t", 1)])
            assert two.requests[-1][2]["topics"] == [{"name": "t", "partition_indexes": [1]}]
            admin.commit_group_offsets("g0", {TP("t", 1): 7, TP("t", 0): OffsetAndMetadata(5, "m")})
            version, body = commits[-1]
            assert body["generation_id_or_member_epoch"] == -1 and body["member_id"] == ""
            assert [(p["partition_index"], p["committed_offset"], p["committed_metadata"])
                    for p in body["topics"][0]["partitions"]] == [(0, 5, "m"), (1, 7, "")]
            with pytest.raises(KafkaError) as refused:
                admin.commit_group_offsets("g0", {TP("t", 0): -5})
            assert refused.value.error is Errors.UNKNOWN_MEMBER_ID
    finally:
        for b in brokers:
            b.close()


def test_topic_admin_follows_the_controller():
    brokers = scripted_cluster(2, {})
    one, two = brokers
    controller = {"id": 1}
    for b in brokers:
        b.handlers[ApiKeys.METADATA] = lambda h, body: metadata_answer(brokers, {}, controller["id"])(h, body)
    seen = []

    def create(broker):
        def answer(header, body):
            seen.append(broker.node_id)
            if broker.node_id != 2:
                controller["id"] = 2                      # the controller moved
                code = Errors.NOT_CONTROLLER.code
            else:
                code = 0
            return {"topics": [{"name": t["name"], "error_code": code, "error_message": None} for t in body["topics"]]}
        return answer

    for b in brokers:
        b.handlers[ApiKeys.CREATE_TOPICS] = create(b)
    try:
        with ClusterAdmin(f"{one.address[0]}:{one.address[1]}", retry_backoff_ms=10) as admin:
            assert admin.create_topics([NewTopic("x", 1, 1)]) == {"x": None}
            assert seen == [1, 2]
    finally:
        for b in brokers:
            b.close()


def test_create_partitions_follows_the_controller_and_answers_per_topic():
    """No controller elected yet, then one that moves (NOT_CONTROLLER for one topic), then a broken connection:
    each is retried; an error that is not NOT_CONTROLLER is that topic's final answer."""
    brokers = scripted_cluster(2, {"a": 1, "b": 1})
    one, two = brokers
    controllers = iter([-1, 1])                             # the first Metadata answer names no controller
    moved = {"to": None}

    def metadata(header, body):
        controller = moved["to"] or next(controllers, 1)
        return metadata_answer(brokers, {"a": 1, "b": 1}, controller)(header, body)

    def create_on_one(header, body):
        moved["to"] = 2
        return {"results": [{"name": t.name, "error_code": Errors.NOT_CONTROLLER.code if t.name == "a" else
                             Errors.INVALID_PARTITIONS.code, "error_message": None if t.name == "a" else "too few"}
                            for t in body.topics]}

    answers_on_two = iter(["drop"])

    def create_on_two(header, body):
        if next(answers_on_two, None) == "drop":           # the connection breaks before the answer
            two.drop_connections()
            return None
        return {"results": [{"name": t.name, "error_code": 0} for t in body.topics]}

    for b in brokers:
        b.handlers[ApiKeys.METADATA] = metadata
    one.handlers[ApiKeys.CREATE_PARTITIONS] = create_on_one
    two.handlers[ApiKeys.CREATE_PARTITIONS] = create_on_two
    try:
        with ClusterAdmin(f"{one.address[0]}:{one.address[1]}", retry_backoff_ms=10) as admin:
            results = admin.create_partitions({"a": NewPartitions(3, [[1, 2], [2, 1]]), "b": 2}, timeout_ms=5000,
                                              validate_only=True)
            with pytest.raises(TypeError, match="maps topic names"):
                admin.create_partitions(["a"])
        assert list(results) == ["a", "b"] and results["a"] is None
        assert results["b"].error is Errors.INVALID_PARTITIONS and str(results["b"]) == "INVALID_PARTITIONS (37): too few"
        sent = [(b.node_id, body) for b in brokers for api, _, body in b.requests if api == ApiKeys.CREATE_PARTITIONS]
        assert [(node, [t.name for t in body.topics]) for node, body in sent] == [(1, ["a", "b"]), (2, ["a"]), (2, ["a"])]
        first = sent[0][1]
        assert (first.timeout_ms, first.validate_only) == (5000, True)
        assert [(t.name, t.count, t.assignments and [a.broker_ids for a in t.assignments]) for t in first.topics] == [
            ("a", 3, [[1, 2], [2, 1]]), ("b", 2, None)]
    finally:
        for b in brokers:
            b.close()


def test_a_controller_that_keeps_refusing_is_each_topics_answer_after_the_timeout():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {"t": 1})
    broker.handlers[ApiKeys.CREATE_PARTITIONS] = lambda h, b: {"results": [
        {"name": t.name, "error_code": Errors.NOT_CONTROLLER.code} for t in b.topics]}
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", request_timeout_ms=400,
                          retry_backoff_ms=20) as admin:
            results = admin.create_partitions({"t": 2, "u": 3})
        assert {t: r.error for t, r in results.items()} == {"t": Errors.NOT_CONTROLLER, "u": Errors.NOT_CONTROLLER}
        assert [api for api, _ in broker.apis_seen()].count("CREATE_PARTITIONS") >= 2
    finally:
        broker.close()


def configs_answer(entries: dict):
    """A DescribeConfigs handler: `entries` maps a topic to [(name, value, source)]; another topic is unknown."""
    def answer(header, body):
        results = []
        for r in body.resources:
            if r.resource_name not in entries:
                results.append({"error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION.code, "error_message": None,
                                "resource_type": 2, "resource_name": r.resource_name, "configs": []})
                continue
            results.append({"error_code": 0, "error_message": None, "resource_type": 2,
                            "resource_name": r.resource_name, "configs": [
                                {"name": n, "value": v, "read_only": False, "is_default": s == 5,
                                 "config_source": s, "is_sensitive": n == "secret", "synonyms": []}
                                for n, v, s in entries[r.resource_name]]})
        return {"throttle_time_ms": 0, "results": results}
    return answer


def test_describe_configs_reads_each_entrys_source_in_v0_and_v1():
    entries = {"t": [("retention.ms", "1000", 1), ("segment.bytes", "1024", 4), ("cleanup.policy", "delete", 5),
                     ("secret", None, 9)]}
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {"t": 1})
    broker.handlers[ApiKeys.DESCRIBE_CONFIGS] = configs_answer(entries)
    bootstrap = f"{broker.address[0]}:{broker.address[1]}"
    try:
        with ClusterAdmin(bootstrap) as admin:
            configs = admin.describe_configs(["t", "t"])
            assert list(configs) == ["t"]
            t = configs["t"]
            assert list(t) == ["cleanup.policy", "retention.ms", "secret", "segment.bytes"]
            assert [e.source for e in t.values()] == [ConfigSource.DEFAULT_CONFIG, ConfigSource.TOPIC_CONFIG,
                                                      ConfigSource.UNKNOWN, ConfigSource.STATIC_BROKER_CONFIG]
            assert t["secret"] == ConfigEntry("secret", None, ConfigSource.UNKNOWN, False, True)
            assert admin.describe_configs([]) == {}
            with pytest.raises(TypeError, match="not the string"):
                admin.describe_configs("t")
            with pytest.raises(UnknownTopicOrPartitionError, match="'gone' does not exist"):
                admin.describe_configs(["t", "gone"])
        assert [v for api, v, _ in broker.requests if api == ApiKeys.DESCRIBE_CONFIGS] == [2, 2]

        # a broker of Kafka 0.11 answers v0: only "is it a default"; for a topic, anything else is its override
        broker.handlers[ApiKeys.API_VERSIONS] = lambda h, b: {"error_code": 0, "api_keys": [
            {**r, "max_version": 0} if r["api_key"] == ApiKeys.DESCRIBE_CONFIGS.value else r
            for r in ApiKeys.version_ranges()]}
        with ClusterAdmin(bootstrap) as admin:
            t = admin.describe_configs(["t"])["t"]
        assert broker.requests[-1][:2] == (ApiKeys.DESCRIBE_CONFIGS, 0)
        assert {n: e.source for n, e in t.items()} == {
            "cleanup.policy": ConfigSource.DEFAULT_CONFIG, "retention.ms": ConfigSource.TOPIC_CONFIG,
            "secret": ConfigSource.TOPIC_CONFIG, "segment.bytes": ConfigSource.TOPIC_CONFIG}
    finally:
        broker.close()


def test_describe_configs_retries_a_retriable_error():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {"t": 1})
    answered = configs_answer({"t": [("retention.ms", "5", 1)]})
    codes = iter([Errors.REQUEST_TIMED_OUT.code])

    def answer(header, body):
        code = next(codes, None)
        if code is None:
            return answered(header, body)
        return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": "busy", "resource_type": 2,
                                                    "resource_name": "t", "configs": []}]}
    broker.handlers[ApiKeys.DESCRIBE_CONFIGS] = answer
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", retry_backoff_ms=10) as admin:
            assert admin.describe_configs(["t"])["t"]["retention.ms"].value == "5"
        assert [api for api, _ in broker.apis_seen()].count("DESCRIBE_CONFIGS") == 2
    finally:
        broker.close()


def test_replicas_on_brokers_that_are_down_stay_as_placeholders():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {"t": 1}, placements={("t", 0): (0, [0, 5, 6], [0, 6])})
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}") as admin:
            (partition,) = admin.describe_topics(["t"])["t"]
            assert [n.id for n in admin.describe_cluster().nodes] == [0]
        assert partition.leader == broker.node
        assert partition.replicas == (broker.node, Node(5, "", -1), Node(6, "", -1))
        assert partition.in_sync_replicas == (broker.node, Node(6, "", -1))
    finally:
        broker.close()


def test_a_coordinator_named_without_a_usable_address_is_asked_for_again():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    answers = iter([("", 9092), ("localhost", -1)])

    def find(header, body):
        host, port = next(answers, broker.address)
        return {"error_code": 0, "node_id": 0, "host": host, "port": port}
    broker.handlers[ApiKeys.FIND_COORDINATOR] = find
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", retry_backoff_ms=10) as admin:
            assert admin.find_coordinator("g") == broker.node
        assert [api for api, _ in broker.apis_seen()].count("FIND_COORDINATOR") == 3
    finally:
        broker.close()


def test_metadata_takes_a_broker_it_cannot_connect_to_as_down(caplog):
    broker = ScriptedBroker(node_id=0)
    good = metadata_answer([broker], {"t": 1})

    def answer(header, body):
        response = good(header, body)
        response["brokers"] += [{"node_id": 8, "host": "", "port": 9092},
                                {"node_id": 9, "host": "localhost", "port": 70_000}]
        for topic in response["topics"]:
            topic["partitions"].append({"error_code": 0, "partition_index": 1, "leader_id": 9,
                                        "replica_nodes": [9, 8], "isr_nodes": [9]})
        return response
    broker.handlers[ApiKeys.METADATA] = answer
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", retry_backoff_ms=10) as admin:
            cluster = admin.describe_cluster(["t"])
        assert [n.id for n in cluster.nodes] == [0]
        assert cluster.leader_for(TopicPartition("t", 1)) is None        # its leader is taken as down
        assert "cannot be connected to, taken as down" in caplog.text
    finally:
        broker.close()


def test_retriable_coordinator_errors_refind_the_coordinator():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    broker.handlers[ApiKeys.FIND_COORDINATOR] = lambda h, b: {"error_code": 0, "node_id": 0,
                                                              "host": broker.address[0], "port": broker.address[1]}
    answers = iter([Errors.COORDINATOR_LOAD_IN_PROGRESS.code, Errors.NOT_COORDINATOR.code, 0])
    broker.handlers[ApiKeys.OFFSET_FETCH] = lambda h, b: {"error_code": next(answers), "topics": []}
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", retry_backoff_ms=10) as admin:
            assert admin.list_group_offsets("g") == {}
        assert [api for api, _ in broker.apis_seen() if api in ("FIND_COORDINATOR", "OFFSET_FETCH")] == [
            "FIND_COORDINATOR", "OFFSET_FETCH"] * 3
    finally:
        broker.close()


def test_delete_consumer_groups_sends_each_group_to_its_coordinator_and_reports_each():
    """Beyond 0.10 (DeleteGroups): a moved coordinator is found again; refusals come back per group."""
    brokers = scripted_cluster(2, {})
    coordinators = {"a": brokers[0], "b": brokers[1], "c": brokers[1]}
    answers = {"a": iter([Errors.NOT_COORDINATOR, Errors.NONE]), "b": iter([Errors.NON_EMPTY_GROUP]),
               "c": iter([Errors.GROUP_ID_NOT_FOUND])}

    def find_coordinator(header, body):
        host, port = coordinators[body.key].address
        return {"error_code": 0, "node_id": coordinators[body.key].node_id, "host": host, "port": port}

    def delete_groups(header, body):
        (group,) = body.groups_names
        return {"throttle_time_ms": 0, "results": [{"group_id": group, "error_code": next(answers[group]).code}]}

    for b in brokers:
        b.handlers[ApiKeys.FIND_COORDINATOR] = find_coordinator
        b.handlers[ApiKeys.DELETE_GROUPS] = delete_groups
    try:
        with ClusterAdmin(",".join("{}:{}".format(*b.address) for b in brokers), retry_backoff_ms=10) as admin:
            results = admin.delete_consumer_groups(["a", "b", "c", "a"])
            with pytest.raises(TypeError, match="not the string"):
                admin.delete_consumer_groups("a")
        assert list(results) == ["a", "b", "c"] and results["a"] is None
        assert results["b"].error is Errors.NON_EMPTY_GROUP and results["c"].error is Errors.GROUP_ID_NOT_FOUND
        assert str(results["b"]) == "NON_EMPTY_GROUP (68): The group still has members."
        deletes = [(b.node_id, body.groups_names) for b in brokers for api, _, body in b.requests
                   if api == ApiKeys.DELETE_GROUPS]
        assert sorted(deletes) == [(1, ["a"]), (1, ["a"]), (2, ["b"]), (2, ["c"])]
        assert {v for b in brokers for api, v, _ in b.requests if api == ApiKeys.DELETE_GROUPS} == {1}
    finally:
        for b in brokers:
            b.close()


def test_metadata_without_brokers_is_retried_not_adopted():
    """A broker listens before it registers: its first answers list no brokers at all."""
    broker = ScriptedBroker(node_id=0)
    registered = metadata_answer([broker], {"t": 1})
    answers = iter([{**registered(None, {"topics": None}), "brokers": []}] * 2)
    broker.handlers[ApiKeys.METADATA] = lambda h, b: next(answers, None) or registered(h, b)
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", retry_backoff_ms=10) as admin:
            assert [n.id for n in admin.describe_cluster().nodes] == [0]
        assert [api for api, _ in broker.apis_seen()].count("METADATA") >= 3   # two empty answers retried
    finally:
        broker.close()


def test_a_call_to_a_node_that_refuses_connections_fails_at_once_and_retriably():
    """A dead leader stays in the metadata until its session times out: the call to it must end with
    a retriable error the caller can act on, not wait out the whole request timeout (Kafka's awaitReady)."""
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    with socket.socket() as unused:                       # a port nobody listens on
        unused.bind(("127.0.0.1", 0))
        dead = Node(7, "127.0.0.1", unused.getsockname()[1])
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}", request_timeout_ms=30_000,
                          retry_backoff_ms=10) as admin:
            with pytest.raises(KafkaError) as failed:
                admin.call(dead, ApiKeys.METADATA, {"topics": []})
        assert failed.value.error is Errors.NETWORK_EXCEPTION and failed.value.retriable
        assert f"node 7 ({dead.host}:{dead.port}) failed" in str(failed.value)
    finally:
        broker.close()


def test_non_retriable_errors_raise_and_unreachable_cluster_times_out():
    broker = ScriptedBroker(node_id=0)
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    bootstrap = f"{broker.address[0]}:{broker.address[1]}"
    broker.handlers[ApiKeys.FIND_COORDINATOR] = lambda h, b: {
        "error_code": Errors.GROUP_AUTHORIZATION_FAILED.code, "error_message": "no", "node_id": -1,
        "host": "", "port": -1}
    try:
        with ClusterAdmin(f"{broker.address[0]}:{broker.address[1]}") as admin:
            with pytest.raises(KafkaError) as denied:
                admin.find_coordinator("g")
            assert denied.value.error is Errors.GROUP_AUTHORIZATION_FAILED
    finally:
        broker.close()
    with ClusterAdmin(bootstrap, request_timeout_ms=300) as admin:
        with pytest.raises(TimeoutError, match="was not ready within 300 ms"):
            admin.describe_cluster()
    with pytest.raises(ValueError, match="bootstrap.servers"):
        ClusterAdmin("no-port")


# --- librdkafka's mock cluster ---------------------------------------------------------------

@pytest.mark.mock_cluster
def test_offsets_and_coordinator_on_the_mock_cluster(mock_cluster):
    topic, group = f"adm-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:8]}"
    with ClusterAdmin(mock_cluster.bootstrap) as admin:
        admin.metadata.allow_auto_topic_creation = True
        admin.metadata.add_topic(topic)               # the mock creates topics on a Metadata request
        admin.client.poll(0, admin._time.milliseconds())
        for _ in range(100):
            admin.metadata.request_update()
            admin.client.poll(50, admin._time.milliseconds())
            partitions = admin.metadata.fetch().partitions_for_topic(topic)
            if len(partitions) == 4 and all(p.leader for p in partitions):
                break
        tps = [TP(topic, p) for p in range(4)]
        assert [o.offset for o in admin.list_offsets({tp: LATEST_TIMESTAMP for tp in tps}).values()] == [0] * 4
        assert admin.find_coordinator(group).id in (1, 2, 3)
        admin.commit_group_offsets(group, {tps[0]: 0, tps[3]: 0})
        assert admin.list_group_offsets(group, tps) == {tps[0]: OffsetAndMetadata(0), tps[3]: OffsetAndMetadata(0)}
