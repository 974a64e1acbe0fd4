"""Every request a broker serves, with bodies drawn from the request's own schema (Hypothesis): well
formed on the wire, nonsense in every field. Each gets its answer (a produce with acks=0 gets none,
by design), no handler fails, no broker thread dies, and the broker still serves a client afterwards.

It runs twice: on a broker without an authorizer, and on one whose ACLs refuse the client most of what
it asks, so that every handler's refusal path meets nonsense too.

Strings are often names the broker knows (a topic, a group), so that requests reach past the first
lookup. The examples are the same on every run (derandomized), so the test can only fail on a change.
The inter-broker requests are left out: a random controller epoch may legitimately fence the broker's
own controller (they are fuzzed on a broker of their own in tests/controller/test_inter_broker_fuzz.py).
"""
from __future__ import annotations

import logging
import threading

import pytest
from _broker_client import BrokerClient, records, start_broker
from hypothesis import given, settings
from logged_errors import LoggedErrors
from hypothesis import strategies as st
from protocol_strategies import PRIMITIVES, strategy

from kafka_edu.common.acl import CLUSTER, Acl, Operation, PermissionType, Resource
from kafka_edu.common.protocol import types as T
from kafka_edu.common.protocol.api_keys import ApiKeys

INTER_BROKER = {ApiKeys.LEADER_AND_ISR, ApiKeys.STOP_REPLICA, ApiKeys.UPDATE_METADATA, ApiKeys.CONTROLLED_SHUTDOWN}
REQUESTS = [(api, version) for api in ApiKeys if api not in INTER_BROKER
            for version in range(api.min_version, api.max_version + 1)]
KNOWN_NAMES = st.sampled_from(["fuzzed", "group", "", "..", "a/b"])
NAMES = {T.STRING: KNOWN_NAMES | PRIMITIVES[T.STRING], T.COMPACT_STRING: KNOWN_NAMES | PRIMITIVES[T.COMPACT_STRING]}
PRIMITIVES_HERE = {**PRIMITIVES, **NAMES, T.NULLABLE_STRING: st.none() | NAMES[T.STRING],
                   T.COMPACT_NULLABLE_STRING: st.none() | NAMES[T.COMPACT_STRING],
                   T.RECORDS: st.none() | st.just(records(b"fuzz")) | PRIMITIVES[T.RECORDS]}




ANONYMOUS_MAY = [(CLUSTER, Operation.CREATE), (CLUSTER, Operation.CLUSTER_ACTION), (Resource.topic("fuzzed"), Operation.ALL),
                 (Resource.topic("health"), Operation.ALL), (Resource.group("group"), Operation.READ)]


@pytest.fixture(scope="module", params=["open", "acls"])
def broker(tmp_path_factory, request):
    """Without an authorizer, and with one that lets the (anonymous) client do only ANONYMOUS_MAY, so that
    most requests also go through a refusal."""
    acls = {"authorizer.class.name": "SimpleAclAuthorizer"} if request.param == "acls" else {}
    server = start_broker(tmp_path_factory.mktemp("fuzz"), **{"group.initial.rebalance.delay.ms": 0, **acls})
    for resource, operation in ANONYMOUS_MAY if acls else []:
        server.apis.authorizer.add_acls({Acl("User:ANONYMOUS", PermissionType.ALLOW, "*", operation)}, resource)
    with BrokerClient(server.bound_port()) as client:
        client.create_topic("fuzzed")
        client.create_topic("health")
    failures = LoggedErrors()
    logging.getLogger("kafka_edu").addHandler(failures)
    threads = sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-"))
    yield server, failures, threads
    logging.getLogger("kafka_edu").removeHandler(failures)
    server.shutdown()


def bounded(api: ApiKeys, body: dict) -> dict:
    """The waits a request may ask for, cut to a few seconds: a fetch may park for max_wait_ms, and a
    join for the group's rebalance (the session timeout before v1)."""
    if api is ApiKeys.FETCH:
        return {**body, "max_wait_ms": min(body["max_wait_ms"], 1000)}
    if api is ApiKeys.JOIN_GROUP:
        return {**body, "session_timeout_ms": min(body["session_timeout_ms"], 6000),
                **({"rebalance_timeout_ms": min(body["rebalance_timeout_ms"], 2000)}
                   if "rebalance_timeout_ms" in body else {})}
    return body


@pytest.mark.parametrize("api, version", REQUESTS, ids=[f"{api.name}-v{version}" for api, version in REQUESTS])
@settings(max_examples=8, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_any_well_formed_request_is_answered_and_harms_nothing(broker, api, version, data):
    server, failures, threads = broker
    body = bounded(api, data.draw(strategy(api.request_schema(version), PRIMITIVES_HERE), label="body"))
    if api is ApiKeys.PRODUCE and server.apis.authorizer is not None:
        body["acks"] = body["acks"] or 1      # a refused acks=0 produce closes its connection, as in Kafka
    logged = len(failures.messages)
    with BrokerClient(server.bound_port(), timeout=15) as client:
        sent = client.send(api, version, body)
        if api is ApiKeys.PRODUCE and body["acks"] == 0:
            assert client.metadata([], version=1).topics == []      # no answer; the connection goes on
        else:
            assert client.receive(api, version)[0] == sent
    assert failures.messages[logged:] == []
    assert sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-")) == threads
    with BrokerClient(server.bound_port(), timeout=15) as client:
        assert client.produce("health", 0, records(b"still here")).error_code == 0
