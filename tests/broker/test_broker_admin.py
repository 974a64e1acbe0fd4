"""CreateTopics, DeleteTopics, CreatePartitions and DescribeConfigs on a live broker, checked on the
wire, in ZooKeeper's 0.10 layout and on disk."""
from __future__ import annotations

import json
import os

import pytest
from _broker_client import BrokerClient, records, start_broker, values_of
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors


def topic(name, partitions=1, factor=1, **configs):
    return {"name": name, "num_partitions": partitions, "replication_factor": factor,
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}


def test_create_topics_writes_the_010_layout_and_waits_for_leaders(broker, client):
    result = client.create_topics([topic("layout", 3, **{"retention.ms": "60000"})])["layout"]
    assert (result.error_code, result.error_message) == (0, None)
    zk = broker.zk_client
    assert json.loads(zk.get("/brokers/topics/layout")[0]) == {"version": 1, "partitions": {"0": [0], "1": [0], "2": [0]}}
    state = json.loads(zk.get("/brokers/topics/layout/partitions/1/state")[0])
    assert state == {"version": 1, "leader": 0, "leader_epoch": 0, "controller_epoch": 1, "isr": [0]}
    assert json.loads(zk.get("/config/topics/layout")[0]) == {"version": 1, "config": {"retention.ms": "60000"}}
    assert sorted(broker.metadata_cache.get_partitions("layout")) == [0, 1, 2]     # answered after the leaders
    assert broker.log_manager.get_log("layout", 2).config.retention_ms == 60000


@pytest.mark.parametrize("version", range(0, 5))
def test_create_topics_errors(client, version):
    client.create_topics([topic(f"exists{version}")], version=version)
    results = client.create_topics([
        topic(f"exists{version}"), topic("bad/name"), topic(f"rf{version}", factor=2),
        topic(f"zero{version}", partitions=0), topic(f"cfg{version}", **{"cleanup.policy": "both"}),
        topic(f"twice{version}"), topic(f"twice{version}")], version=version)
    codes = {name: r.error_code for name, r in results.items()}
    assert codes == {f"exists{version}": Errors.TOPIC_ALREADY_EXISTS.code, "bad/name": Errors.INVALID_TOPIC_EXCEPTION.code,
                     f"rf{version}": Errors.INVALID_REPLICATION_FACTOR.code, f"zero{version}": Errors.INVALID_PARTITIONS.code,
                     f"cfg{version}": Errors.INVALID_CONFIG.code, f"twice{version}": Errors.INVALID_REQUEST.code}
    if version >= 1:
        assert "larger than available brokers" in results[f"rf{version}"].error_message


def test_broker_defaults_need_v4(client):
    old = client.create_topics([topic("defaults3", -1, -1)], version=3)["defaults3"]
    assert old.error_code == Errors.INVALID_PARTITIONS.code
    assert client.create_topics([topic("defaults4", -1, -1)], version=4)["defaults4"].error_code == 0


def test_validate_only_creates_nothing_and_collisions_are_refused(broker, client):
    assert client.create_topics([topic("dry.run")], validate_only=True)["dry.run"].error_code == 0
    assert broker.zk_client.exists("/brokers/topics/dry.run") is None
    assert client.create_topics([topic("a.b")])["a.b"].error_code == 0
    assert client.create_topics([topic("a_b")])["a_b"].error_code == Errors.INVALID_TOPIC_EXCEPTION.code


def test_manual_assignment(client):
    assigned = {"name": "manual", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [0]}, {"partition_index": 1, "broker_ids": [0]}]}
    assert client.create_topics([assigned])["manual"].error_code == 0
    both = dict(assigned, name="both", num_partitions=2)
    assert client.create_topics([both])["both"].error_code == Errors.INVALID_REQUEST.code
    unknown = dict(assigned, name="unknown-broker", assignments=[{"partition_index": 0, "broker_ids": [7]}])
    assert client.create_topics([unknown])["unknown-broker"].error_code == Errors.INVALID_REPLICA_ASSIGNMENT.code


