"""NetworkClient (2.4.4-2.4.5): bootstrap and metadata, ApiVersions negotiation and the error-35
fallback, correlation-id checking, request timeouts and reconnect backoff on a mock clock, acks=0,
the in-flight cap, least-loaded node choice; against scripted loopback brokers and against
librdkafka's mock cluster (metadata, ListOffsets, FindCoordinator, a produced batch)."""
from __future__ import annotations

import random
import time
import uuid

import pytest
from scripted_broker import ScriptedBroker, metadata_answer, scripted_cluster

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.cluster_connection_states import ConnectionState
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import (
    CorrelationIdMismatchError, ManualMetadataUpdater, NetworkClient,
)
from kafka_edu.common.cluster import Node, TopicPartition, parse_bootstrap_servers
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.protocol.header import encode_response
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.utils.time import SYSTEM_TIME, MockTime


def now() -> int:
    return SYSTEM_TIME.milliseconds()


def poll_until(client, condition, seconds=10):
    responses = []
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        responses += client.poll(50, now())
    return responses


def await_ready(client, node, seconds=10):
    poll_until(client, lambda: client.ready(node, now()), seconds)


def call(client, node_id, api, body, **kwargs):
    """Send one request to a ready node and poll until its response arrives."""
    got = []
    client.send(client.new_client_request(node_id, api, body, callback=got.append, **kwargs), now())
    poll_until(client, lambda: got)
    return got[0]


def lone_client(broker, **kwargs):
    return NetworkClient(KSelector(), metadata_updater=ManualMetadataUpdater([broker.node]), **kwargs)


def mock_clock_client(broker, clock):
    """A client whose requests time out after 5 s of `clock`, connected to `broker`."""
    client = NetworkClient(KSelector(time=clock), metadata_updater=ManualMetadataUpdater([broker.node]),
                           request_timeout_ms=5_000, time=clock)
    deadline = time.monotonic() + 10
    while not client.ready(broker.node, clock.milliseconds()):
        assert time.monotonic() < deadline
        client.poll(20, clock.milliseconds())
    return client


@pytest.fixture
def brokers():
    cluster = scripted_cluster(3, {"events": 3})
    yield cluster
    for b in cluster:
        b.close()


@pytest.fixture
def broker():
    lone = ScriptedBroker(node_id=0)
    lone.handlers[ApiKeys.METADATA] = metadata_answer([lone], {"events": 1})
    yield lone
    lone.close()


def test_bootstrap_learns_the_cluster(brokers):
    metadata = Metadata()
    metadata.add_topic("events")
    metadata.bootstrap([brokers[1].address])
    client = NetworkClient(KSelector(), metadata, rng=random.Random(1))
    try:
        poll_until(client, lambda: not metadata.fetch().is_bootstrap)
        cluster = metadata.fetch()
        assert [n.id for n in cluster.nodes] == [1, 2, 3]
        assert [p.leader.id for p in cluster.partitions_for_topic("events")] == [1, 2, 3]
        assert cluster.controller.id == 1 and cluster.cluster_id == "scripted"
        assert brokers[1].apis_seen() == [("API_VERSIONS", 2), ("METADATA", 8)]
        assert brokers[1].requests[1][2]["topics"] == [{"name": "events"}]
        assert client.api_versions["-1"].ranges[ApiKeys.METADATA] == (0, 8)
    finally:
        client.close()


def test_requests_reach_each_leader_and_metadata_all_topics(brokers):
    for b in brokers:
        b.handlers[ApiKeys.FIND_COORDINATOR] = lambda header, body, b=b: {
            "error_code": 0, "node_id": b.node_id, "host": "h", "port": 1}
    metadata = Metadata()
    metadata.need_metadata_for_all_topics = True
    metadata.bootstrap([brokers[0].address])
    client = NetworkClient(KSelector(), metadata)
    try:
        poll_until(client, lambda: not metadata.fetch().is_bootstrap)
        assert brokers[0].requests[1][2]["topics"] is None          # null = all topics (v1+)
        assert metadata.topics == ["events"]
        for p in range(3):
            leader = metadata.fetch().leader_for(TopicPartition("events", p))
            await_ready(client, leader)
            response = call(client, leader.id_string, ApiKeys.FIND_COORDINATOR, {"key": "g"})
            assert response.body.node_id == leader.id and not response.disconnected
    finally:
        client.close()


