"""The group APIs of a live in-process broker over real sockets, with our protocol codec.

Acceptance tests T22 (generations), T23 (heartbeat expiry), T25 (commit and join validation) and T26
(offset expiry, here with a per-request retention) of seed-ch4b, plus every version edge of the nine
group APIs and a restart, and DeleteGroups (Beyond 0.10, Kafka 1.1). T24 (coordinator failover) needs a
cluster and is not here.

Members are plain connections: a parked JoinGroup or SyncGroup is sent on one connection and received
later, while other connections go on talking to the coordinator.
"""
from __future__ import annotations

import time

import pytest
from _broker_client import BrokerClient, start_broker
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.memory_records import MemoryRecords
from kafka_edu.server.coordinator.offsets_topic import (GroupMetadataKey, OffsetKey, java_string_hash,
                                                        read_group_message_value, read_message_key,
                                                        read_offset_message_value)
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

OFFSETS_TOPIC = "__consumer_offsets"
PROTOCOLS = [{"name": "range", "metadata": b"sub:orders"}]
MIN_SESSION_MS = 500
GROUP_CONFIG = {"group.min.session.timeout.ms": MIN_SESSION_MS, "offsets.retention.check.interval.ms": 200}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("groups"), **GROUP_CONFIG)
    with BrokerClient(server.bound_port()) as c:
        c.create_topic("orders", partitions=3)
        wait_for(lambda: find_coordinator(c, "warm-up").error_code == 0, what="a coordinator")
    yield server
    server.shutdown()


def find_coordinator(client: BrokerClient, group: str, version: int = 2, key_type: int = 0):
    return client.call(ApiKeys.FIND_COORDINATOR, version, {"key": group, "key_type": key_type})


class NamedClient(BrokerClient):
    """A connection whose requests carry a client id of our choice (the coordinator keeps it per member)."""

    def __init__(self, port: int, client_id: str):
        super().__init__(port)
        self.client_id = client_id


class Member:
    """One group member on its own connection."""

    def __init__(self, broker, group: str, client_id: str = "member", session_ms: int = 10_000):
        self.client = NamedClient(broker.bound_port(), client_id)
        self.group, self.client_id, self.session_ms = group, client_id, session_ms
        self.member_id, self.generation = "", -1

    def close(self) -> None:
        self.client.close()

    def send_join(self, version: int = 5, protocols=PROTOCOLS) -> tuple[int, int]:
        body = {"group_id": self.group, "session_timeout_ms": self.session_ms, "rebalance_timeout_ms": self.session_ms,
                "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
                "protocols": protocols}
        return self.client.send(ApiKeys.JOIN_GROUP, version, body), version

    def receive_join(self, sent: tuple[int, int]):
        correlation_id, response = self.client.receive(ApiKeys.JOIN_GROUP, sent[1])
        assert correlation_id == sent[0]
        if response.error_code == 0:
            self.member_id, self.generation = response.member_id, response.generation_id
        return response

    def join(self, version: int = 5, **kwargs):
        return self.receive_join(self.send_join(version, **kwargs))

    def send_sync(self, assignments: dict[str, bytes] | None = None, version: int = 3) -> tuple[int, int]:
        body = {"group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None,
                "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}
        return self.client.send(ApiKeys.SYNC_GROUP, version, body), version

    def receive_sync(self, sent: tuple[int, int]):
        correlation_id, response = self.client.receive(ApiKeys.SYNC_GROUP, sent[1])
        assert correlation_id == sent[0]
        return response

    def heartbeat(self, version: int = 3) -> Errors:
        body = {"group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None}
        return Errors.for_code(self.client.call(ApiKeys.HEARTBEAT, version, body).error_code)

    def commit(self, offsets: dict[tuple[str, int], int], version: int = 7, generation: int | None = None,
               member_id: str | None = None, metadata: str = "", **extra) -> dict[tuple[str, int], Errors]:
        return commit(self.client, self.group, offsets, version,
                      self.generation if generation is None else generation,
                      self.member_id if member_id is None else member_id, metadata, **extra)


def commit(client, group, offsets, version=7, generation=-1, member_id="", metadata="", timestamp=-1,
           retention_ms=-1, leader_epoch=-1):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": leader_epoch, "commit_timestamp": timestamp,
                                             "committed_metadata": metadata})
    body = {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
            "group_instance_id": None, "retention_time_ms": retention_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    response = client.call(ApiKeys.OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): Errors.for_code(p.error_code) for t in response.topics for p in t.partitions}


