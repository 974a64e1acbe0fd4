"""ConsumerCoordinator: heartbeat arithmetic, error handling against a scripted broker, and a real group."""
from __future__ import annotations

import threading

import pytest
from _consumer_helpers import create_topic, start_broker
from scripted_broker import scripted_cluster

from kafka_edu.clients.consumer.abstract_coordinator import Heartbeat
from kafka_edu.clients.consumer.assignors import RoundRobinAssignor
from kafka_edu.clients.consumer.consumer_coordinator import CommitFailedError, ConsumerCoordinator
from kafka_edu.clients.consumer.consumer_network_client import ConsumerNetworkClient, WakeupException
from kafka_edu.clients.consumer.subscription_state import (ConsumerRebalanceListener, OffsetAndMetadata,
                                                            SubscriptionState)
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.consumer_protocol import Assignment, ConsumerProtocol
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.utils.time import MockTime

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_heartbeat_arithmetic():
    beat = Heartbeat(1_000, 300, MockTime())
    beat.reset_session_timeout(100)
    assert beat.time_to_next_heartbeat(100) == 300 and beat.should_heartbeat(400)
    beat.sent_heartbeat(400)
    assert beat.time_to_next_heartbeat(500) == 200
    assert not beat.session_timeout_expired(1_100) and beat.session_timeout_expired(1_101)
    beat.received_heartbeat(1_000)
    assert not beat.session_timeout_expired(2_000) and beat.session_timeout_expired(2_001)
    with pytest.raises(ValueError):
        Heartbeat(300, 300)


def coordinator_for(address, group="g", topics=("t",), listener=None, **kwargs):
    metadata = Metadata()
    metadata.bootstrap([address])
    client = ConsumerNetworkClient(NetworkClient(KSelector(), metadata, client_id="c"), metadata, retry_backoff_ms=20)
    subscriptions = SubscriptionState()
    subscriptions.subscribe(list(topics), listener)
    metadata.set_topics(topics)
    defaults = {"auto_commit_enabled": False, "session_timeout_ms": 6_000, "heartbeat_interval_ms": 100,
                "rebalance_timeout_ms": 5_000, "retry_backoff_ms": 20}
    return ConsumerCoordinator(client, group, subscriptions, metadata, **{**defaults, **kwargs})


class ScriptedGroup:
    """Group answers for a scripted broker; each API answers from a queue of error codes (then NONE)."""

    def __init__(self, broker, errors=None):
        self.broker, self.errors = broker, {k: list(v) for k, v in (errors or {}).items()}
        self.generation = 0

    def next_error(self, api):
        queue = self.errors.get(api, [])
        return queue.pop(0) if queue else Errors.NONE

    def handlers(self):
        def find(header, body):
            error = self.next_error(ApiKeys.FIND_COORDINATOR)
            host, port = self.broker.address
            return {"error_code": error.code, "node_id": self.broker.node_id, "host": host, "port": port}

        def join(header, body):
            error = self.next_error(ApiKeys.JOIN_GROUP)
            if error is Errors.MEMBER_ID_REQUIRED:
                return {"error_code": error.code, "generation_id": -1, "protocol_name": "", "leader": "",
                        "member_id": "m-1", "members": []}
            if error is not Errors.NONE:
                return {"error_code": error.code, "generation_id": -1, "protocol_name": "", "leader": "",
                        "member_id": "", "members": []}
            self.generation += 1
            protocol = body["protocols"][0]
            return {"error_code": 0, "generation_id": self.generation, "protocol_name": protocol["name"],
                    "leader": "m-1", "member_id": "m-1",
                    "members": [{"member_id": "m-1", "metadata": protocol["metadata"]}]}

        def sync(header, body):
            error = self.next_error(ApiKeys.SYNC_GROUP)
            mine = {a["member_id"]: a["assignment"] for a in body["assignments"]}.get("m-1", b"")
            return {"error_code": error.code, "assignment": mine if error is Errors.NONE else b""}

        def heartbeat(header, body):
            return {"error_code": self.next_error(ApiKeys.HEARTBEAT).code}

        def commit(header, body):
            error = self.next_error(ApiKeys.OFFSET_COMMIT)
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": error.code} for p in t["partitions"]]}
                for t in body["topics"]]}

        def fetch(header, body):
            return {"error_code": 0, "topics": [{"name": t["name"], "partitions": [
                {"partition_index": p, "committed_offset": 7 if p == 0 else -1, "metadata": "m",
                 "error_code": 0} for p in t["partition_indexes"]]} for t in body["topics"]]}

        def leave(header, body):
            return {"error_code": 0, "members": []}

        return {ApiKeys.FIND_COORDINATOR: find, ApiKeys.JOIN_GROUP: join, ApiKeys.SYNC_GROUP: sync,
                ApiKeys.HEARTBEAT: heartbeat, ApiKeys.OFFSET_COMMIT: commit, ApiKeys.OFFSET_FETCH: fetch,
                ApiKeys.LEAVE_GROUP: leave}


