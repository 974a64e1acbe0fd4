"""The four inter-broker requests (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) with
bodies drawn from their own schemas (Hypothesis): well formed on the wire, nonsense in every field, as a
confused or hostile peer on the inter-broker listener could send them. Each gets its answer, nothing
fails inside the broker (an unreadable partition becomes an error code, not a traceback), no broker
thread dies, and what the broker then tells a client still encodes.

A drawn controller epoch may fence the broker's own controller for the rest of the module, which is
why this runs on a broker of its own and its health check asks for nothing the controller must do.
Numbers are often small broker ids and epochs, and names are often the broker's own topics, so that
requests reach past the first lookup. The examples are the same on every run (derandomized).
"""
from __future__ import annotations

import itertools
import logging
import os
import threading

import pytest
from _controller_cluster import Cluster
from blocking_client import CodecConnection
from external import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st
from logged_errors import LoggedTracebacks
from protocol_strategies import PRIMITIVES, strategy

from kafka_edu.common.protocol import types as T
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.log.log_files import parse_topic_partition_name
from kafka_edu.server.topic_name import legal_topic_name

INTER_BROKER = [ApiKeys.UPDATE_METADATA, ApiKeys.LEADER_AND_ISR, ApiKeys.STOP_REPLICA, ApiKeys.CONTROLLED_SHUTDOWN]
REQUESTS = [(api, version) for api in INTER_BROKER for version in range(api.min_version, api.max_version + 1)]
NAMES = st.sampled_from(["fuzzed", "health", "", "..", "a/b", "__consumer_offsets"])
SMALL = st.sampled_from([-2, -1, 0, 1, 2, 5])
LEADER_EPOCHS = itertools.count(1_000)
EPOCH_STEP = st.sampled_from([0, 0, 0, 0, 1, -1])
PRIMITIVES_HERE = {**PRIMITIVES,
                   T.INT32: SMALL | PRIMITIVES[T.INT32], T.INT16: SMALL | PRIMITIVES[T.INT16],
                   T.INT64: SMALL | PRIMITIVES[T.INT64],
                   T.STRING: NAMES | PRIMITIVES[T.STRING], T.NULLABLE_STRING: st.none() | NAMES}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("inter-broker-fuzz"), size=1)
    cluster.zk_utils.create_topic_assignment("fuzzed", {0: [0], 1: [0]})
    cluster.zk_utils.create_topic_assignment("health", {0: [0]})
    server = cluster.servers[0]
    wait_for(lambda: all(server.metadata_cache.get_partition_info(t, 0) for t in ("fuzzed", "health")),
             what="both topics in the metadata cache")
    failures = LoggedTracebacks(logging.ERROR)

    logging.getLogger("kafka_edu").addHandler(failures)
    threads = sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-"))
    yield server, failures, threads
    logging.getLogger("kafka_edu").removeHandler(failures)
    cluster.shutdown()


def plausible(body: dict, data) -> None:
    """Partition states this broker will act on: a legal partition, a newer leader epoch each time,
    and itself a replica."""
    for state in body.get("ungrouped_partition_states", []):
        state["topic_name"] = data.draw(st.sampled_from(["fuzzed", "health", "other"]), label="topic")
        state["partition_index"] = data.draw(st.integers(0, 2), label="partition")
        state["leader_epoch"] = next(LEADER_EPOCHS)
        state["leader"] = data.draw(st.sampled_from([0, 1, 5]), label="leader")
        if 0 not in state["replicas"]:
            state["replicas"].append(0)
    for broker in body.get("live_brokers", []):
        broker["id"] = data.draw(st.sampled_from([0, 1, 5]), label="broker")
        for endpoint in broker.get("endpoints", []):
            endpoint.update(security_protocol=0, listener="PLAINTEXT")


@pytest.mark.parametrize("api, version", REQUESTS, ids=[f"{api.name}-v{version}" for api, version in REQUESTS])
@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_any_well_formed_inter_broker_request_is_answered_and_harms_nothing(broker, api, version, data):
    server, failures, threads = broker
    body = data.draw(strategy(api.request_schema(version), PRIMITIVES_HERE), label="body")
    if "controller_epoch" in body:             # mostly the current epoch, so most requests get past the fence
        body["controller_epoch"] = server.replica_manager.controller_epoch + data.draw(EPOCH_STEP, label="step")
    if data.draw(st.booleans(), label="plausible partitions"):
        plausible(body, data)
    logged = len(failures.messages)
    with CodecConnection(server.bound_port(), timeout=15) as client:
        client.call(api, version, body)
        client.call(ApiKeys.METADATA, 1, {"topics": None})   # answered and decoded: the cache still encodes
    assert failures.messages[logged:] == []
    assert sorted(t.name for t in threading.enumerate() if t.name.startswith("kafka-")) == threads
    assert strays(server) == []


def strays(server) -> list[str]:
    """Directories in the data directory that are not the log of a legal topic partition."""
    found = []
    for log_dir in server.config.log_dirs:
        for name in os.listdir(log_dir):
            if os.path.isdir(os.path.join(log_dir, name)):
                try:
                    topic, partition = parse_topic_partition_name(name)
                except ValueError:
                    found.append(name)
                    continue
                if not legal_topic_name(topic):
                    found.append(name)
    return found


def test_a_partition_no_log_can_hold_is_refused_and_creates_nothing(broker):
    """Beyond 0.10: Kafka trusts its controller to name legal topics; an empty name reached ZooKeeper
    as an invalid path (a traceback and UNKNOWN_SERVER_ERROR for the whole request), `a/b` would be a
    log directory inside another and `..` one Kafka's own rules refuse."""
    server, failures, _ = broker
    logged = len(failures.messages)
    states = [{"topic_name": topic, "partition_index": partition, "controller_epoch": 0, "leader": 0,
               "leader_epoch": 1, "isr": [0], "partition_epoch": 0, "replicas": [0]}
              for topic, partition in [("", 0), ("a/b", 0), ("..", 0), ("fine", -1), ("fine", 0)]]
    with CodecConnection(server.bound_port(), timeout=15) as client:
        answer = client.call(ApiKeys.LEADER_AND_ISR, 0, {
            "controller_id": 0, "controller_epoch": server.replica_manager.controller_epoch,
            "ungrouped_partition_states": states, "live_leaders": []})
    assert answer.error_code == 0
    assert {(p.topic_name, p.partition_index): Errors.for_code(p.error_code) for p in answer.partition_errors} == {
        ("", 0): Errors.INVALID_TOPIC_EXCEPTION, ("a/b", 0): Errors.INVALID_TOPIC_EXCEPTION,
        ("..", 0): Errors.INVALID_TOPIC_EXCEPTION, ("fine", -1): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("fine", 0): Errors.NONE}
    assert server.replica_manager.get_partition(("fine", 0)).is_leader
    assert strays(server) == [] and failures.messages[logged:] == []
