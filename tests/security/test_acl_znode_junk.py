"""ACL data in ZooKeeper that no Kafka tool wrote: a resource's ACL znode that does not read as ACLs,
and change notifications that are not sequential or do not name a resource. An authorizer still
starts, a resource whose ACLs cannot be read is closed to everyone but the super users (failing open
would turn a damaged DENY into an ALLOW), and every later notification is still carried out."""
from __future__ import annotations

import logging

import pytest
from external import wait_for
from logged_errors import LoggedTracebacks

from kafka_edu.common.acl import Acl, Operation, PermissionType, Resource
from kafka_edu.server.network.request_channel import Session
from kafka_edu.server.security.authorizer import UNREADABLE, SimpleAclAuthorizer, acls_to_json
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ACL_CHANGE_PREFIX, ACL_CHANGES_PATH, ZkUtils, acl_path

ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
JUNK = [b"{", b"[]", b"\xff\xfe", b'{"version":1,"acls":"x"}', b'{"version":1,"acls":[{"principal":5}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}']
ALICE = Session("User:alice", "10.0.0.7")
ADMIN = Session("User:admin", "10.0.0.7")
CONFIG = {"super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture
def zk():
    embedded = EmbeddedZooKeeper()
    clients = [ZkUtils(embedded.connect(f"broker-{i}")) for i in range(2)]
    failures = LoggedTracebacks(logging.ERROR)
    logging.getLogger("kafka_edu").addHandler(failures)
    yield clients, failures
    logging.getLogger("kafka_edu").removeHandler(failures)
    for client in clients:
        client.zk.close()


def test_unreadable_acls_close_their_resource_and_start_up_goes_on(zk):
    (first_zk, _), failures = zk
    for i, junk in enumerate(JUNK):
        first_zk.zk.create(acl_path("Topic", f"junk{i}"), junk, makepath=True)
    with SimpleAclAuthorizer(CONFIG, first_zk) as auth:
        for i in range(len(JUNK)):
            junk = Resource.topic(f"junk{i}")
            assert not auth.authorize(ALICE, Operation.READ, junk)           # closed, though no ACL allows
            assert auth.authorize(ADMIN, Operation.READ, junk)
        assert auth.authorize(ALICE, Operation.READ, Resource.topic("other"))   # no ACLs: everyone, as configured
        junk0 = Resource.topic("junk0")
        auth.add_acls({Acl("User:alice", ALLOW, "*", Operation.READ)}, junk0)      # stored beside the Deny All
        assert not auth.authorize(ALICE, Operation.READ, junk0)
        assert auth.get_acls(junk0) == UNREADABLE | {Acl("User:alice", ALLOW, "*", Operation.READ)}
        auth.remove_acls(UNREADABLE, junk0)                                          # removed on purpose
        assert auth.authorize(ALICE, Operation.READ, junk0)
    assert failures.messages == []


def test_junk_notifications_are_skipped_and_later_ones_carried_out(zk):
    (first_zk, second_zk), failures = zk
    with SimpleAclAuthorizer(CONFIG, first_zk) as first, SimpleAclAuthorizer(CONFIG, second_zk) as second:
        first_zk.zk.create(f"{ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", b"Topic:x")          # not sequential
        first_zk.zk.create(f"{ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}x", b"Topic:x")
        first_zk.zk.create(f"{ACL_CHANGES_PATH}/someone-else", b"Topic:x")
        for junk in [b"", b"Topic", b"Nothing:x", b"\xff", *JUNK]:
            first_zk.zk.create(f"{ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", junk, sequential=True)
        first_zk.zk.create(acl_path("Topic", "damaged"), JUNK[0], makepath=True)
        first_zk.zk.create(f"{ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", b"Topic:damaged", sequential=True)
        first.add_acls({Acl("User:bob", ALLOW, "*", Operation.WRITE)}, Resource.topic("later"))
        wait_for(lambda: second.get_acls(Resource.topic("later")), what="a later change on the second broker")
        assert not second.authorize(ALICE, Operation.READ, Resource.topic("damaged"))
    assert failures.messages == []


def test_acls_of_a_name_no_znode_can_hold_are_refused_but_old_ones_still_removed(zk):
    """Adding ACLs to `team/app` is refused (they would be stored two levels down, where a restarted
    broker never looks); ones an older tool wrote there, heard of through their notification, still go."""
    (first_zk, _), failures = zk
    team = Resource.group("team/app")
    with SimpleAclAuthorizer(CONFIG, first_zk) as auth:
        with pytest.raises(ValueError, match="cannot have ACLs"):
            auth.add_acls({Acl("User:bob", ALLOW, "*", Operation.READ)}, team)
        first_zk.zk.create(acl_path("Group", "team/app"), acls_to_json({Acl("User:bob", DENY, "*", Operation.READ)}),
                           makepath=True)
        first_zk.zk.create(f"{ACL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", b"Group:team/app", sequential=True)
        wait_for(lambda: auth.get_acls(team), what="the old tool's ACL heard of")
        assert auth.remove_resource(team) and auth.get_acls(team) == frozenset()
        assert first_zk.zk.exists(acl_path("Group", "team/app")) is None
    assert failures.messages == []