@pytest.fixture
def scripted():
    brokers = scripted_cluster(1, {"t": 2})
    yield brokers[0]
    brokers[0].close()


def install(broker, errors=None):
    group = ScriptedGroup(broker, errors)
    broker.handlers.update(group.handlers())
    return group


def test_join_retries_through_errors_and_assigns(scripted):
    install(scripted, {ApiKeys.FIND_COORDINATOR: [Errors.COORDINATOR_NOT_AVAILABLE],
                       ApiKeys.JOIN_GROUP: [Errors.MEMBER_ID_REQUIRED, Errors.COORDINATOR_LOAD_IN_PROGRESS],
                       ApiKeys.SYNC_GROUP: [Errors.REBALANCE_IN_PROGRESS]})
    seen = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions):
            seen.append(sorted(partitions))

    c = coordinator_for(scripted.address, listener=Listener())
    c.ensure_partition_assignment()
    assert c.member_id == "m-1" and c.generation == 2            # the SyncGroup error cost one generation
    assert sorted(c.subscriptions.assigned_partitions()) == [T0, T1] and seen == [[T0, T1]]
    joins = [body["member_id"] for api, _, body in scripted.requests if api is ApiKeys.JOIN_GROUP]
    assert joins[0] == "" and joins[1] == "m-1"
    assert c.coordinator.id == 2**31 - 1 - scripted.node_id
    c.client.close()


def test_a_coordinator_named_without_a_usable_address_is_looked_up_again(scripted, caplog):
    """A broker that names the coordinator with no host (or a port TCP has not) gave a broken answer:
    the lookup fails as COORDINATOR_NOT_AVAILABLE and is asked again, instead of an error escaping
    the response's callback and leaving the lookup pending for ever."""
    install(scripted)
    good = scripted.handlers[ApiKeys.FIND_COORDINATOR]
    answers = iter([("", 9092), ("localhost", 0), ("localhost", 70_000)])

    def find(header, body):
        host, port = next(answers, (None, None))
        return good(header, body) if host is None else {"error_code": 0, "node_id": 5, "host": host, "port": port}
    scripted.handlers[ApiKeys.FIND_COORDINATOR] = find
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    assert c.coordinator.id == 2**31 - 1 - scripted.node_id and c.generation == 1
    assert sum(1 for api, _, _ in scripted.requests if api is ApiKeys.FIND_COORDINATOR) == 4
    assert not [r for r in caplog.records if "uncaught" in r.getMessage()]
    c.client.close()


