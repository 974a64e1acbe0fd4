"""The admin client against a broker whose answers are random bodies of each response's schema (any
error code, any name, any count, coordinators anywhere): every call returns, or raises a KafkaError
(or TimeoutError when no node it was sent to becomes ready), and nothing fails inside the client.
The answers are drawn the same way on every run, for every version of each API."""
from __future__ import annotations

import itertools
import logging

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from logged_errors import LoggedErrors
from protocol_strategies import strategy, without_errors
from scripted_broker import scripted_cluster

from kafka_edu.clients.admin import (LATEST_TIMESTAMP, AclBindingFilter, ClusterAdmin, NewPartitions,
                                     NewTopic)
from kafka_edu.common.acl import Acl, Operation, PermissionType, Resource, ResourceType
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import KafkaError

ANSWERS = 4           # drawn per version, answered in turn
TP = TopicPartition("t", 0)
A = ApiKeys

# (call, the APIs answered with nonsense); the rest (Metadata, ApiVersions) is answered sensibly.
CALLS = {
    "describe_cluster": (lambda a: a.describe_cluster(["t"]), (A.METADATA,)),
    "describe_configs": (lambda a: a.describe_configs(["t"]), (A.DESCRIBE_CONFIGS,)),
    "alter_configs": (lambda a: a.alter_configs({"t": {"retention.ms": "1"}}), (A.ALTER_CONFIGS,)),
    "create_topics": (lambda a: a.create_topics([NewTopic("n", 1, 1)], timeout_ms=500), (A.CREATE_TOPICS,)),
    "create_partitions": (lambda a: a.create_partitions({"t": NewPartitions(3)}, timeout_ms=500),
                          (A.CREATE_PARTITIONS,)),
    "delete_topics": (lambda a: a.delete_topics(["t"], timeout_ms=500), (A.DELETE_TOPICS,)),
    "list_offsets": (lambda a: a.list_offsets({TP: LATEST_TIMESTAMP}), (A.LIST_OFFSETS,)),
    "list_groups": (lambda a: a.list_groups(), (A.LIST_GROUPS,)),
    "describe_group": (lambda a: a.describe_group("g"), (A.FIND_COORDINATOR, A.DESCRIBE_GROUPS)),
    "list_group_offsets": (lambda a: a.list_group_offsets("g"), (A.FIND_COORDINATOR, A.OFFSET_FETCH)),
    "commit_group_offsets": (lambda a: a.commit_group_offsets("g", {TP: 5}), (A.FIND_COORDINATOR, A.OFFSET_COMMIT)),
    "delete_consumer_groups": (lambda a: a.delete_consumer_groups(["g"]), (A.FIND_COORDINATOR, A.DELETE_GROUPS)),
    "create_acls": (lambda a: a.create_acls([(Resource(ResourceType.TOPIC, "t"),
                                                    Acl("User:alice", PermissionType.ALLOW, "*", Operation.READ))]),
                    (A.CREATE_ACLS,)),
    "describe_acls": (lambda a: a.describe_acls(), (A.DESCRIBE_ACLS,)),
    "delete_acls": (lambda a: a.delete_acls([AclBindingFilter()]), (A.DELETE_ACLS,)),
}


def nonsense(data, api: ApiKeys, broker_address: tuple[str, int]):
    """ANSWERS random bodies per version, in turn, every other one claiming success (a random error code
    is almost never 0); a FindCoordinator answer names this broker's address (the rest random), so the
    coordinated calls get past the lookup."""
    answers = {v: [without_errors(body) if i % 2 == 0 else body for i, body in enumerate(data.draw(
                   st.lists(strategy(api.response_schema(v)), min_size=ANSWERS, max_size=ANSWERS),
                   label=f"{api.name} v{v}"))]
               for v in range(api.min_version, api.max_version + 1)}
    turn = itertools.count()
    host, port = broker_address

    def answer(header, body):
        drawn = answers[header.api_version][next(turn) % ANSWERS]
        return {**drawn, "host": host, "port": port} if api is ApiKeys.FIND_COORDINATOR else drawn
    return answer


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_admin_call_ends_whatever_the_broker_answers(name):
    call, apis = CALLS[name]

    @settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
    @given(data=st.data())
    def check(data):
        brokers = scripted_cluster(1, {"t": 2})
        broker = brokers[0]
        broker.handlers.update({api: nonsense(data, api, broker.address) for api in apis})
        failures = LoggedErrors()
        logging.getLogger("kafka_edu").addHandler(failures)
        host, port = broker.address
        try:
            with ClusterAdmin(f"{host}:{port}", request_timeout_ms=1500, retry_backoff_ms=20) as admin:
                try:
                    call(admin)
                except (KafkaError, TimeoutError):
                    pass
            assert failures.messages == []
            assert {api.name for api in apis} <= {seen for seen, _ in broker.apis_seen()}
        finally:
            logging.getLogger("kafka_edu").removeHandler(failures)
            broker.close()

    check()