def fetch_offsets(client, group, partitions, version=5):
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    response = client.call(ApiKeys.OFFSET_FETCH, version, {"group_id": group, "topics": topics})
    found = {(t.name, p.partition_index): (p.committed_offset, p.metadata, Errors.for_code(p.error_code))
             for t in response.topics for p in t.partitions}
    return Errors.for_code(response.error_code) if version >= 2 else None, found, response


def stable_group(broker, group: str, *names: str, session_ms: int = 10_000) -> list[Member]:
    """Members that joined one after another and synced: a Stable group of the last generation."""
    members: list[Member] = []
    for name in names:
        newcomer = Member(broker, group, name, session_ms)
        pending = [(newcomer, newcomer.send_join())]
        if members:                                  # old members rejoin once the newcomer started a rebalance
            wait_for_state(broker, group, "PreparingRebalance")
        for old in members:
            pending.append((old, old.send_join()))
        for member, sent in pending:
            assert member.receive_join(sent).error_code == 0
        members.append(newcomer)
        syncs = [(m, m.send_sync({x.member_id: x.client_id.encode() for x in members} if i == 0 else None))
                 for i, m in enumerate(sorted(members, key=lambda m: m.member_id != leader_of(broker, group)))]
        for member, sent in syncs:
            assert member.receive_sync(sent).error_code == 0
    return members


def wait_for_state(broker, group: str, state: str) -> None:
    """Requests on different connections race; wait until the coordinator has seen the one that matters."""
    def reached() -> bool:
        found = broker.group_coordinator.group_manager.get_group(group)
        return found is not None and found.state.value == state
    wait_for(reached, what=f"group {group} to be {state}")


def leader_of(broker, group: str) -> str:
    return broker.group_coordinator.group_manager.get_group(group).leader_id


def offsets_log(client: BrokerClient, group: str) -> list[tuple[object, object]]:
    """Decoded (key, value) records of the group's `__consumer_offsets` partition, read with Fetch."""
    partition = abs(java_string_hash(group)) % 50
    data = client.fetch(OFFSETS_TOPIC, partition, 0).records
    decoded = []
    for record in MemoryRecords(bytes(data or b"")).records():
        key = read_message_key(record.key)
        if isinstance(key, OffsetKey):
            decoded.append((key, read_offset_message_value(record.value)))
        else:
            decoded.append((key, read_group_message_value(key.group, record.value)))
    return decoded


def describe(client, *groups, version=4, operations=False):
    return client.call(ApiKeys.DESCRIBE_GROUPS, version, {"groups": list(groups),
                                                          "include_authorized_operations": operations}).groups


def list_groups(client, version=2):
    response = client.call(ApiKeys.LIST_GROUPS, version, {})
    return response.error_code, sorted((g.group_id, g.protocol_type) for g in response.groups)


# --- FindCoordinator ---------------------------------------------------------------------------

def test_find_coordinator_creates_the_offsets_topic_and_then_names_its_leader(tmp_path):
    server = start_broker(tmp_path, **{"offsets.topic.num.partitions": 4})
    try:
        with BrokerClient(server.bound_port()) as client:
            first = find_coordinator(client, "g", version=0)
            assert first.error_code == Errors.COORDINATOR_NOT_AVAILABLE.code and first.node_id == -1
            found = wait_for(lambda: (r := find_coordinator(client, "g", version=1)).error_code == 0 and r,
                             what="the coordinator")
            assert (found.node_id, found.host, found.port) == (0, "127.0.0.1", server.bound_port())
            assert found.error_message is None
            partitions = client.metadata([OFFSETS_TOPIC]).topics[0]
            assert partitions.is_internal and len(partitions.partitions) == 4
            refused = find_coordinator(client, "txn", version=2, key_type=1)
            assert refused.error_code == Errors.INVALID_REQUEST.code and "transaction" in refused.error_message
            wait_for(lambda: server.group_coordinator.group_manager.owned == {0, 1, 2, 3}, what="the load")
    finally:
        server.shutdown()


