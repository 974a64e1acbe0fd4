"""The partition and replica state machines on a bench controller (embedded ZooKeeper, no network):
legal and illegal transitions, the compare-and-set election loop, and the stale-controller check."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from kafka_edu.server.controller.controller_context import PartitionAndReplica
from kafka_edu.server.controller.kafka_controller import KafkaController
from kafka_edu.server.controller.partition_leader_selector import OfflinePartitionLeaderSelector, StateChangeFailedError
from kafka_edu.server.controller.partition_state_machine import (VALID_PREVIOUS_PARTITION_STATES,
                                                                 IllegalStateTransition, PartitionState)
from kafka_edu.server.controller.replica_state_machine import VALID_PREVIOUS_REPLICA_STATES, ReplicaState
from kafka_edu.server.kafka_config import EndPoint, KafkaConfig
from kafka_edu.server.replica.metadata_cache import Broker
from kafka_edu.server.topic_config import broker_default_log_config
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import LeaderAndIsr, ZkUtils


class RecordingChannel:
    def __init__(self, broker_ids):
        self.broker_state_info = dict.fromkeys(broker_ids)
        self.sent = []

    def send_request(self, broker_id, api_key, version, body, callback=None):
        self.sent.append((api_key.name, broker_id, body))


@pytest.fixture
def bench():
    config = KafkaConfig({"broker.id": 0, "log.dirs": "/unused"})
    zk_utils = ZkUtils(EmbeddedZooKeeper().connect())
    zk_utils.setup_common_paths()
    controller = KafkaController(config, zk_utils, SimpleNamespace(default_log_config=broker_default_log_config(config)))
    controller.context.epoch = 3
    controller.context.set_live_brokers(Broker(i, (EndPoint("PLAINTEXT", "h", 9092 + i),)) for i in range(3))
    controller.context.partition_replica_assignment = {("t", 0): [0, 1, 2]}
    zk_utils.create_topic_assignment("t", {0: [0, 1, 2]})
    controller.channel_manager = RecordingChannel([0, 1, 2])
    controller.partition_state_machine.has_started = controller.replica_state_machine.has_started = True
    yield controller
    zk_utils.zk.close()


@pytest.mark.parametrize("before,after", [(b, a) for b, a in itertools.product(PartitionState, PartitionState)
                                          if b not in VALID_PREVIOUS_PARTITION_STATES[a]])
def test_illegal_partition_transitions_name_both_states(bench, before, after):
    psm = bench.partition_state_machine
    if before is not PartitionState.NON_EXISTENT:
        psm.states[("t", 0)] = before
    with pytest.raises(IllegalStateTransition, match=f"partition t-0 cannot go from {before.value} to {after.value}"):
        psm.handle_state_change(("t", 0), after)
    assert psm.state_of(("t", 0)) is before and not bench.channel_manager.sent


@pytest.mark.parametrize("before,after", [(b, a) for b, a in itertools.product(ReplicaState, ReplicaState)
                                          if b not in VALID_PREVIOUS_REPLICA_STATES[a]])
def test_illegal_replica_transitions_name_both_states(bench, before, after):
    rsm, replica = bench.replica_state_machine, PartitionAndReplica("t", 0, 1)
    if before is not ReplicaState.NON_EXISTENT:
        rsm.states[replica] = before
    with pytest.raises(IllegalStateTransition, match=f"cannot go from {before.value} to {after.value}"):
        rsm.handle_state_change(replica, after)
    assert rsm.state_of(replica) is before


def test_batch_wrapper_logs_failures_and_keeps_the_state(bench):
    psm = bench.partition_state_machine
    psm.handle_state_changes([("t", 0)], PartitionState.ONLINE)          # NonExistent -> Online: illegal
    assert psm.state_of(("t", 0)) is PartitionState.NON_EXISTENT
    assert "cannot go from NonExistentPartition to OnlinePartition" in bench.state_change_log[-1]


def test_new_partition_needs_a_live_replica_and_creates_the_znode_once(bench):
    psm, context = bench.partition_state_machine, bench.context
    psm.handle_state_changes([("t", 0)], PartitionState.NEW)
    context.set_live_brokers([])
    psm.handle_state_changes([("t", 0)], PartitionState.ONLINE)
    assert psm.state_of(("t", 0)) is PartitionState.NEW and bench.zk_utils.get_leader_and_isr("t", 0) is None
    context.set_live_brokers(Broker(i, (EndPoint("PLAINTEXT", "h", 9092 + i),)) for i in (1, 2))
    psm.handle_state_changes([("t", 0)], PartitionState.ONLINE)
    state = bench.zk_utils.get_leader_and_isr("t", 0)
    assert (state.leader_and_isr.leader, state.leader_and_isr.isr, state.controller_epoch) == (1, (1, 2), 3)
    sent = [(api, broker) for api, broker, _ in bench.channel_manager.sent]
    assert sent == [("LEADER_AND_ISR", 1), ("LEADER_AND_ISR", 2), ("UPDATE_METADATA", 1), ("UPDATE_METADATA", 2)]


def test_election_retries_after_a_concurrent_isr_write(bench):
    """The compare-and-set loop: a leader shrinking the ISR between read and write makes the
    controller read again, and the new state is built on the leader's write."""
    psm, zk_utils = bench.partition_state_machine, bench.zk_utils
    zk_utils.create_leader_and_isr("t", 0, LeaderAndIsr(0, 0, (0, 1, 2)), 3)
    bench.context.partition_leadership_info["t", 0] = zk_utils.get_leader_and_isr("t", 0)
    psm.states[("t", 0)] = PartitionState.OFFLINE
    bench.context.set_live_brokers(Broker(i, (EndPoint("PLAINTEXT", "h", 9092 + i),)) for i in (1, 2))
    selector, calls = bench.offline_partition_selector, []
    original = selector.select_leader

    def racing(tp, current):
        calls.append(current)
        if len(calls) == 1:                       # the leader writes first: ISR without broker 1
            zk_utils.update_leader_and_isr("t", 0, LeaderAndIsr(0, 0, (0, 2), current.zk_version), 3)
        return original(tp, current)
    selector.select_leader = racing
    psm.handle_state_changes([("t", 0)], PartitionState.ONLINE, selector)
    state = zk_utils.get_leader_and_isr("t", 0).leader_and_isr
    assert len(calls) == 2 and (state.leader, state.isr, state.leader_epoch) == (2, (2,), 1)