def test_correlation_id_mismatch_raises_and_closes(broker):
    broker.handlers[ApiKeys.FIND_COORDINATOR] = lambda header, body: encode_response(
        header.correlation_id + 1, ApiKeys.FIND_COORDINATOR, header.api_version,
        {"error_code": 0, "node_id": 0, "host": "h", "port": 1})
    client = lone_client(broker)
    try:
        await_ready(client, broker.node)
        got = []
        client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"}, callback=got.append),
                    now())
        with pytest.raises(CorrelationIdMismatchError, match=r"does not match request"):
            poll_until(client, lambda: got)
        assert len(got) == 1 and got[0].disconnected
        assert client.connection_states.state("0") is ConnectionState.DISCONNECTED
        assert "0" not in client.selector.channels and client.in_flight_request_count() == 0
    finally:
        client.close()


def test_request_timeout_on_a_mock_clock(broker):
    broker.handlers[ApiKeys.FIND_COORDINATOR] = lambda header, body: None      # never answers
    clock = MockTime(start_ms=10_000)
    client = mock_clock_client(broker, clock)
    try:
        deadline = time.monotonic() + 10
        got = []
        client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                              callback=got.append), clock.milliseconds())
        while broker.apis_seen()[-1][0] != "FIND_COORDINATOR":
            assert time.monotonic() < deadline
            client.poll(20, clock.milliseconds())
        clock.sleep(5_000)
        assert client.poll(0, clock.milliseconds()) == [] and got == []
        clock.sleep(1)
        responses = client.poll(0, clock.milliseconds())
        assert [r.disconnected for r in responses] == [True] and got == responses
        assert client.connection_states.state("0") is ConnectionState.DISCONNECTED
        assert "0" not in client.selector.channels
    finally:
        client.close()


def test_reconnect_backoff_on_a_mock_clock(broker):
    clock = MockTime(start_ms=50_000)
    client = NetworkClient(KSelector(time=clock), metadata_updater=ManualMetadataUpdater([broker.node]),
                           reconnect_backoff_ms=200, time=clock)
    try:
        deadline = time.monotonic() + 10
        while not client.ready(broker.node, clock.milliseconds()):
            assert time.monotonic() < deadline
            client.poll(20, clock.milliseconds())
        assert broker.accepted == 1
        broker.drop_connections()
        while client.connection_states.state("0") is not ConnectionState.DISCONNECTED:
            assert time.monotonic() < deadline
            client.poll(20, clock.milliseconds())
        disconnected_at = clock.milliseconds()
        clock.sleep(199)
        assert not client.ready(broker.node, clock.milliseconds())
        assert client.connection_states.state("0") is ConnectionState.DISCONNECTED
        assert client.connection_delay(broker.node, clock.milliseconds()) == 200 - (clock.milliseconds() - disconnected_at)
        clock.sleep(1)
        assert not client.ready(broker.node, clock.milliseconds())      # starts connecting now
        assert client.connection_states.state("0") is ConnectionState.CONNECTING
        while not client.ready(broker.node, clock.milliseconds()):
            assert time.monotonic() < deadline
            client.poll(20, clock.milliseconds())
        assert broker.accepted == 2
    finally:
        client.close()