# --- T22 ---------------------------------------------------------------------------------------

def test_t22_generations_leader_and_stored_assignment(broker):
    a, b, c = (Member(broker, "g", name) for name in ("c1", "c2", "c3"))
    first = a.join(version=0)                                   # alone: generation 1 at once
    assert (first.error_code, first.generation_id, first.leader) == (0, 1, a.member_id)
    assert a.member_id.startswith("c1-") and [m.member_id for m in first.members] == [a.member_id]

    b_join = b.send_join()                                      # parked until a rejoins
    wait_for_state(broker, "g", "PreparingRebalance")
    assert a.heartbeat(version=0) is Errors.REBALANCE_IN_PROGRESS
    leader, follower = a.join(version=0), b.receive_join(b_join)
    assert leader.generation_id == follower.generation_id == 2
    assert leader.leader == follower.leader == a.member_id
    assert [(m.member_id, m.metadata) for m in leader.members] == [(a.member_id, b"sub:orders"),
                                                                    (b.member_id, b"sub:orders")]
    assert follower.members == [] and leader.protocol_name == follower.protocol_name == "range"

    b_sync = b.send_sync(version=0)                              # parked until the leader's SyncGroup
    a_sync = a.receive_sync(a.send_sync({a.member_id: b"P0,P1", b.member_id: b"P2"}, version=0))
    assert (a_sync.error_code, a_sync.assignment) == (0, b"P0,P1")
    assert (b.receive_sync(b_sync).assignment) == b"P2"
    (described,) = describe(broker_client := a.client, "g")
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert [(m.client_id, m.client_host, m.member_assignment) for m in described.members] == [
        ("c1", "/127.0.0.1", b"P0,P1"), ("c2", "/127.0.0.1", b"P2")]

    assert abs(java_string_hash("g")) % 50 == 3
    groups = [(k, v) for k, v in offsets_log(broker_client, "g") if isinstance(k, GroupMetadataKey)]
    assert groups[-1][0] == GroupMetadataKey(2, "g") and groups[-1][1].generation_id == 2
    assert [m.assignment for m in groups[-1][1].all_member_metadata()] == [b"P0,P1", b"P2"]

    c_join = c.send_join(version=3)                              # a third member: generation 3
    wait_for_state(broker, "g", "PreparingRebalance")
    assert a.heartbeat() is Errors.REBALANCE_IN_PROGRESS and b.heartbeat(version=1) is Errors.REBALANCE_IN_PROGRESS
    rejoins = [a.send_join(), b.send_join(version=2)]
    third, *others = [c.receive_join(c_join), a.receive_join(rejoins[0]), b.receive_join(rejoins[1])]
    assert {r.generation_id for r in [third, *others]} == {3}
    assert len(others[0].members) == 3 and third.members == [] and others[1].members == []
    for m in (a, b, c):
        m.close()


# --- T23 ---------------------------------------------------------------------------------------