def test_a_newer_controller_epoch_in_the_znode_stops_the_election(bench):
    zk_utils = bench.zk_utils
    zk_utils.create_leader_and_isr("t", 0, LeaderAndIsr(0, 4, (0, 1)), 7)
    with pytest.raises(StateChangeFailedError, match="newer than ours"):
        bench.partition_state_machine.elect_leader_for_partition(("t", 0), bench.offline_partition_selector)
    assert zk_utils.get_leader_and_isr("t", 0).leader_and_isr.leader_epoch == 4


def test_state_machines_refuse_to_work_when_not_started(bench):
    bench.partition_state_machine.has_started = False
    with pytest.raises(StateChangeFailedError, match="not started"):
        bench.partition_state_machine.handle_state_changes([("t", 0)], PartitionState.NEW)


def test_the_offline_selector_prefers_the_assignments_order_over_the_isrs():
    """0.10's OfflinePartitionLeaderSelector: the first live replica of the assignment that is in the
    ISR leads, so a preferred replica that rejoined last (the ISR's end) still wins over an earlier one."""
    context = SimpleNamespace(partition_replica_assignment={("t", 0): [0, 1, 2]}, live_broker_ids={1, 2})
    selector = OfflinePartitionLeaderSelector(context, lambda topic: False)
    elected, told = selector.select_leader(("t", 0), LeaderAndIsr(0, 4, (0, 2, 1), 7))
    assert (elected.leader, elected.isr, elected.leader_epoch, elected.zk_version) == (1, (2, 1), 5, 7)
    assert told == [1, 2]