def test_api_versions_fallback_on_error_35():
    ranges = [{"api_key": ApiKeys.API_VERSIONS, "min_version": 0, "max_version": 1},
              {"api_key": ApiKeys.METADATA, "min_version": 0, "max_version": 2},
              {"api_key": ApiKeys.FIND_COORDINATOR, "min_version": 0, "max_version": 0}]

    def api_versions(header, body):
        error = Errors.UNSUPPORTED_VERSION.code if header.api_version > 1 else 0
        version = 0 if error else header.api_version            # an error answer is always v0
        return encode_response(header.correlation_id, ApiKeys.API_VERSIONS, version,
                               {"error_code": error, "api_keys": ranges, "throttle_time_ms": 0})

    broker = ScriptedBroker({ApiKeys.API_VERSIONS: api_versions,
                             ApiKeys.FIND_COORDINATOR: lambda h, b: {"error_code": 0, "node_id": 0,
                                                                     "host": "h", "port": 1}})
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    client = lone_client(broker)
    try:
        await_ready(client, broker.node)
        call(client, "0", ApiKeys.FIND_COORDINATOR, {"key": "g"})
        call(client, "0", ApiKeys.METADATA, {"topics": []})
        assert broker.apis_seen() == [("API_VERSIONS", 2), ("API_VERSIONS", 1), ("FIND_COORDINATOR", 0),
                                      ("METADATA", 2)]
        with pytest.raises(KafkaError, match="UNSUPPORTED_VERSION.*ListGroups not at all"):
            client.send(client.new_client_request("0", ApiKeys.LIST_GROUPS, {}), now())
    finally:
        client.close()
        broker.close()


def test_api_versions_error_other_than_35_closes_the_connection():
    broker = ScriptedBroker({ApiKeys.API_VERSIONS: lambda h, b: {"error_code": Errors.UNKNOWN_SERVER_ERROR.code,
                                                                 "api_keys": []}})
    client = lone_client(broker)
    try:
        assert not client.ready(broker.node, now())
        poll_until(client, lambda: broker.apis_seen() and client.connection_failed("0"))
        assert "0" not in client.selector.channels and "0" not in client.api_versions
    finally:
        client.close()
        broker.close()


def test_send_requires_a_ready_node(broker):
    client = lone_client(broker)
    try:
        with pytest.raises(IllegalStateError, match="not ready"):
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"}), now())
        with pytest.raises(ValueError):
            client.ready(Node(5, "", -1), now())
    finally:
        client.close()


def test_acks_zero_completes_when_written_and_in_flight_cap(broker):
    held = []
    broker.handlers[ApiKeys.PRODUCE] = lambda header, body: held.append(header) if body["acks"] else None
    client = lone_client(broker, max_in_flight_requests_per_connection=1)
    body = {"acks": 0, "timeout_ms": 100, "topic_data": []}
    try:
        await_ready(client, broker.node)
        got = []
        client.send(client.new_client_request("0", ApiKeys.PRODUCE, body, expect_response=False,
                                              callback=got.append), now())
        poll_until(client, lambda: got)
        assert got[0].body is None and not got[0].disconnected and client.in_flight_request_count() == 0
        client.send(client.new_client_request("0", ApiKeys.PRODUCE, {**body, "acks": 1}), now())
        poll_until(client, lambda: held)
        assert client.in_flight_request_count("0") == 1
        assert not client.can_send_request("0") and not client.ready(broker.node, now())
    finally:
        client.close()


def test_an_answer_to_acks_zero_still_completes_it_then_closes(broker):
    """librdkafka's mock cluster answers acks=0 produces; a Kafka broker never does."""
    broker.handlers[ApiKeys.PRODUCE] = lambda header, body: {"responses": [], "throttle_time_ms": 0}
    client = lone_client(broker)
    try:
        await_ready(client, broker.node)
        got = []
        client.send(client.new_client_request("0", ApiKeys.PRODUCE, {"acks": 0, "timeout_ms": 100, "topic_data": []},
                                              expect_response=False, callback=got.append), now())
        with pytest.raises(IllegalStateError):
            poll_until(client, lambda: "0" not in client.selector.channels)
        assert len(got) == 1 and got[0].body is None and not got[0].disconnected    # its callback ran
        assert client.connection_states.state("0") is ConnectionState.DISCONNECTED
    finally:
        client.close()


def test_least_loaded_node_prefers_idle_connected_and_skips_backoff():
    nodes = [Node(1, "127.0.0.1", 1), Node(2, "127.0.0.1", 2), Node(3, "127.0.0.1", 3)]
    client = NetworkClient(KSelector(), metadata_updater=ManualMetadataUpdater(nodes), rng=random.Random(0))
    try:
        states = client.connection_states
        states.connecting("2", 0)
        states.connected("2")
        assert client.least_loaded_node(0).id == 2
        states.disconnected("2", 0)
        states.connecting("1", 0)
        states.disconnected("1", 0)
        assert client.least_loaded_node(10).id == 3             # 1 and 2 are in reconnect backoff
        states.connecting("3", 0)
        states.disconnected("3", 0)
        assert client.least_loaded_node(10) is None
        assert client.least_loaded_node(100).id in (1, 2, 3)
    finally:
        client.close()