def test_t23_a_silent_member_is_removed_and_the_last_one_kills_the_group(broker):
    a, b = stable_group(broker, "expiry", "alice", "bob", session_ms=1_000)
    generation = a.generation

    def alice_sees_a_rebalance() -> bool:               # alice heartbeats, bob stays silent
        time.sleep(0.1)
        return a.heartbeat() is Errors.REBALANCE_IN_PROGRESS
    wait_for(alice_sees_a_rebalance, what="bob's session to expire")
    rejoined = a.join()
    assert rejoined.generation_id == generation + 1 and [m.member_id for m in rejoined.members] == [a.member_id]
    assert a.receive_sync(a.send_sync({a.member_id: b"all"})).assignment == b"all"
    assert b.heartbeat() is Errors.UNKNOWN_MEMBER_ID

    wait_for(lambda: describe(b.client, "expiry")[0].group_state == "Dead", what="alice's session to expire")
    assert ("expiry", "consumer") not in list_groups(b.client)[1]
    records = [(k, v) for k, v in offsets_log(b.client, "expiry") if isinstance(k, GroupMetadataKey)]
    assert records[-1] == (GroupMetadataKey(2, "expiry"), None)          # the group's tombstone
    assert a.heartbeat() is Errors.UNKNOWN_MEMBER_ID
    a.close()
    b.close()


# --- T25 ---------------------------------------------------------------------------------------

