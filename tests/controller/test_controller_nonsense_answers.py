"""The controller against a broker that answers its requests with nonsense: LeaderAndIsr, UpdateMetadata
and StopReplica answers drawn from their schemas (Hypothesis), plus frames that do not decode and
answers to another request. Broker 9 is a scripted one registered in ZooKeeper beside two real brokers.
The controller keeps its role and logs no failure, the real brokers still get their partitions, and
a topic with a replica on broker 9 is deleted once broker 9, restarted, answers properly."""
from __future__ import annotations

import itertools
import logging
import struct
import threading

import pytest
from _controller_cluster import Cluster
from external import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st
from logged_errors import LoggedTracebacks
from protocol_strategies import strategy
from scripted_broker import ScriptedBroker

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.controller.channel_manager import (LEADER_AND_ISR_VERSION, STOP_REPLICA_VERSION,
                                                         UPDATE_METADATA_VERSION)
from kafka_edu.server.zk.zk_utils import ZkUtils, delete_topic_path, topic_path

FAKE = 9
VERSIONS = {ApiKeys.LEADER_AND_ISR: LEADER_AND_ISR_VERSION, ApiKeys.STOP_REPLICA: STOP_REPLICA_VERSION,
            ApiKeys.UPDATE_METADATA: UPDATE_METADATA_VERSION}
NOT_A_FRAME = [struct.pack(">i", 2) + b"\x00\x01",                      # too short for a correlation id
               struct.pack(">ii", 6, 987_654) + b"\x00\x00"]              # the answer to another request


class NonsenseBroker:
    """The scripted broker 9: nonsense while `sane` is clear, then the answers a broker would give."""

    def __init__(self):
        self.sane = threading.Event()
        self.answers: dict[ApiKeys, itertools.cycle] = {}
        self.broker = ScriptedBroker({api: self._answer(api) for api in VERSIONS}, node_id=FAKE)
        self.session: ZkUtils | None = None

    def _answer(self, api: ApiKeys):
        def handler(header, body):
            if not self.sane.is_set():
                return next(self.answers[api])
            if api is ApiKeys.STOP_REPLICA:
                return {"error_code": 0, "partition_errors": [
                    {"topic_name": p.topic_name, "partition_index": p.partition_index, "error_code": 0}
                    for p in body.ungrouped_partitions]}
            return {"error_code": 0, "partition_errors": []} if api is ApiKeys.LEADER_AND_ISR else {"error_code": 0}
        return handler

    def register(self, cluster: Cluster, controller) -> None:
        """A (re)start: the old session ends and, once the controller has seen broker 9 go, a new one
        registers it again (a registration replaced before the controller looked would be no restart)."""
        if self.session is not None:
            self.session.zk.close()
            wait_for(lambda: FAKE not in controller.context.live_or_shutting_down_broker_ids, timeout=20,
                     what="the controller seeing broker 9 go")
        self.session = ZkUtils(cluster.zookeeper.connect(f"fake-{FAKE}"))
        host, port = self.broker.address
        self.session.register_broker(FAKE, host, port, [f"PLAINTEXT://{host}:{port}"])

    def stops_asked(self, topic: str) -> bool:
        return any(api is ApiKeys.STOP_REPLICA and any(p.topic_name == topic for p in body.ungrouped_partitions)
                   for api, _, body in list(self.broker.requests))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("nonsense-answers"), size=2, **{"delete.topic.enable": "true"})
    fake = NonsenseBroker()
    failures = LoggedTracebacks(logging.ERROR)
    logging.getLogger("kafka_edu").addHandler(failures)
    controller_id = cluster.controller().broker_id
    yield cluster, fake, failures, controller_id
    logging.getLogger("kafka_edu").removeHandler(failures)
    fake.broker.close()
    cluster.shutdown()


def led(cluster, topic: str, partitions: int) -> bool:
    return all(cluster.zk_utils.get_leader_and_isr(topic, p) is not None for p in range(partitions))


COUNTER = itertools.count()


@settings(max_examples=4, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_nonsense_answers_cost_the_controller_nothing(cluster, data):
    cluster, fake, failures, controller_id = cluster
    for api, version in VERSIONS.items():
        drawn = data.draw(st.lists(strategy(api.response_schema(version)), min_size=1, max_size=4), label=api.name)
        fake.answers[api] = itertools.cycle(drawn + NOT_A_FRAME)
    fake.sane.clear()
    controller = cluster.servers[controller_id].controller
    fake.register(cluster, controller)
    n = next(COUNTER)
    topic, other = f"n{n}", f"ok{n}"
    zk = cluster.zk_utils
    zk.create_topic_assignment(topic, {0: [0, FAKE], 1: [1, FAKE]})
    wait_for(lambda: led(cluster, topic, 2), timeout=20, what=f"{topic} led")
    zk.zk.create(delete_topic_path(topic), b"", makepath=True)
    wait_for(lambda: fake.stops_asked(topic), timeout=20, what="a StopReplica for broker 9")
    fake.sane.set()
    fake.register(cluster, controller)         # broker 9 restarts and answers properly: the deletion resumes
    wait_for(lambda: zk.zk.exists(topic_path(topic)) is None, timeout=30, what=f"{topic} deleted")
    zk.create_topic_assignment(other, {0: [0, 1], 1: [1, 0]})
    wait_for(lambda: led(cluster, other, 2), timeout=20, what=f"{other} led")
    assert zk.get_controller_id() == controller_id and cluster.servers[controller_id].controller.is_active
    assert failures.messages == []
