"""4.8.5 SimpleAclAuthorizer against the embedded ZooKeeper, without mocks: the decision rules, the
znode JSON and its compare-and-set, and change notifications reaching another broker's authorizer."""
from __future__ import annotations

import json
import threading
import time

import pytest

from kafka_edu.common.acl import CLUSTER, Acl, Operation, PermissionType, Resource
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.network.request_channel import Session
from kafka_edu.server.security.authorizer import SimpleAclAuthorizer, authorizer_from_config
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils

ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
TEST = Resource.topic("test")
ALICE = Session("User:alice", "10.0.0.7")


@pytest.fixture
def embedded():
    return EmbeddedZooKeeper()


@pytest.fixture
def zk(embedded):
    client = ZkUtils(embedded.connect("broker-1"))
    yield client
    client.zk.close()


def authorizer(zk, **config):
    return SimpleAclAuthorizer({"super.users": "User:admin", **config}, zk)


def wait_for(condition, timeout_s=10):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_default_deny_super_users_and_allow_everyone(zk):
    with authorizer(zk) as auth:
        assert not auth.authorize(ALICE, Operation.READ, TEST)
        assert auth.authorize(Session("User:admin", "1.2.3.4"), Operation.CLUSTER_ACTION, CLUSTER)
    with authorizer(zk, **{"allow.everyone.if.no.acl.found": "true"}) as lenient:
        assert lenient.authorize(ALICE, Operation.WRITE, TEST)
        lenient.add_acls({Acl("User:bob", ALLOW, "*", Operation.WRITE)}, TEST)
        assert not lenient.authorize(ALICE, Operation.WRITE, TEST)        # the resource now has ACLs


def test_deny_beats_allow_hosts_wildcards_and_implied_describe(zk):
    with authorizer(zk) as auth:
        auth.add_acls({Acl("User:alice", ALLOW, "*", Operation.READ),
                       Acl("User:alice", ALLOW, "*", Operation.WRITE)}, TEST)
        assert auth.authorize(ALICE, Operation.READ, TEST) and auth.authorize(ALICE, Operation.DESCRIBE, TEST)
        assert not auth.authorize(ALICE, Operation.DELETE, TEST)
        auth.add_acls({Acl("User:alice", DENY, "10.0.0.7", Operation.READ)}, TEST)
        assert not auth.authorize(ALICE, Operation.READ, TEST)
        assert auth.authorize(Session("User:alice", "10.0.0.8"), Operation.READ, TEST)
        assert auth.authorize(ALICE, Operation.WRITE, TEST)
        auth.add_acls({Acl("User:*", DENY, "*", Operation.ALL)}, Resource.topic("*"))
        assert not auth.authorize(ALICE, Operation.WRITE, TEST)             # Topic:* counts for every topic
        auth.remove_resource(Resource.topic("*"))
        auth.add_acls({Acl("User:bob", ALLOW, "*", Operation.ALTER)}, Resource.group("g"))
        assert auth.authorize(Session("User:bob", "h"), Operation.DESCRIBE, Resource.group("g"))  # Beyond 0.10
        decision = auth.explain("User:alice", "10.0.0.7", Operation.READ, TEST)
        assert decision.reason == "denied by an ACL" and decision.matched.permission_type is DENY


def test_znode_json_version_cas_and_delete(zk):
    with authorizer(zk) as auth:
        auth.add_acls({Acl("User:alice", ALLOW, "*", Operation.READ)}, TEST)
        data, stat = zk.read_data_maybe_null("/kafka-acl/Topic/test")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        assert stat.version == 0
        changes = zk.get_children_parent_may_not_exist("/kafka-acl-changes")
        assert [zk.read_data_maybe_null(f"/kafka-acl-changes/{c}")[0] for c in changes] == [b"Topic:test"]
        assert not auth.add_acls({Acl("User:alice", ALLOW, "*", Operation.READ)}, TEST)   # no change, no write
        assert zk.read_data_maybe_null("/kafka-acl/Topic/test")[1].version == 0
        assert auth.remove_acls({Acl("User:alice", ALLOW, "*", Operation.READ)}, TEST)
        assert zk.zk.exists("/kafka-acl/Topic/test") is None