def test_t25_commit_and_join_validation(broker):
    a, b = stable_group(broker, "checks", "alice", "bob")
    tp = ("orders", 0)
    assert a.commit({tp: 1}, generation=a.generation - 1) == {tp: Errors.ILLEGAL_GENERATION}
    assert a.commit({tp: 1}, member_id="nobody") == {tp: Errors.UNKNOWN_MEMBER_ID}
    assert a.commit({tp: 1}) == {tp: Errors.NONE}
    assert a.commit({tp: 1}, metadata="m" * 4097) == {tp: Errors.OFFSET_METADATA_TOO_LARGE}
    assert a.commit({tp: 2, ("orders", 9): 1, ("missing", 0): 1}) == {
        tp: Errors.NONE, ("orders", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION, ("missing", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}

    assert commit(a.client, "solo", {tp: 5}) == {tp: Errors.NONE}          # generation -1, no group
    assert fetch_offsets(a.client, "solo", [tp])[1] == {tp: (5, "", Errors.NONE)}
    assert commit(a.client, "solo", {tp: 6}, generation=3) == {tp: Errors.ILLEGAL_GENERATION}

    outsiders = [Member(broker, "checks", session_ms=MIN_SESSION_MS - 1), Member(broker, "checks", session_ms=300_001),
                 Member(broker, ""), Member(broker, "checks"), Member(broker, "checks"), Member(broker, "new-group")]
    too_short, too_long, nameless, stranger, other, newcomer = outsiders
    assert too_short.join().error_code == too_long.join().error_code == Errors.INVALID_SESSION_TIMEOUT.code
    assert nameless.join().error_code == Errors.INVALID_GROUP_ID.code
    stranger.member_id = "made-up"
    assert stranger.join().error_code == Errors.UNKNOWN_MEMBER_ID.code
    assert other.join(protocols=[{"name": "roundrobin", "metadata": b""}]).error_code == \
        Errors.INCONSISTENT_GROUP_PROTOCOL.code
    assert newcomer.join(version=1).generation_id == 1                      # a new group starts at generation 1
    # a first join that is refused creates no group: "solo-2" stays free for a simple consumer's commits
    protocolless = Member(broker, "solo-2")
    assert protocolless.join(protocols=[]).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL.code
    assert describe(a.client, "solo-2")[0].group_state == "Dead"
    assert commit(a.client, "solo-2", {tp: 5}) == {tp: Errors.NONE}
    sync = a.receive_sync(a.send_sync(version=1))
    assert sync.error_code == 0 and sync.assignment == b"alice"             # Stable: own assignment again
    b.generation += 1
    assert b.heartbeat() is Errors.ILLEGAL_GENERATION
    assert b.receive_sync(b.send_sync()).error_code == Errors.ILLEGAL_GENERATION.code
    for m in (a, b, protocolless, *outsiders):
        m.close()


def test_a_negative_rebalance_timeout_has_already_passed(broker):
    """JoinGroup v1+ carries a rebalance timeout the client chooses; a negative one (Kafka's timer takes
    it as already passed) must neither fail the join nor leave the group stuck in its rebalance."""
    first, second = Member(broker, "hasty", "first"), Member(broker, "hasty", "second")
    sent = [m.client.send(ApiKeys.JOIN_GROUP, 5, {"group_id": "hasty", "session_timeout_ms": 10_000,
                                                  "rebalance_timeout_ms": -1, "member_id": "",
                                                  "group_instance_id": None, "protocol_type": "consumer",
                                                  "protocols": PROTOCOLS}) for m in (first, second)]
    answers = [m.client.receive(ApiKeys.JOIN_GROUP, 5) for m in (first, second)]
    assert [correlation_id for correlation_id, _ in answers] == sent
    assert all(response.error_code == 0 for _, response in answers)
    assert describe(first.client, "hasty")[0].group_state == "AwaitingSync"
    for m in (first, second):
        m.close()


def test_version_0_commits_and_fetches_are_zookeeper_based_and_refused(broker):
    with BrokerClient(broker.bound_port()) as client:
        assert commit(client, "zk", {("orders", 0): 3, ("orders", 1): 4}, version=0) == {
            ("orders", 0): Errors.UNSUPPORTED_VERSION, ("orders", 1): Errors.UNSUPPORTED_VERSION}
        _, found, _ = fetch_offsets(client, "zk", [("orders", 0)], version=0)
        assert found == {("orders", 0): (-1, "", Errors.UNSUPPORTED_VERSION)}
        assert list_groups(client)[0] == 0                     # the connection is fine


# --- OffsetCommit / OffsetFetch versions and T26 ------------------------------------------------

def committed_records(client, group):
    return {(k.topic, k.partition): v for k, v in offsets_log(client, group) if isinstance(k, OffsetKey)}


def test_commit_versions_store_timestamps_retention_and_epochs(broker):
    with BrokerClient(broker.bound_port()) as client:
        assert commit(client, "v1", {("orders", 0): 10}, version=1, timestamp=1_600_000_000_000) == \
            {("orders", 0): Errors.NONE}
        stored = committed_records(client, "v1")[("orders", 0)]
        day = 24 * 60 * 60 * 1000
        assert (stored.offset, stored.commit_timestamp, stored.expire_timestamp) == (
            10, 1_600_000_000_000, 1_600_000_000_000 + day)

        before = int(time.time() * 1000)
        commit(client, "v2", {("orders", 1): 20}, version=2, retention_ms=60_000, metadata="m")
        stored = committed_records(client, "v2")[("orders", 1)]
        assert stored.expire_timestamp - stored.commit_timestamp == 60_000 and stored.commit_timestamp >= before
        # a retention that overflows the stored INT64 (Java's Long.MAX_VALUE: keep forever) is answered
        assert commit(client, "forever", {("orders", 1): 21}, version=2, retention_ms=2**63 - 1) == \
            {("orders", 1): Errors.NONE}
        assert committed_records(client, "forever")[("orders", 1)].expire_timestamp == 2**63 - 1

        commit(client, "v6", {("orders", 2): 30, ("orders", 0): 31}, version=6, leader_epoch=4, metadata="six")
        v5 = client.call(ApiKeys.OFFSET_FETCH, 5, {"group_id": "v6", "topics": None})
        assert [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
                for t in v5.topics for p in t.partitions] == [("orders", 0, 31, 4, "six"), ("orders", 2, 30, 4, "six")]

        error, everything, _ = fetch_offsets(client, "v6", [], version=1)         # v0-1: empty list = all
        assert error is None and everything == {("orders", 0): (31, "six", Errors.NONE),
                                                 ("orders", 2): (30, "six", Errors.NONE)}
        assert fetch_offsets(client, "v6", [], version=2)[1] == {}                # v2+: empty list = none
        assert fetch_offsets(client, "v6", None, version=3)[1] == everything
        assert fetch_offsets(client, "v6", [("orders", 1), ("orders", 2)], version=4)[1] == {
            ("orders", 1): (-1, "", Errors.NONE), ("orders", 2): (30, "six", Errors.NONE)}


def test_t26_expired_offsets_are_forgotten_and_tombstoned(broker):
    with BrokerClient(broker.bound_port()) as client:
        tp = ("orders", 2)
        assert commit(client, "short-lived", {tp: 7}, version=2, retention_ms=300) == {tp: Errors.NONE}
        assert commit(client, "long-lived", {tp: 8}, version=2, retention_ms=600_000) == {tp: Errors.NONE}
        wait_for(lambda: fetch_offsets(client, "short-lived", [tp])[1] == {tp: (-1, "", Errors.NONE)},
                 what="the offset to expire")
        assert fetch_offsets(client, "long-lived", [tp])[1] == {tp: (8, "", Errors.NONE)}
        log = [(k, v) for k, v in offsets_log(client, "short-lived") if isinstance(k, OffsetKey)]
        assert log[-1] == (OffsetKey(1, "short-lived", "orders", 2), None)


# --- LeaveGroup, DescribeGroups, ListGroups ----------------------------------------------------

def test_leave_group_versions(broker):
    a, b, c = stable_group(broker, "leavers", "a", "b", "c")
    response = a.client.call(ApiKeys.LEAVE_GROUP, 0, {"group_id": "leavers", "member_id": c.member_id})
    assert response.error_code == 0
    response = a.client.call(ApiKeys.LEAVE_GROUP, 3, {"group_id": "leavers", "members": [
        {"member_id": b.member_id, "group_instance_id": None}, {"member_id": "ghost", "group_instance_id": None}]})
    assert response.error_code == 0
    assert [(m.member_id, Errors.for_code(m.error_code)) for m in response.members] == [
        (b.member_id, Errors.NONE), ("ghost", Errors.UNKNOWN_MEMBER_ID)]
    assert a.heartbeat() is Errors.REBALANCE_IN_PROGRESS
    assert [m.member_id for m in a.join().members] == [a.member_id]
    response = a.client.call(ApiKeys.LEAVE_GROUP, 3, {"group_id": "", "members": [
        {"member_id": a.member_id, "group_instance_id": None}]})
    assert response.error_code == Errors.INVALID_GROUP_ID.code and response.members == []
    for m in (a, b, c):
        m.close()


def test_describe_and_list_groups(broker):
    (a,) = stable_group(broker, "described", "solo")
    with BrokerClient(broker.bound_port()) as client:
        plain, unknown = describe(client, "described", "never-seen", version=0)
        assert (plain.error_code, plain.group_state, plain.protocol_type) == (0, "Stable", "consumer")
        assert [(m.member_id, m.member_metadata, m.member_assignment) for m in plain.members] == [
            (a.member_id, b"sub:orders", b"solo")]
        assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", [])
        (with_ops,) = describe(client, "described", version=3, operations=True)
        assert with_ops.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)      # READ, DELETE, DESCRIBE
        assert describe(client, "described", version=4)[0].authorized_operations == -2**31
        for version in (0, 1, 2):
            error, groups = list_groups(client, version)
            assert error == 0 and ("described", "consumer") in groups
    a.close()


# --- restart -----------------------------------------------------------------------------------

def test_restart_keeps_committed_offsets_and_the_group(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper)
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("orders", partitions=2)
            wait_for(lambda: find_coordinator(client, "keep").error_code == 0, what="a coordinator")
        a, b = stable_group(server, "keep", "a", "b")
        assert a.commit({("orders", 0): 11, ("orders", 1): 12}) == {("orders", 0): Errors.NONE,
                                                                   ("orders", 1): Errors.NONE}
        generation = a.generation
        a.close()
        b.close()
    finally:
        server.shutdown()
    server = start_broker(tmp_path, zookeeper)
    try:
        with BrokerClient(server.bound_port()) as client:
            error, found, _ = wait_for(lambda: (r := fetch_offsets(client, "keep", None))[0] is Errors.NONE and r,
                                       what="the group to load")
            assert found == {("orders", 0): (11, "", Errors.NONE), ("orders", 1): (12, "", Errors.NONE)}
            (group,) = describe(client, "keep")
            assert (group.group_state, len(group.members)) == ("Stable", 2)
            assert server.group_coordinator.group_manager.get_group("keep").generation_id == generation
    finally:
        server.shutdown()


# --- DeleteGroups (Beyond 0.10, Kafka 1.1) -------------------------------------------------------------

def delete_groups(client, *groups, version=1) -> list[tuple[str, Errors]]:
    response = client.call(ApiKeys.DELETE_GROUPS, version, {"groups_names": list(groups)})
    assert response.throttle_time_ms == 0
    return [(r.group_id, Errors.for_code(r.error_code)) for r in response.results]


@pytest.mark.parametrize("version", [0, 1])
def test_delete_groups_refuses_a_live_group_and_deletes_what_it_leaves(broker, version):
    group = f"doomed-v{version}"
    (member,) = stable_group(broker, group, "solo")
    assert member.commit({("orders", 0): 5, ("orders", 2): 9}) == {("orders", 0): Errors.NONE,
                                                                  ("orders", 2): Errors.NONE}
    with BrokerClient(broker.bound_port()) as client:
        assert delete_groups(client, group, "never-seen", "", version=version) == [
            (group, Errors.NON_EMPTY_GROUP), ("never-seen", Errors.GROUP_ID_NOT_FOUND), ("", Errors.INVALID_GROUP_ID)]
        assert member.heartbeat() is Errors.NONE                       # the live group was not touched
        left = member.client.call(ApiKeys.LEAVE_GROUP, 0, {"group_id": group, "member_id": member.member_id})
        assert left.error_code == 0
        assert describe(client, group)[0].group_state == "Dead"       # 0.10's rules: the group died ...
        assert fetch_offsets(client, group, None)[1] == {("orders", 0): (5, "", Errors.NONE),
                                                          ("orders", 2): (9, "", Errors.NONE)}   # ... its offsets stay

        assert delete_groups(client, group, group, version=version) == [(group, Errors.NONE)]
        _, found, _ = fetch_offsets(client, group, [("orders", 0), ("orders", 2)])
        assert found == {("orders", 0): (-1, "", Errors.NONE), ("orders", 2): (-1, "", Errors.NONE)}
        assert fetch_offsets(client, group, None)[1] == {}
        assert group not in [g for g, _ in list_groups(client)[1]]
        assert sorted(offsets_log(client, group)[-2:]) == [(OffsetKey(1, group, "orders", 0), None),
                                                           (OffsetKey(1, group, "orders", 2), None)]
        assert delete_groups(client, group, version=version) == [(group, Errors.GROUP_ID_NOT_FOUND)]
    member.close()


def test_a_deleted_group_stays_deleted_after_a_restart(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper, **{"offsets.topic.num.partitions": 3})
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("orders", partitions=2)
            wait_for(lambda: find_coordinator(client, "gone").error_code == 0, what="a coordinator")
            for group in ("gone", "kept"):
                assert commit(client, group, {("orders", 0): 3, ("orders", 1): 4}) == {
                    ("orders", 0): Errors.NONE, ("orders", 1): Errors.NONE}
            assert delete_groups(client, "gone") == [("gone", Errors.NONE)]
    finally:
        server.shutdown()
    server = start_broker(tmp_path, zookeeper, **{"offsets.topic.num.partitions": 3})
    try:
        with BrokerClient(server.bound_port()) as client:
            _, kept, _ = wait_for(lambda: (r := fetch_offsets(client, "kept", None))[0] is Errors.NONE and r,
                                  what="the groups to load")
            assert kept == {("orders", 0): (3, "", Errors.NONE), ("orders", 1): (4, "", Errors.NONE)}
            assert fetch_offsets(client, "gone", None)[:2] == (Errors.NONE, {})
            assert delete_groups(client, "gone") == [("gone", Errors.GROUP_ID_NOT_FOUND)]
    finally:
        server.shutdown()