def test_the_next_rebalance_commits_and_revokes_after_the_listener_raised(scripted):
    """The member is in the new generation before its listener runs; an exception there (a wake-up,
    which Kafka lets through) must not skip the commit and revocation that come before the next join."""
    install(scripted)
    events = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions):
            events.append(("revoked", sorted(partitions)))

        def on_partitions_assigned(self, partitions):
            events.append(("assigned", sorted(partitions)))
            if len(events) == 2:
                raise WakeupException()

    c = coordinator_for(scripted.address, listener=Listener(), auto_commit_enabled=True,
                        auto_commit_interval_ms=60_000)
    with pytest.raises(WakeupException):
        c.ensure_partition_assignment()
    assert not c.need_rejoin()
    c.subscriptions.seek(T0, 3)
    c.subscriptions.need_reassignment()
    c.ensure_partition_assignment()
    assert events == [("revoked", []), ("assigned", [T0, T1]), ("revoked", [T0, T1]), ("assigned", [T0, T1])]
    [commit] = [b for api, _, b in scripted.requests if api is ApiKeys.OFFSET_COMMIT]
    assert [(t["name"], p["partition_index"], p["committed_offset"])
            for t in commit["topics"] for p in t["partitions"]] == [("t", 0, 3)]
    c.client.close()


@pytest.mark.parametrize("error, member_reset", [(Errors.REBALANCE_IN_PROGRESS, False),
                                                  (Errors.ILLEGAL_GENERATION, False),
                                                  (Errors.UNKNOWN_MEMBER_ID, True)])
def test_heartbeat_errors_ask_for_rejoin(scripted, error, member_reset):
    install(scripted, {ApiKeys.HEARTBEAT: [Errors.NONE, error]})
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    for _ in range(200):
        c.client.poll(20)
        if c.need_rejoin():
            break
    assert c.need_rejoin() and (c.member_id == "") == member_reset
    c.ensure_partition_assignment()
    assert not c.need_rejoin() and c.generation == 2
    c.client.close()


def test_heartbeat_not_coordinator_forgets_coordinator(scripted):
    install(scripted, {ApiKeys.HEARTBEAT: [Errors.NOT_COORDINATOR]})
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    for _ in range(200):
        c.client.poll(20)
        if ("coordinator dead", f"node {2**31 - 1 - scripted.node_id}") in c.events:
            break
    assert ("coordinator dead", f"node {2**31 - 1 - scripted.node_id}") in c.events and not c.need_rejoin()
    c.close()


def test_commit_sync_retries_retriable_and_records_committed(scripted):
    install(scripted, {ApiKeys.OFFSET_COMMIT: [Errors.NOT_COORDINATOR, Errors.COORDINATOR_LOAD_IN_PROGRESS]})
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    c.subscriptions.seek(T0, 3)
    c.subscriptions.seek(T1, 4)
    c.commit_offsets_sync()
    assert c.subscriptions.committed(T0) == OffsetAndMetadata(3)
    commits = [b for api, _, b in scripted.requests if api is ApiKeys.OFFSET_COMMIT]
    assert len(commits) == 3 and commits[-1]["generation_id_or_member_epoch"] == 1
    c.client.close()


def test_commit_after_rebalance_fails_and_asks_for_rejoin(scripted):
    install(scripted, {ApiKeys.OFFSET_COMMIT: [Errors.ILLEGAL_GENERATION]})
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    with pytest.raises(CommitFailedError) as caught:
        c.commit_offsets_sync({T0: OffsetAndMetadata(1)})
    assert not caught.value.retriable and c.need_rejoin()
    c.client.close()