def test_concurrent_writers_lose_nothing(embedded, zk):
    writers = [authorizer(ZkUtils(embedded.connect(f"tool-{i}"))) for i in range(4)]

    def add(i, auth):
        for j in range(10):
            auth.add_acls({Acl(f"User:u{i}-{j}", ALLOW, "*", Operation.READ)}, TEST)

    threads = [threading.Thread(target=add, args=(i, a)) for i, a in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    data, _ = zk.read_data_maybe_null("/kafka-acl/Topic/test")
    assert len(json.loads(data)["acls"]) == 40
    for auth in writers:
        auth.close()
        auth.zk_utils.zk.close()


def test_notifications_reach_a_second_broker_and_a_restarted_one_loads_the_cache(embedded, zk):
    other_zk = ZkUtils(embedded.connect("broker-2"))
    config = {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer", "super.users": "User:admin"}
    with authorizer_from_config(config, zk) as first, authorizer_from_config(config, other_zk) as second:
        assert not second.authorize(ALICE, Operation.WRITE, TEST)
        first.add_acls({Acl("User:alice", ALLOW, "*", Operation.WRITE)}, TEST)
        wait_for(lambda: second.authorize(ALICE, Operation.WRITE, TEST))
        first.add_acls({Acl("User:alice", DENY, "10.0.0.7", Operation.WRITE)}, TEST)
        wait_for(lambda: not second.authorize(ALICE, Operation.WRITE, TEST))
    with authorizer(other_zk) as restarted:                                   # loads /kafka-acl at start
        assert restarted.get_acls(TEST) == {Acl("User:alice", ALLOW, "*", Operation.WRITE),
                                            Acl("User:alice", DENY, "10.0.0.7", Operation.WRITE)}
    other_zk.zk.close()


def test_old_notifications_are_purged():
    clock = MockTime(start_ms=1_000_000)
    zk = ZkUtils(EmbeddedZooKeeper(clock).connect("broker"))
    with SimpleAclAuthorizer({}, zk, clock) as auth:
        auth.add_acls({Acl("User:alice", ALLOW, "*", Operation.READ)}, TEST)
        assert zk.get_children_parent_may_not_exist("/kafka-acl-changes")
        clock.sleep(15 * 60 * 1000 + 1)
        auth.notification_listener.process_notifications(zk.get_children_parent_may_not_exist("/kafka-acl-changes"))
        assert zk.get_children_parent_may_not_exist("/kafka-acl-changes") == []
    zk.zk.close()


def test_unknown_authorizer_class_and_empty_name(zk):
    assert authorizer_from_config({"authorizer.class.name": ""}, zk) is None
    with pytest.raises(ValueError, match="authorizer.class.name"):
        authorizer_from_config({"authorizer.class.name": "com.example.Nope"}, zk)


def test_on_a_real_zookeeper_with_kazoo(zookeeper):
    """Two authorizers with their own kazoo sessions (as two brokers' would be) and the 0.10 tool path."""
    from kafka_edu.server.zk.zk_utils import create_zk_client
    from kafka_edu.tools.cli import run_captured
    connect = f"{zookeeper.connect}/acl-test"
    config = {"zookeeper.connect": connect, "zookeeper.session.timeout.ms": 4000}
    first, second = SimpleAclAuthorizer(config), SimpleAclAuthorizer(config)
    root = create_zk_client({"zookeeper.connect": zookeeper.connect})
    try:
        first.add_acls({Acl("User:alice", ALLOW, "*", Operation.WRITE)}, TEST)
        wait_for(lambda: second.authorize(ALICE, Operation.WRITE, TEST))
        status, out, err = run_captured(["acls", "--authorizer-properties", f"zookeeper.connect={connect}", "--add",
                                         "--deny-principal", "User:alice", "--operation", "Write", "--topic", "test"])
        assert status == 0, err
        wait_for(lambda: not second.authorize(ALICE, Operation.WRITE, TEST))
        data, _ = root.get("/acl-test/kafka-acl/Topic/test")
        assert {a["permissionType"] for a in json.loads(data)["acls"]} == {"Allow", "Deny"}
    finally:
        first.close()
        second.close()
        root.delete("/acl-test", recursive=True)
        root.close()
