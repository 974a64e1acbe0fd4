"""ControllerChannelManager (4.6.2) and ControllerBrokerRequestBatch (4.6.3): FIFO per broker, retry
until a broker is reachable, isolation between brokers, and the batch's rules and send order."""
from __future__ import annotations

import queue
from types import SimpleNamespace

import pytest
from _controller_cluster import CLUSTER_DEFAULTS
from external import free_port, wait_for

from kafka_edu.common.metrics.metrics import Metrics
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.controller.channel_manager import ControllerBrokerRequestBatch, ControllerChannelManager
from kafka_edu.server.controller.controller_context import ControllerContext
from kafka_edu.server.kafka_config import EndPoint, KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.replica.metadata_cache import Broker
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import LeaderAndIsr, LeaderIsrAndControllerEpoch


def server_on(tmp_path, port: int) -> KafkaServer:
    config = KafkaConfig({**CLUSTER_DEFAULTS, "broker.id": 0, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                          "log.dirs": str(tmp_path)})
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    return server


@pytest.fixture
def channel():
    channel = ControllerChannelManager(7, KafkaConfig({"broker.id": 7, "log.dirs": "/unused"}))
    yield channel
    channel.shutdown()


def broker(broker_id: int, port: int) -> Broker:
    return Broker(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port),))


def test_requests_wait_for_an_unreachable_broker_and_keep_their_order(tmp_path, channel):
    port = free_port()
    answers: queue.Queue = queue.Queue()
    channel.add_broker(broker(0, port))
    for version in (2, 0, 1):
        channel.send_request(0, ApiKeys.API_VERSIONS, version, {}, lambda body, v=version: answers.put(v))
    thread = channel.broker_state_info[0].request_send_thread
    wait_for(lambda: thread.failed_attempts >= 2, what="a few refused attempts")
    assert channel.queue_size(0) == 3 and answers.empty()
    server = server_on(tmp_path, port)
    try:
        assert [answers.get(timeout=10) for _ in range(3)] == [2, 0, 1]
        assert channel.await_delivered([0], 5) and channel.queue_size(0) == 0 and thread.failed_attempts == 0
    finally:
        server.shutdown()


def test_an_unreachable_broker_delays_nobody_else(tmp_path, channel):
    server = server_on(tmp_path, 0)
    try:
        answers: queue.Queue = queue.Queue()
        channel.add_broker(broker(9, free_port()))
        channel.add_broker(broker(0, server.bound_port()))
        channel.send_request(9, ApiKeys.API_VERSIONS, 0, {}, lambda body: answers.put(9))
        channel.send_request(0, ApiKeys.API_VERSIONS, 0, {}, lambda body: answers.put(0))
        assert answers.get(timeout=10) == 0
        thread9 = channel.broker_state_info[9].request_send_thread
        channel.remove_broker(9)
        thread9.join(5)
        assert not thread9.is_alive() and answers.empty() and sorted(channel.broker_state_info) == [0]
        channel.send_request(9, ApiKeys.API_VERSIONS, 0, {})          # a removed broker: dropped quietly
    finally:
        server.shutdown()


