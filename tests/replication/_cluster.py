"""Brokers in one process sharing an embedded ZooKeeper, with partitions driven by hand.

The controller of this stage sends LeaderAndIsr and UpdateMetadata only to its own broker, so these
tests play the controller for the partitions they create: they write the partition state znode with
zk_utils (no /brokers/topics entry, so the real controller leaves the partition alone) and apply
the same LeaderAndIsr and UpdateMetadata to every broker in process.
"""
from __future__ import annotations

import time

from _broker_client import BrokerClient, start_broker

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.replica.metadata_cache import Broker, PartitionStateInfo
from kafka_edu.server.replica.partition import PartitionState
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import CONFIG_TYPE_TOPIC, LeaderAndIsr

FAST = {"replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 100, "replica.lag.time.max.ms": 10_000,
        "replica.high.watermark.checkpoint.interval.ms": 200, "num.io.threads": 2, "num.network.threads": 1,
        "offsets.topic.replication.factor": 1}


def wait_until(condition, timeout_s: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Cluster:
    """N KafkaServers (ids 0..N-1) on free ports, one EmbeddedZooKeeper, own log dirs."""

    def __init__(self, tmp_path, size: int, serve_leader_epochs: bool = True, **props):
        self.tmp_path = tmp_path
        self.serve_leader_epochs = serve_leader_epochs
        self.props = {**FAST, **props}
        self.zookeeper = EmbeddedZooKeeper()
        self.brokers = {}
        self.replicas: dict[tuple[str, int], tuple[int, ...]] = {}
        self.halted: list[tuple[int, str]] = []
        for broker_id in range(size):
            self.start(broker_id)

    def start(self, broker_id: int):
        server = start_broker(self.tmp_path / f"broker{broker_id}", self.zookeeper,
                              halt=lambda reason: self.halted.append((broker_id, reason)),
                              **{**self.props, "broker.id": broker_id})
        if not self.serve_leader_epochs:    # a leader that does not serve it (an older broker)
            server.apis.handlers.pop(ApiKeys.OFFSET_FOR_LEADER_EPOCH, None)
        self.brokers[broker_id] = server
        return server

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).shutdown()

    def shutdown(self) -> None:
        for broker_id in list(self.brokers):
            self.stop(broker_id)

    @property
    def zk_utils(self):
        return next(iter(self.brokers.values())).zk_utils

    def client(self, broker_id: int) -> BrokerClient:
        return BrokerClient(self.brokers[broker_id].bound_port())

    # --- playing the controller -------------------------------------------------------------------
    def create_partition(self, topic: str, partition: int, replicas, isr=None, config=None) -> None:
        """Leader = replicas[0], ISR = `isr` (default: all replicas), leader epoch 0."""
        if config:
            self.zk_utils.change_entity_config(CONFIG_TYPE_TOPIC, topic, {k: str(v) for k, v in config.items()})
        epoch = self.zk_utils.get_controller_epoch()[0]
        state = LeaderAndIsr(replicas[0], 0, tuple(replicas if isr is None else isr))
        self.zk_utils.create_leader_and_isr(topic, partition, state, epoch)
        self.replicas[(topic, partition)] = tuple(replicas)
        self.publish(topic, partition)

    def elect(self, topic: str, partition: int, leader: int, isr) -> None:
        """A new leader and ISR, leader epoch + 1, as the controller's election writes them."""
        current = self.zk_utils.get_leader_and_isr(topic, partition)
        state = current.leader_and_isr
        epoch = self.zk_utils.get_controller_epoch()[0]
        written, _ = self.zk_utils.update_leader_and_isr(
            topic, partition, LeaderAndIsr(leader, state.leader_epoch + 1, tuple(isr), state.zk_version), epoch)
        assert written
        self.publish(topic, partition)

    def publish(self, topic: str, partition: int, to=None) -> None:
        """UpdateMetadata to every running broker, then LeaderAndIsr to the running replicas (or `to`)."""
        tp = (topic, partition)
        replicas = self.replicas[tp]
        current = self.zk_utils.get_leader_and_isr(topic, partition)
        s = current.leader_and_isr
        controller_epoch = self.zk_utils.get_controller_epoch()[0]
        live = [Broker.from_broker_info(b) for b in self.zk_utils.get_all_brokers_in_cluster()]
        info = PartitionStateInfo(s.leader, s.leader_epoch, tuple(s.isr), s.zk_version, replicas,
                                  current.controller_epoch)
        state = PartitionState(current.controller_epoch, s.leader, s.leader_epoch, tuple(s.isr), s.zk_version,
                               replicas)
        controller_id = self.zk_utils.get_controller_id()
        controller_id = -1 if controller_id is None else controller_id    # between two controllers
        for server in self.brokers.values():
            server.metadata_cache.update_cache(controller_id, live, {tp: info})
        for broker_id in (replicas if to is None else to):
            if broker_id in self.brokers:
                self.brokers[broker_id].replica_manager.become_leader_or_follower(controller_id, controller_epoch,
                                                                                  {tp: state})

    def partition(self, broker_id: int, topic: str, partition: int = 0):
        return self.brokers[broker_id].replica_manager.get_partition((topic, partition))

    def isr_in_zk(self, topic: str, partition: int = 0) -> list[int]:
        return sorted(self.zk_utils.get_leader_and_isr(topic, partition).leader_and_isr.isr)
