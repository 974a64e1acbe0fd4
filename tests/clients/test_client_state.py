"""The NetworkClient's bookkeeping on its own: InFlightRequests, ClusterConnectionStates, Metadata
and the Cluster built from a MetadataResponse (acceptance test 10's refresh rules on a mock clock)."""
from __future__ import annotations

import socket
import threading

import pytest

from kafka_edu.clients.client_request import ClientRequest, IllegalStateError
from kafka_edu.clients.cluster_connection_states import ClusterConnectionStates, ConnectionState
from kafka_edu.clients.in_flight_requests import InFlightRequests
from kafka_edu.clients.metadata import Metadata, cluster_from_metadata_response
from kafka_edu.common.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import RequestHeader
from kafka_edu.common.utils.time import MockTime


def written(node: str, correlation_id: int, sent_ms: int, complete: bool = True) -> ClientRequest:
    request = ClientRequest(node, ApiKeys.PRODUCE, {}, created_ms=sent_ms)
    request.header = RequestHeader(ApiKeys.PRODUCE, 8, correlation_id, "t")
    request.send, request.send_ms = NetworkSend(node, b"x"), sent_ms
    if complete:
        a, b = socket.socketpair()
        request.send.write_to(a)
        a.close()
        b.close()
    return request


def test_in_flight_requests_order_and_limits():
    in_flight = InFlightRequests(max_in_flight_requests_per_connection=2)
    assert in_flight.can_send_more("1")
    in_flight.add(written("1", 1, 0, complete=False))
    assert not in_flight.can_send_more("1")                      # the newest is still being written
    in_flight.complete_last_sent("1")
    in_flight.add(written("1", 2, 0))
    in_flight.add(written("1", 3, 10))
    assert not in_flight.can_send_more("1") and in_flight.can_send_more("2")
    assert in_flight.last_sent("1").correlation_id == 3
    assert in_flight.nodes_with_timed_out_requests(100, 100) == []
    assert in_flight.nodes_with_timed_out_requests(101, 100) == ["1"]
    assert in_flight.complete_next("1").correlation_id == 2         # the oldest answers first
    assert in_flight.count() == 1 and in_flight.counts() == {"1": 1}
    assert [r.correlation_id for r in in_flight.clear_all("1")] == [3]
    with pytest.raises(IllegalStateError):
        in_flight.complete_next("1")
    with pytest.raises(ValueError):
        InFlightRequests(0)


def test_connection_states_backoff():
    states = ClusterConnectionStates(reconnect_backoff_ms=100)
    assert states.can_connect("1", 0) and states.connection_delay("1", 0) == 0
    assert states.state("1") is ConnectionState.DISCONNECTED
    states.connecting("1", 1000)
    assert states.is_connecting("1") and not states.can_connect("1", 5000)
    states.checking_api_versions("1")
    assert not states.is_connected("1")
    states.connected("1")
    assert states.is_connected("1") and states.connection_delay("1", 1000) > 10**15
    states.disconnected("1", 2000)
    assert states.is_blacked_out("1", 2099) and not states.can_connect("1", 2099)
    assert states.connection_delay("1", 2050) == 50
    assert states.can_connect("1", 2100) and not states.is_blacked_out("1", 2100)
    with pytest.raises(IllegalStateError):
        states.connected("9")


def test_metadata_refresh_rules_on_a_mock_clock():
    clock = MockTime()
    metadata = Metadata(refresh_backoff_ms=100, metadata_expire_ms=10_000, time=clock)
    assert metadata.time_to_next_update(0) == 0                    # never refreshed: due at once
    metadata.bootstrap([("h", 1)])
    assert metadata.fetch().is_bootstrap and metadata.version == 1 and metadata.time_to_next_update(0) == 0
    seen = []
    metadata.add_listener(lambda cluster: seen.append(cluster.nodes[0].id))
    metadata.update(Cluster([Node(1, "h", 1)]), now=1000)
    assert seen == [1] and metadata.version == 2 and not metadata.update_requested()
    assert metadata.time_to_next_update(1000) == 10_000 and metadata.time_to_next_update(11_000) == 0
    metadata.add_topic("t")                                     # a new topic asks for an update
    assert metadata.update_requested() and metadata.time_to_next_update(1050) == 50
    metadata.failed_update(now=2000)
    assert metadata.time_to_next_update(2000) == 100 and metadata.time_to_next_update(2100) == 0
    metadata.set_topics(["t"])
    metadata.need_metadata_for_all_topics = True
    metadata.update(Cluster([Node(1, "h", 1)], [PartitionInfo("a", 0, None), PartitionInfo("b", 0, None)]), 3000)
    assert metadata.topics == ["a", "b"]


def test_await_update():
    clock = MockTime(auto_tick_ms=5)
    metadata = Metadata(time=clock)
    with pytest.raises(TimeoutError, match="after 20 ms"):
        metadata.await_update(metadata.version, max_wait_ms=20)
    version = metadata.request_update()
    done = threading.Event()

    def waiter():
        metadata.await_update(version, max_wait_ms=10**9)
        done.set()
    threading.Thread(target=waiter, daemon=True).start()
    metadata.update(Cluster([Node(1, "h", 1)]), now=clock.milliseconds())
    assert done.wait(30)
    with pytest.raises(ValueError):
        metadata.await_update(0, -1)


def test_cluster_from_metadata_response():
    cluster, errors = cluster_from_metadata_response({
        "brokers": [{"node_id": 2, "host": "b", "port": 9}, {"node_id": 1, "host": "a", "port": 9, "rack": "r"}],
        "controller_id": 2, "cluster_id": "c",
        "topics": [
            {"error_code": 0, "name": "t", "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": 1, "leader_id": 2, "replica_nodes": [2, 1, 7], "isr_nodes": [2]},
                {"error_code": 5, "partition_index": 0, "leader_id": -1, "replica_nodes": [1], "isr_nodes": []}]},
            {"error_code": 0, "name": "__consumer_offsets", "is_internal": True, "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}]},
            {"error_code": 29, "name": "secret", "partitions": []},
            {"error_code": 3, "name": "gone", "partitions": []}]})
    assert [n.id for n in cluster.nodes] == [1, 2] and cluster.node_by_id(1).rack == "r"
    assert cluster.controller.id == 2 and cluster.cluster_id == "c"
    assert cluster.topics == ["__consumer_offsets", "t"] and cluster.internal_topics == {"__consumer_offsets"}
    assert cluster.unauthorized_topics == {"secret"}
    assert errors == {"secret": Errors.TOPIC_AUTHORIZATION_FAILED, "gone": Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert cluster.leader_for(TopicPartition("t", 0)) is None and cluster.leader_for(TopicPartition("t", 1)).id == 2
    replicas = cluster.partition(TopicPartition("t", 1)).replicas
    assert replicas[:2] == (cluster.node_by_id(2), cluster.node_by_id(1))
    assert replicas[2] == Node(7, "", -1) and cluster.node_by_id(7) is None     # broker 7 is down: a placeholder
    assert [p.partition for p in cluster.available_partitions_for_topic("t")] == [1]
    assert [p.partition for p in cluster.partitions_for_node(2)] == [1]
    assert [p.topic for p in cluster.partitions_for_node(1)] == ["__consumer_offsets"]
    assert cluster.partition_count_for_topic("t") == 2 and cluster.partition_count_for_topic("x") is None