def test_each_channel_has_selector_metrics_tagged_with_its_broker(tmp_path):
    """T30 (controller part): group controller-channel-metrics, tag broker-id, gone with the broker;
    a broker removed and added straight back gets its metrics again, without a name clash."""
    registry = Metrics()
    channel = ControllerChannelManager(7, KafkaConfig({"broker.id": 7, "log.dirs": "/unused"}), metrics=registry)
    server = server_on(tmp_path, 0)

    def by_broker():
        found: dict[str, dict[str, float]] = {}
        for name, metric in registry.metrics().items():
            if name.group == "controller-channel-metrics":
                found.setdefault(name.tags["broker-id"], {})[name.name] = metric.value()
        return found

    try:
        channel.add_broker(broker(0, server.bound_port()))
        channel.add_broker(broker(9, free_port()))
        answers: queue.Queue = queue.Queue()
        channel.send_request(0, ApiKeys.API_VERSIONS, 0, {}, answers.put)
        answers.get(timeout=10)
        metrics = by_broker()
        assert sorted(metrics) == ["0", "9"]
        assert metrics["0"]["connection-count"] == 1 and metrics["0"]["request-size-max"] > 0
        assert metrics["9"]["connection-count"] == 0
        assert not any(n.group == "controller-channel-node-metrics" for n in registry.metrics())
        channel.remove_broker(9)
        wait_for(lambda: "9" not in by_broker(), what="broker 9's metrics removed")
        channel.remove_broker(0)
        channel.add_broker(broker(0, server.bound_port()))
        channel.send_request(0, ApiKeys.API_VERSIONS, 0, {}, answers.put)
        answers.get(timeout=10)
        assert sorted(by_broker()) == ["0"] and by_broker()["0"]["connection-count"] == 1
    finally:
        channel.shutdown()
        server.shutdown()
    assert by_broker() == {}


class RecordingChannel:
    def __init__(self, broker_ids):
        self.broker_state_info = dict.fromkeys(broker_ids)
        self.sent = []

    def send_request(self, broker_id, api_key, version, body, callback=None):
        self.sent.append((api_key.name, broker_id, body, callback))


@pytest.fixture
def bench():
    context = ControllerContext(epoch=4)
    context.set_live_brokers(broker(i, 9092 + i) for i in range(3))
    context.partition_replica_assignment = {("t", 0): [0, 1], ("gone", 0): [1, 2]}
    context.partition_leadership_info = {
        ("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 2, (0, 1), 5), 4),
        ("gone", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 4)}
    return SimpleNamespace(broker_id=2, config={"security.inter.broker.protocol": "PLAINTEXT"}, context=context,
                           channel_manager=RecordingChannel([0, 1, 2]), record_request=lambda *args: None,
                           topic_deletion_manager=SimpleNamespace(partitions_to_be_deleted={("gone", 0)}))


def test_batch_order_and_its_rules(bench):
    batch = ControllerBrokerRequestBatch(bench)
    batch.new_batch()
    batch.add_stop_replica_request_for_brokers([1], ("gone", 0), True, callback=lambda replica, body: None)
    batch.add_stop_replica_request_for_brokers([1], ("t", 0), False)
    batch.add_leader_and_isr_request_for_brokers([0, 1, -1], ("t", 0), bench.context.partition_leadership_info[("t", 0)],
                                                 [0, 1])
    with pytest.raises(RuntimeError, match="unsent requests"):
        batch.new_batch()
    batch.send_requests_to_brokers(4)
    sent = bench.channel_manager.sent
    assert [(api, b) for api, b, _, _ in sent] == [
        ("LEADER_AND_ISR", 0), ("LEADER_AND_ISR", 1), ("UPDATE_METADATA", 0), ("UPDATE_METADATA", 1),
        ("UPDATE_METADATA", 2), ("STOP_REPLICA", 1), ("STOP_REPLICA", 1)]
    leader_and_isr = sent[0][2]
    assert leader_and_isr["controller_epoch"] == 4 and leader_and_isr["controller_id"] == 2
    assert leader_and_isr["live_leaders"] == [{"broker_id": 0, "host_name": "127.0.0.1", "port": 9092}]
    assert leader_and_isr["ungrouped_partition_states"][0]["partition_epoch"] == 5
    update = {(p["topic_name"], p["leader"]) for p in sent[2][2]["ungrouped_partition_states"]}
    assert update == {("t", 0), ("gone", -2)}                      # the deleted partition rides along, leader -2
    assert [b["id"] for b in sent[2][2]["live_brokers"]] == [0, 1, 2]
    plain, with_callback = sent[5], sent[6]
    assert (plain[2]["delete_partitions"], plain[3]) == (False, None)
    assert with_callback[2]["delete_partitions"] is True and with_callback[3] is not None
    assert not (batch.leader_and_isr_request_map or batch.update_metadata_request_map or batch.stop_replica_request_map)
    batch.new_batch()