def test_create_partitions(broker, client):
    client.create_topic("growing")
    body = {"timeout_ms": 10_000, "validate_only": False, "topics": [
        {"name": "growing", "count": 3, "assignments": None},
        {"name": "missing-topic", "count": 2, "assignments": None}]}
    results = {r.name: r.error_code for r in client.call(ApiKeys.CREATE_PARTITIONS, 1, body).results}
    assert results == {"growing": 0, "missing-topic": Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    assert [p.partition_index for p in client.metadata(["growing"]).topics[0].partitions] == [0, 1, 2]
    assert client.produce("growing", 2, records(b"new partition")).error_code == 0
    for count, error in [(3, Errors.INVALID_PARTITIONS), (2, Errors.INVALID_PARTITIONS)]:
        body = {"timeout_ms": 0, "validate_only": False, "topics": [{"name": "growing", "count": count, "assignments": None}]}
        assert client.call(ApiKeys.CREATE_PARTITIONS, 0, body).results[0].error_code == error.code
    body = {"timeout_ms": 0, "validate_only": True, "topics": [{"name": "growing", "count": 5, "assignments": None}]}
    assert client.call(ApiKeys.CREATE_PARTITIONS, 1, body).results[0].error_code == 0
    assert len(json.loads(broker.zk_client.get("/brokers/topics/growing")[0])["partitions"]) == 3


def test_create_partitions_of_names_no_topic_can_have(client):
    """A name that cannot be a topic names no znode: it does not exist, and the connection stays open."""
    names = ["", ".", "..", "a/b", "/", "nul\x00byte", "x" * 250]
    body = {"timeout_ms": 0, "validate_only": False,
            "topics": [{"name": n, "count": 2, "assignments": None} for n in names]}
    results = {r.name: r.error_code for r in client.call(ApiKeys.CREATE_PARTITIONS, 1, body).results}
    assert results == {n: Errors.UNKNOWN_TOPIC_OR_PARTITION.code for n in names}
    assert client.metadata([]).topics == []                  # the same connection is still served


@pytest.mark.parametrize("partitions", [100_000, 2**31 - 1])
def test_more_partitions_than_a_topic_znode_holds_are_refused(broker, client, partitions):
    """100,000 partitions pass the quick bound and fail the exact one (their JSON is about 1.2 MB);
    2^31 - 1 are refused before any is placed. Nothing is written either way."""
    created = client.create_topics([topic(f"huge{partitions}", partitions)], timeout_ms=0)[f"huge{partitions}"]
    assert created.error_code == Errors.INVALID_PARTITIONS.code
    assert "jute.maxbuffer" in created.error_message
    assert broker.zk_client.exists(f"/brokers/topics/huge{partitions}") is None
    assert broker.zk_client.exists(f"/config/topics/huge{partitions}") is None
    client.create_topic(f"grown{partitions}")
    body = {"timeout_ms": 0, "validate_only": False,
            "topics": [{"name": f"grown{partitions}", "count": partitions, "assignments": None}]}
    result = client.call(ApiKeys.CREATE_PARTITIONS, 1, body).results[0]
    assert (result.error_code, "jute.maxbuffer" in result.error_message) == (Errors.INVALID_PARTITIONS.code, True)
    assert len(json.loads(broker.zk_client.get(f"/brokers/topics/grown{partitions}")[0])["partitions"]) == 1


def test_delete_topics_removes_logs_znodes_and_metadata(broker, client):
    client.create_topic("doomed", 2)
    client.produce("doomed", 0, records(b"bye"))
    log_dir = broker.log_manager.get_log("doomed", 0).dir
    response = client.call(ApiKeys.DELETE_TOPICS, 3, {"topic_names": ["doomed", "never-was"], "timeout_ms": 10_000})
    assert {r.name: r.error_code for r in response.responses} == {"doomed": 0,
                                                                  "never-was": Errors.UNKNOWN_TOPIC_OR_PARTITION.code}
    # As in Kafka, the answer comes once the metadata cache forgot the topic; the controller then
    # deletes the logs (StopReplica) and the znodes.
    wait_for(lambda: not os.path.exists(log_dir), what="the log directory deleted")
    for path in ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed"):
        wait_for(lambda p=path: broker.zk_client.exists(p) is None, what=f"{path} deleted")
    assert client.metadata(["doomed"], version=4, allow_auto_topic_creation=False).topics[0].error_code == \
        Errors.UNKNOWN_TOPIC_OR_PARTITION.code


def test_delete_topics_disabled_by_default(tmp_path):
    server = start_broker(tmp_path)
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("kept")
            for version, error in [(3, Errors.TOPIC_DELETION_DISABLED), (1, Errors.INVALID_REQUEST)]:
                response = client.call(ApiKeys.DELETE_TOPICS, version, {"topic_names": ["kept"], "timeout_ms": 1000})
                assert response.responses[0].error_code == error.code
            server.zk_utils.mark_topic_for_deletion("kept")            # as an old admin tool would
            wait_for(lambda: server.zk_client.exists("/admin/delete_topics/kept") is None, what="the request removed")
            assert client.produce("kept", 0, records(b"still here")).error_code == 0
    finally:
        server.shutdown()


def _configs(client, resource_type, name, keys=None, version=2, synonyms=True):
    body = {"include_synonyms": synonyms, "resources": [
        {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}]}
    result = client.call(ApiKeys.DESCRIBE_CONFIGS, version, body).results[0]
    return result, {c.name: c for c in result.configs}


def test_describe_topic_configs_with_sources_and_synonyms(client):
    client.create_topic("described", cleanup_policy="compact", follower_replication_throttled_replicas="*")
    result, configs = _configs(client, 2, "described")
    assert result.error_code == 0 and len(configs) == 23
    policy, retention = configs["cleanup.policy"], configs["retention.ms"]
    assert (policy.value, policy.config_source, policy.read_only) == ("compact", 1, False)
    assert [(s.name, s.source) for s in policy.synonyms] == [("cleanup.policy", 1), ("log.cleanup.policy", 5)]
    assert (retention.value, retention.config_source) == ("604800000", 5)
    assert [(s.name, s.value) for s in retention.synonyms] == [("log.retention.hours", "168")]
    # every LogConfig key, as Kafka 0.11+: the throttled-replica lists have no broker synonym
    leader = configs["leader.replication.throttled.replicas"]
    follower = configs["follower.replication.throttled.replicas"]
    assert (leader.value, leader.config_source, leader.synonyms) == ("", 5, [])
    assert (follower.value, follower.config_source) == ("*", 1)
    assert [(s.name, s.value, s.source) for s in follower.synonyms] == [(follower.name, "*", 1)]
    _, v0 = _configs(client, 2, "described", ["segment.bytes", "cleanup.policy"], version=0)
    assert {n: c.is_default for n, c in v0.items()} == {"segment.bytes": True, "cleanup.policy": False}


def test_describe_broker_configs_and_errors(broker, client):
    result, configs = _configs(client, 4, "0", synonyms=False)
    assert result.error_code == 0 and configs["broker.id"].value == "0" and configs["broker.id"].config_source == 4
    assert configs["num.partitions"].config_source == 5 and all(c.read_only for c in configs.values())
    assert configs["log.dirs"].value == broker.config["log.dirs"]
    assert _configs(client, 4, "9")[0].error_code == Errors.INVALID_REQUEST.code
    assert _configs(client, 2, "no-such-topic")[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert _configs(client, 99, "x")[0].error_code == Errors.INVALID_REQUEST.code


def test_topic_overrides_survive_a_restart_without_zookeeper_data(tmp_path):
    server = start_broker(tmp_path)
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("compact-me", **{"cleanup_policy": "compact"})
            client.produce("compact-me", 0, records(b"v", keys=[b"k"]))
    finally:
        server.shutdown()
    server = start_broker(tmp_path)
    try:
        assert server.log_manager.get_log("compact-me", 0).config.compact
        with BrokerClient(server.bound_port()) as client:
            assert values_of(client.fetch("compact-me", 0, 0).records) == [b"v"]
    finally:
        server.shutdown()


def _alter(client, name, configs, resource_type=2, validate_only=False, version=0):
    body = {"validate_only": validate_only, "resources": [{"resource_type": resource_type, "resource_name": name,
                                                           "configs": [{"name": k, "value": v}
                                                                       for k, v in configs.items()]}]}
    return client.call(ApiKeys.ALTER_CONFIGS, version, body).responses[0]


def test_alter_configs_replaces_a_topics_overrides_and_the_log_follows(broker, client):
    """AlterConfigs (Beyond 0.10): the overrides are replaced, not merged, and the broker's log applies them."""
    client.create_topic("altered", **{"cleanup_policy": "compact"})
    assert _alter(client, "altered", {"retention.ms": "3600000"}, validate_only=True).error_code == 0
    assert _configs(client, 2, "altered")[1]["retention.ms"].value == "604800000"     # validate_only wrote nothing
    answer = _alter(client, "altered", {"retention.ms": "3600000"}, version=1)
    assert (answer.error_code, answer.resource_name) == (0, "altered")
    _, configs = _configs(client, 2, "altered")
    assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == ("3600000", "delete")
    log = broker.log_manager.get_log("altered", 0)
    wait_for(lambda: log.config.retention_ms == 3_600_000, what="the dynamic config applied to the log")


def test_alter_configs_errors(client):
    client.create_topic("strict")
    bad = _alter(client, "strict", {"retention.ms": "soon"})
    assert bad.error_code == Errors.INVALID_CONFIG.code and "retention.ms" in bad.error_message
    assert _alter(client, "strict", {"retention.ms": None}).error_code == Errors.INVALID_REQUEST.code
    assert _alter(client, "nowhere", {"retention.ms": "1"}).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    broker_resource = _alter(client, "0", {"log.retention.hours": "1"}, resource_type=4)
    assert broker_resource.error_code == Errors.INVALID_REQUEST.code
