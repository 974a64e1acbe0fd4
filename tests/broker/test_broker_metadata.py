"""ApiVersions and Metadata against a live in-process broker: version edges and auto-creation."""
from __future__ import annotations

import struct

import pytest
from _broker_client import BrokerClient, start_broker
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import REQUEST_HEADER_V2, decode_response

SERVED = {ApiKeys.PRODUCE: (0, 8), ApiKeys.FETCH: (0, 11), ApiKeys.LIST_OFFSETS: (0, 5), ApiKeys.METADATA: (0, 8),
          # the controller's requests (4.6)
          ApiKeys.LEADER_AND_ISR: (0, 1), ApiKeys.STOP_REPLICA: (0, 0), ApiKeys.UPDATE_METADATA: (0, 4),
          ApiKeys.CONTROLLED_SHUTDOWN: (0, 1),
          ApiKeys.API_VERSIONS: (0, 2), ApiKeys.CREATE_TOPICS: (0, 4), ApiKeys.DELETE_TOPICS: (0, 3),
          ApiKeys.INIT_PRODUCER_ID: (0, 1), ApiKeys.DESCRIBE_CONFIGS: (0, 2), ApiKeys.ALTER_CONFIGS: (0, 1), ApiKeys.CREATE_PARTITIONS: (0, 1),
          # the ACL APIs (4.8.5, Beyond 0.10)
          ApiKeys.DESCRIBE_ACLS: (0, 1), ApiKeys.CREATE_ACLS: (0, 1), ApiKeys.DELETE_ACLS: (0, 1),
          # the group APIs (4.7.3)
          ApiKeys.OFFSET_COMMIT: (0, 7), ApiKeys.OFFSET_FETCH: (0, 5), ApiKeys.FIND_COORDINATOR: (0, 2),
          ApiKeys.JOIN_GROUP: (0, 5), ApiKeys.HEARTBEAT: (0, 3), ApiKeys.LEAVE_GROUP: (0, 3),
          ApiKeys.SYNC_GROUP: (0, 3), ApiKeys.DESCRIBE_GROUPS: (0, 4), ApiKeys.LIST_GROUPS: (0, 2),
          ApiKeys.DELETE_GROUPS: (0, 1),   # Beyond 0.10 and beyond DESIGN.md's list (Kafka 1.1)
          # leader epochs between brokers (Beyond 0.10: KIP-101, 4.5)
          ApiKeys.OFFSET_FOR_LEADER_EPOCH: (0, 3)}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_lists_exactly_the_served_apis(client, version):
    response = client.call(ApiKeys.API_VERSIONS, version, {})
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SERVED


def test_newer_api_versions_gets_a_v0_answer_with_error_35_and_the_connection_stays_open(client):
    frame = bytearray(4)
    REQUEST_HEADER_V2.write_to(frame, {"api_key": 18, "api_version": 3, "correlation_id": 77,
                                       "client_id": "new", "tagged_fields": {}})
    frame += b"\x06kcat3\x041.0\x00"
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    client.sock.sendall(frame)
    size = struct.unpack(">i", client.recv_exactly(4))[0]
    correlation_id, body = decode_response(client.recv_exactly(size), ApiKeys.API_VERSIONS, 0)
    assert correlation_id == 77 and body.error_code == Errors.UNSUPPORTED_VERSION.code
    assert {k.api_key for k in body.api_keys} == set(SERVED)
    assert client.call(ApiKeys.API_VERSIONS, 2, {}).error_code == 0     # the client steps down and goes on


@pytest.fixture(scope="module")
def everyone(broker):
    with BrokerClient(broker.bound_port()) as client:
        client.create_topic("everyone", partitions=2)


@pytest.mark.parametrize("version", range(0, 9))
def test_every_metadata_version_lists_broker_and_topic(broker, client, everyone, version):
    response = client.metadata(["everyone"], version=version)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.bound_port())]
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.name == "everyone"
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.error_code) for p in topic.partitions] == \
        [(0, 0, [0], [0], 0), (1, 0, [0], [0], 0)]
    if version >= 1:
        assert response.controller_id == 0
    if version >= 2:
        assert response.cluster_id == broker.cluster_id and len(broker.cluster_id) == 22
    if version >= 7:
        assert all(p.leader_epoch >= 0 for p in topic.partitions)


def test_empty_topic_list_means_all_in_v0_and_none_later_null_means_all(client, everyone):
    assert "everyone" in {t.name for t in client.metadata([], version=0).topics}
    assert client.metadata([], version=1).topics == []
    assert "everyone" in {t.name for t in client.metadata(None, version=1).topics}


def test_auto_create_answers_leader_not_available_then_a_leader(broker, client):
    (first,) = client.metadata(["auto-made"]).topics
    assert first.error_code == Errors.LEADER_NOT_AVAILABLE.code
    topic = wait_for(lambda: [t for t in client.metadata(["auto-made"]).topics if t.error_code == 0],
                     what="a leader for auto-made")[0]
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 0)]
    data, _ = broker.zk_client.get("/brokers/topics/auto-made")
    assert data == b'{"version":1,"partitions":{"0":[0]}}'


def test_no_auto_create_when_v4_request_says_so_or_for_invalid_names(client):
    (topic,) = client.metadata(["not-wanted"], version=4, allow_auto_topic_creation=False).topics
    assert topic.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    (bad,) = client.metadata(["bad name!"]).topics
    assert bad.error_code == Errors.INVALID_TOPIC_EXCEPTION.code
    assert "not-wanted" not in {t.name for t in client.metadata(None).topics}


def test_auto_create_disabled(tmp_path):
    server = start_broker(tmp_path, **{"auto.create.topics.enable": "false"})
    try:
        with BrokerClient(server.bound_port()) as client:
            (topic,) = client.metadata(["nope"], version=1).topics
            assert topic.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
            assert server.zk_client.exists("/brokers/topics/nope") is None
    finally:
        server.shutdown()


def test_internal_offsets_topic_is_flagged_internal_and_created_compacted(broker, client):
    (first,) = client.metadata(["__consumer_offsets"], version=1).topics
    assert first.error_code == Errors.LEADER_NOT_AVAILABLE.code
    topic = wait_for(lambda: [t for t in client.metadata(["__consumer_offsets"], version=1).topics
                              if t.error_code == 0], what="offsets topic")[0]
    assert topic.is_internal and len(topic.partitions) == 50
    assert broker.log_manager.get_log("__consumer_offsets", 0).config.compact