def test_empty_metadata_response_is_ignored():
    broker = ScriptedBroker({ApiKeys.METADATA: lambda h, b: {"brokers": [], "topics": []}})
    metadata = Metadata(refresh_backoff_ms=60_000)
    metadata.bootstrap([broker.address])
    client = NetworkClient(KSelector(), metadata)
    try:
        poll_until(client, lambda: ("METADATA", 8) in broker.apis_seen()
                   and not client.metadata_updater.fetch_in_progress)
        assert metadata.fetch().is_bootstrap and metadata.version == 1
        assert metadata.time_to_next_update(now()) > 0               # the failed attempt starts the backoff
    finally:
        client.close()
        broker.close()


def test_disconnect_during_metadata_fetch_allows_the_next(broker):
    broker.handlers[ApiKeys.METADATA] = lambda header, body: broker.drop_connections()
    metadata = Metadata()
    metadata.bootstrap([broker.address])
    client = NetworkClient(KSelector(), metadata)
    try:
        poll_until(client, lambda: ("METADATA", 8) in broker.apis_seen())
        poll_until(client, lambda: not client.metadata_updater.fetch_in_progress)
        assert metadata.update_requested() and client.connection_failed("-1")
    finally:
        client.close()


def test_parse_bootstrap_servers():
    assert parse_bootstrap_servers("a:1, [::1]:9092") == [("a", 1), ("::1", 9092)]
    for bad in ("a", "a:b", ":9092", "a:0", ""):
        with pytest.raises(ValueError):
            parse_bootstrap_servers(bad)


# --- librdkafka's mock cluster: a broker we did not write ---------------------------------------

@pytest.mark.mock_cluster
def test_against_librdkafka_mock_cluster(mock_cluster):
    topic = f"nc-{uuid.uuid4().hex[:8]}"
    metadata = Metadata()
    metadata.add_topic(topic)
    metadata.bootstrap(parse_bootstrap_servers(mock_cluster.bootstrap))
    client = NetworkClient(KSelector(), metadata, client_id="kafka-edu-test")
    try:
        def known():
            partitions = metadata.fetch().partitions_for_topic(topic)
            if len(partitions) == 4 and all(p.leader for p in partitions):
                return True
            metadata.request_update()
            return False
        poll_until(client, known, seconds=20)
        cluster = metadata.fetch()
        assert [n.id for n in cluster.nodes] == [1, 2, 3]
        tp = TopicPartition(topic, 0)
        leader = cluster.leader_for(tp)
        await_ready(client, leader)
        versions = client.api_versions[leader.id_string]
        assert versions.latest_usable_version(ApiKeys.METADATA) == 8      # ours 0-8, the mock's 0-13

        builder = MemoryRecordsBuilder(magic=2)
        for i in range(5):
            builder.append(1_700_000_000_000 + i, f"k{i}".encode(), f"v{i}".encode(), [])
        batch = bytes(builder.build())
        produced = call(client, leader.id_string, ApiKeys.PRODUCE, {
            "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        (part,) = produced.body.responses[0].partition_responses
        assert part.error_code == 0 and part.base_offset == 0

        def offset(timestamp):
            response = call(client, leader.id_string, ApiKeys.LIST_OFFSETS, {
                "replica_id": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "timestamp": timestamp}]}]})
            (p,) = response.body.topics[0].partitions
            assert p.error_code == 0
            return p.offset
        assert (offset(-2), offset(-1)) == (0, 5)

        coordinator = call(client, leader.id_string, ApiKeys.FIND_COORDINATOR, {"key": "nc-group"})
        assert coordinator.body.error_code == 0 and coordinator.body.node_id in (1, 2, 3)

        fetched = call(client, leader.id_string, ApiKeys.FETCH, {
            "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                        "partition_max_bytes": 1 << 20}]}]})
        records = fetched.body.responses[0].partitions[0].records
        values = [r.value for r in MemoryRecords(records).records()]
        assert values == [f"v{i}".encode() for i in range(5)]
    finally:
        client.close()


def coordinator_answer(header):
    return encode_response(header.correlation_id, ApiKeys.FIND_COORDINATOR, header.api_version,
                           {"error_code": 0, "node_id": 0, "host": "h", "port": 1})


def test_timed_out_connection_leaves_no_stale_frames(broker):
    """KSelector.close(id) drops the frames already read for the connection: the client gave up on
    those requests, and their answers must not turn up on the next poll."""
    held = []

    def find_coordinator(header, body):      # hold the first two, answer all three at once
        held.append(header)
        if len(held) < 3:
            return None
        return b"".join(coordinator_answer(h) for h in held)

    broker.handlers[ApiKeys.FIND_COORDINATOR] = find_coordinator
    clock = MockTime(start_ms=10_000)
    client = mock_clock_client(broker, clock)
    try:
        deadline = time.monotonic() + 10
        got = []
        for _ in range(3):
            while not client.can_send_request("0"):
                assert time.monotonic() < deadline
                client.poll(0, clock.milliseconds())
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                                  callback=got.append), clock.milliseconds())
        while len(held) < 3:                   # written, without reading the answers yet
            assert time.monotonic() < deadline
            client.poll(0, clock.milliseconds()) if client.selector.channels["0"]._send is not None else None
            time.sleep(0.01)
        time.sleep(0.2)                        # all three answers are in the socket buffer
        clock.sleep(5_001)
        client.poll(0, clock.milliseconds())   # reads 3 frames, answers the 1st, times out the 2nd
        assert len(got) == 3 and [r.disconnected for r in got] == [False, True, True]
        assert "0" not in client.selector.channels
        # The connection is gone and its requests answered: the next polls have nothing to deliver.
        for _ in range(3):
            client.poll(0, clock.milliseconds())
    finally:
        client.close()