def test_commit_async_callback_and_fatal_errors(scripted):
    install(scripted, {ApiKeys.OFFSET_COMMIT: [Errors.OFFSET_METADATA_TOO_LARGE]})
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    results = []
    c.commit_offsets_async({T0: OffsetAndMetadata(1, "x" * 10)}, lambda offsets, error: results.append(error))
    c.commit_offsets_async({T1: OffsetAndMetadata(2)}, lambda offsets, error: results.append(error))
    # The heartbeat thread polls the network too: if the first answer came back already, its callback
    # ran at the start of the second commit, a call on the consumer's thread, as Kafka allows.
    ran_in_the_second_commit = list(results)
    assert len(ran_in_the_second_commit) <= 1
    for _ in range(500):
        c.client.poll(20)
        assert results == ran_in_the_second_commit, "an async commit callback must wait for the consumer's own thread"
        if len(results) + len(c.completed_offset_commits) == 2:
            break
    c.invoke_completed_offset_commit_callbacks()             # what the next poll() or commit does
    assert isinstance(results[0], KafkaError) and results[0].error is Errors.OFFSET_METADATA_TOO_LARGE
    assert results[1] is None
    c.client.close()


def test_fetch_committed_leaves_out_uncommitted(scripted):
    install(scripted)
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    c.refresh_committed_offsets_if_needed()
    assert c.subscriptions.committed(T0) == OffsetAndMetadata(7, "m") and c.subscriptions.committed(T1) is None
    assert not c.subscriptions.needs_fetch_committed_offsets
    c.client.close()


def test_partition_count_change_triggers_rebalance(scripted):
    install(scripted)
    c = coordinator_for(scripted.address)
    c.ensure_partition_assignment()
    from scripted_broker import metadata_answer
    scripted.handlers[ApiKeys.METADATA] = metadata_answer([scripted], {"t": 3})
    c.client.await_metadata_update(5_000)
    assert c.need_rejoin()
    c.ensure_partition_assignment()
    assert len(c.subscriptions.assigned_partitions()) == 3
    c.client.close()


def test_leader_assigns_with_chosen_protocol(scripted):
    install(scripted)
    c = coordinator_for(scripted.address, assignors=[RoundRobinAssignor()])
    c.ensure_partition_assignment()
    sync = [b for api, _, b in scripted.requests if api is ApiKeys.SYNC_GROUP][-1]
    assert ConsumerProtocol.deserialize_assignment(sync["assignments"][0]["assignment"]) == Assignment([T0, T1])
    join = [b for api, _, b in scripted.requests if api is ApiKeys.JOIN_GROUP][-1]
    assert [p["name"] for p in join["protocols"]] == ["roundrobin"]
    c.client.close()


def test_real_group_splits_and_rebalances_on_leave(tmp_path):
    server = start_broker(tmp_path)
    try:
        create_topic(server, "t", 4)
        address = ("127.0.0.1", server.bound_port())
        a = coordinator_for(address, group="real")
        a.ensure_partition_assignment()
        assert len(a.subscriptions.assigned_partitions()) == 4
        stop = threading.Event()

        def poll_a():
            while not stop.is_set():
                a.ensure_partition_assignment()
                a.client.poll(20)

        poller = threading.Thread(target=poll_a, daemon=True)
        poller.start()
        b = coordinator_for(address, group="real")
        b.ensure_partition_assignment()
        while a.generation != b.generation or len(a.subscriptions.assigned_partitions()) != 2:
            b.client.poll(20)
        stop.set()
        poller.join()
        assert sorted(a.subscriptions.assigned_partitions() + b.subscriptions.assigned_partitions()) == \
            [TopicPartition("t", p) for p in range(4)]
        b_partitions = b.subscriptions.assigned_partitions()
        b.commit_offsets_sync({tp: OffsetAndMetadata(5) for tp in b_partitions})
        b.close()
        for _ in range(500):
            a.ensure_partition_assignment()
            a.client.poll(20)
            if len(a.subscriptions.assigned_partitions()) == 4:
                break
        assert len(a.subscriptions.assigned_partitions()) == 4 and a.generation == 3
        a.refresh_committed_offsets_if_needed()
        for tp in a.subscriptions.assigned_partitions():
            assert a.subscriptions.committed(tp) == (OffsetAndMetadata(5) if tp in b_partitions else None)
        a.close()
        a.client.close()
        b.client.close()
    finally:
        server.shutdown()
