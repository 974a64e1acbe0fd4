"""The broker places replicas with 0.10's AdminUtils (5.2.1): CreateTopics is rack-aware and refuses a
cluster where only some brokers have a rack (RackAwareMode.ENFORCED); auto-creation then ignores
racks (RackAwareMode.SAFE); CreatePartitions keeps the rack spread."""
from __future__ import annotations

import queue

import pytest
from _controller_cluster import CLUSTER_DEFAULTS, Cluster

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.admin_manager import NewPartitions, NewTopic
from kafka_edu.server.kafka_config import KafkaConfig


class RackedCluster(Cluster):
    """Brokers 0..n-1 with `broker.rack` from `racks` (None: no rack)."""

    def __init__(self, tmp_path, racks: dict[int, str | None], **props):
        self.racks = racks
        super().__init__(tmp_path, size=len(racks), **props)

    def config(self, broker_id: int) -> KafkaConfig:
        rack = {} if self.racks[broker_id] is None else {"broker.rack": self.racks[broker_id]}
        return KafkaConfig({**CLUSTER_DEFAULTS, "broker.id": broker_id,
                            "log.dirs": str(self.tmp_path / f"broker-{broker_id}"), **rack, **self.props})


def answer(call, *args):
    answers: queue.Queue = queue.Queue()
    call(0, False, *args, answers.put)
    return answers.get(timeout=10)


@pytest.fixture
def racked(tmp_path):
    cluster = RackedCluster(tmp_path, {0: "a", 1: "a", 2: "b", 3: "b"})
    yield cluster
    cluster.shutdown()


@pytest.fixture
def mixed(tmp_path):
    cluster = RackedCluster(tmp_path, {0: "a", 1: None, 2: "b"}, **{"default.replication.factor": 2})
    yield cluster
    cluster.shutdown()


def test_create_topics_and_partitions_spread_replicas_over_racks(racked):
    admin = racked.servers[0].admin_manager
    assert answer(admin.create_topics, [NewTopic("spread", 4, 2)]) == {"spread": (Errors.NONE, None)}
    assert answer(admin.create_partitions, [NewPartitions("spread", 8)]) == {"spread": (Errors.NONE, None)}
    placed = racked.zk_utils.get_partition_assignment_for_topics(["spread"])["spread"]
    assert sorted(placed) == list(range(8))
    assert all({racked.racks[b] for b in replicas} == {"a", "b"} for replicas in placed.values()), placed
    assert sorted(replicas[0] for replicas in placed.values()) == [0, 0, 1, 1, 2, 2, 3, 3]
    error, message = answer(admin.create_topics, [NewTopic("too-wide", 1, 5)])["too-wide"]
    assert (error, message) == (Errors.INVALID_REPLICATION_FACTOR, "replication factor: 5 larger than available brokers: 4")


def test_a_partly_racked_cluster_refuses_create_topics_but_auto_creates(mixed):
    admin = mixed.servers[0].admin_manager
    error, message = answer(admin.create_topics, [NewTopic("refused", 2, 2)])["refused"]
    assert error is Errors.INVALID_REPLICA_ASSIGNMENT and "Not all brokers have rack information" in message
    assert "refused" not in mixed.zk_utils.get_all_topics()
    assert admin.auto_create_topic("auto") is Errors.LEADER_NOT_AVAILABLE
    placed = mixed.zk_utils.get_partition_assignment_for_topics(["auto"])["auto"]
    assert [len(replicas) for replicas in placed.values()] == [2]
