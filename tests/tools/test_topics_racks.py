"""`kafka-edu topics` when brokers have racks: the tool places the replicas itself, as 0.10's
TopicCommand did (rack-aware, or not with --disable-rack-aware), and sends them as an explicit
assignment; a mix of brokers with and without racks is refused before anything is sent. A scripted
broker plays a six-broker cluster and records what the tool asks for."""
from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
from compat.broker_process import KAFKA_EDU
from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.common.protocol.api_keys import ApiKeys

ERROR = "Error while executing topic command : "


def cluster(racks: dict[int, str | None]):
    """A scripted controller (broker 0) and five more brokers it describes; topic `t` has two
    partitions on brokers 0 and 1."""
    broker = ScriptedBroker(node_id=0)
    others = [SimpleNamespace(node_id=b, address=("127.0.0.1", 1)) for b in sorted(racks) if b != 0]
    describe = metadata_answer([broker, *others], {"t": 2}, placements={
        ("t", 0): (0, [0, 1], [0, 1]), ("t", 1): (1, [1, 0], [1, 0])})

    def with_racks(header, body):
        answer = describe(header, body)
        for node in answer["brokers"]:
            node["rack"] = racks[node["node_id"]]
        return answer

    def created(header, body):
        return {"throttle_time_ms": 0, "topics": [{"name": t.name, "error_code": 0, "error_message": None}
                                                  for t in body.topics]}

    def grown(header, body):
        return {"throttle_time_ms": 0, "results": [{"name": t.name, "error_code": 0, "error_message": None}
                                                   for t in body.topics]}
    broker.handlers.update({ApiKeys.METADATA: with_racks, ApiKeys.CREATE_TOPICS: created,
                            ApiKeys.CREATE_PARTITIONS: grown})
    return broker


def topics(broker, *argv):
    done = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", "{}:{}".format(*broker.address), *argv],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def sent(broker, api: ApiKeys):
    return [body for key, _, body in broker.requests if key is api]


RACKED = {b: f"r{b % 3}" for b in range(6)}


@pytest.fixture
def racked():
    broker = cluster(RACKED)
    yield broker
    broker.close()


def test_create_places_replicas_on_different_racks(racked):
    assert topics(racked, "--create", "--topic", "new", "--partitions", "6", "--replication-factor", "3") == (
        0, 'Created topic "new".\n', "")
    [request] = sent(racked, ApiKeys.CREATE_TOPICS)
    [topic] = request.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("new", -1, -1)
    assert [a.partition_index for a in topic.assignments] == list(range(6))
    for a in topic.assignments:
        assert len(set(a.broker_ids)) == 3 and {RACKED[b] for b in a.broker_ids} == {"r0", "r1", "r2"}
    assert sorted(a.broker_ids[0] for a in topic.assignments) == list(range(6))     # one leader each


def test_alter_places_the_added_partitions_on_different_racks(racked):
    status, out, err = topics(racked, "--alter", "--topic", "t", "--partitions", "5")
    assert (status, err) == (0, "") and out.endswith("Adding partitions succeeded!\n")
    [request] = sent(racked, ApiKeys.CREATE_PARTITIONS)
    [topic] = request.topics
    assert (topic.name, topic.count, len(topic.assignments)) == ("t", 5, 3)
    for a in topic.assignments:
        assert len(a.broker_ids) == 2 and len({RACKED[b] for b in a.broker_ids}) == 2


def test_mixed_racks_are_refused_before_anything_is_sent():
    broker = cluster({**RACKED, 5: None})
    try:
        status, out, err = topics(broker, "--create", "--topic", "new", "--partitions", "2", "--replication-factor", "2")
        assert (status, out) == (1, "") and err == (
            f"{ERROR}Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information.\n")
        assert sent(broker, ApiKeys.CREATE_TOPICS) == []
        assert topics(broker, "--alter", "--topic", "t", "--partitions", "3")[0] == 1
        assert sent(broker, ApiKeys.CREATE_PARTITIONS) == []

        assert topics(broker, "--create", "--topic", "new", "--partitions", "2", "--replication-factor", "2",
                      "--disable-rack-aware")[0] == 0
        [request] = sent(broker, ApiKeys.CREATE_TOPICS)
        assert [len(set(a.broker_ids)) for a in request.topics[0].assignments] == [2, 2]
        status, out, err = topics(broker, "--create", "--topic", "big", "--partitions", "1", "--replication-factor",
                                  "7", "--disable-rack-aware")
        assert (status, err) == (1, f"{ERROR}replication factor: 7 larger than available brokers: 6\n")
    finally:
        broker.close()


def test_without_racks_the_controller_places_the_replicas():
    broker = cluster({b: None for b in range(6)})
    try:
        assert topics(broker, "--create", "--topic", "new", "--partitions", "4", "--replication-factor", "2",
                      "--disable-rack-aware")[0] == 0
        [request] = sent(broker, ApiKeys.CREATE_TOPICS)
        assert (request.topics[0].num_partitions, request.topics[0].replication_factor,
                list(request.topics[0].assignments)) == (4, 2, [])
    finally:
        broker.close()


def test_disable_rack_aware_is_only_for_create_and_alter():
    done = subprocess.run([str(KAFKA_EDU), "topics", "--bootstrap-server", "127.0.0.1:9", "--list",
                           "--disable-rack-aware"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", (
        "kafka-edu topics: error: --disable-rack-aware is only valid with --create or --alter (see --help)\n"))
