"""CreateAcls, DeleteAcls and DescribeAcls against a broker with an authorizer, bodies drawn from their
schemas (Hypothesis): any resource type, operation and permission code, principals and hosts that
Kafka would refuse, resource names that are no ZooKeeper path. The client is a super user, so every
request reaches the authorizer. Each is answered, nothing fails inside the broker, and whatever the
ACL APIs stored, a freshly started authorizer reads back exactly, without an error: nothing was
written to /kafka-acl that a restarted broker would not load. The examples are the same on every run
(derandomized)."""
from __future__ import annotations

import logging

import pytest
from _broker_client import BrokerClient, start_broker
from hypothesis import given, settings
from hypothesis import strategies as st
from logged_errors import LoggedErrors
from protocol_strategies import PRIMITIVES, strategy

from kafka_edu.common.protocol import types as T
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.security.authorizer import SimpleAclAuthorizer
from kafka_edu.server.zk.zk_utils import ACL_CHANGES_PATH

ACL_APIS = [ApiKeys.CREATE_ACLS, ApiKeys.DELETE_ACLS, ApiKeys.DESCRIBE_ACLS]
REQUESTS = [(api, version) for api in ACL_APIS for version in range(api.min_version, api.max_version + 1)]
TEXT = st.sampled_from(["User:alice", "User:*", "alice", "User:", "", "*", "10.0.0.7", "topic", "a/b", "..",
                        "Topic:x", "/", "a//b", "kafka-cluster", "group-1", "User:a:b", "User:al ice", "team/app"])
PRIMITIVES_HERE = {**PRIMITIVES, T.INT8: st.integers(-1, 13) | PRIMITIVES[T.INT8],
                   T.STRING: TEXT | PRIMITIVES[T.STRING], T.NULLABLE_STRING: st.none() | TEXT | PRIMITIVES[T.STRING]}
CONFIG = {"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer", "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("acl-fuzz"), **CONFIG)
    failures = LoggedErrors()
    logging.getLogger("kafka_edu").addHandler(failures)
    yield server, failures
    logging.getLogger("kafka_edu").removeHandler(failures)
    server.shutdown()


CODES = {"resource_type": [2, 3, 4], "resource_type_filter": [1, 2, 3, 4], "operation": list(range(2, 13)),
         "permission_type": [2, 3], "resource_pattern_type": [3], "pattern_type_filter": [1, 3],
         "principal": ["User:alice", "User:*"], "host": ["*", "10.0.0.7"]}


def plausible(value, data):
    """Codes Kafka defines in most fields, so that most drawn entries get past the first check."""
    if isinstance(value, list):
        return [plausible(v, data) for v in value]
    if isinstance(value, dict):
        return {k: data.draw(st.sampled_from(CODES[k]), label=k) if k in CODES else plausible(v, data)
                for k, v in value.items()}
    return value


@pytest.mark.parametrize("api, version", REQUESTS, ids=[f"{api.name}-v{version}" for api, version in REQUESTS])
@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_any_well_formed_acl_request_is_answered_and_stores_only_what_reads_back(broker, api, version, data):
    server, failures = broker
    body = data.draw(strategy(api.request_schema(version), PRIMITIVES_HERE), label="body")
    if data.draw(st.booleans(), label="plausible codes"):
        body = plausible(body, data)
    logged = len(failures.messages)
    with BrokerClient(server.bound_port(), timeout=15) as client:
        client.call(api, version, body)
        client.call(ApiKeys.DESCRIBE_ACLS, 1, {"resource_type_filter": 1, "resource_name_filter": None,
                                              "pattern_type_filter": 1, "principal_filter": None,
                                              "host_filter": None, "operation": 1, "permission_type": 1})
    for child in server.zk_utils.zk.get_children(ACL_CHANGES_PATH):     # purged, as 15 minutes later
        server.zk_utils.zk.delete(f"{ACL_CHANGES_PATH}/{child}")
    with SimpleAclAuthorizer({}, server.zk_utils) as reloaded:             # what a restarted broker would load
        assert reloaded.get_all_acls() == server.apis.authorizer.get_all_acls()
    assert failures.messages[logged:] == []