def test_stale_frames_of_a_closed_connection_are_not_delivered_on_its_successor(broker):
    """NetworkClient.close(node) then reconnect: the old connection's unread answers kill the new one."""
    held = []

    def find_coordinator(header, body):
        held.append(header)
        if len(held) < 2:
            return None
        return b"".join(coordinator_answer(h) for h in held)

    broker.handlers[ApiKeys.FIND_COORDINATOR] = find_coordinator
    client = lone_client(broker, reconnect_backoff_ms=0)
    try:
        deadline = time.monotonic() + 10
        await_ready(client, broker.node)
        got = []
        for _ in range(2):
            while not client.can_send_request("0"):
                client.poll(0, now())
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                                  callback=got.append), now())
        while len(held) < 2 or client.selector.channels["0"].has_send():
            assert time.monotonic() < deadline
            client.poll(0, now()) if client.selector.channels["0"].has_send() else time.sleep(0.01)
        time.sleep(0.2)
        client.poll(0, now())                  # reads both frames: one delivered, one staged
        assert len(got) == 1 and not got[0].disconnected
        client.close("0")                      # e.g. the caller gives up on this node
        assert client.in_flight_request_count("0") == 0
        # a new connection to the same node must work
        await_ready(client, broker.node)
        assert broker.accepted == 2
    finally:
        client.close()


def test_a_topic_missing_from_an_answer_is_asked_for_again_after_the_backoff(broker):
    """A consumer group's leader assigns from its metadata: a new topic that one broker's cache did not
    list yet (UNKNOWN_TOPIC_OR_PARTITION) must be asked for again soon, not at metadata.max.age.ms."""
    answers = iter([metadata_answer([broker], {}), metadata_answer([broker], {"orders": 4})])
    broker.handlers[ApiKeys.METADATA] = lambda header, body: next(answers, metadata_answer([broker], {"orders": 4}))(
        header, body)
    metadata = Metadata(refresh_backoff_ms=50)
    metadata.bootstrap([broker.address])
    metadata.set_topics(["orders"])
    client = NetworkClient(KSelector(), metadata)
    poll_until(client, lambda: metadata.fetch().partition_count_for_topic("orders") == 4, seconds=5)
