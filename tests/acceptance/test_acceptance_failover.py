"""Acceptance tests T5, T10, T11 and T21 on an InProcessCluster: the controller, the replica
managers and the fetchers together, driven only through sockets (admin, producer, consumer)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from _acceptance import consume, create_topic, produce, state
from _broker_client import BrokerClient

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.api.kafka_apis import KafkaApis


def test_T5_leader_failover_loses_no_acknowledged_record(make_cluster):
    cluster = make_cluster(3)
    create_topic(cluster, "t5", {0: [0, 1, 2]}, **{"min.insync.replicas": 2})
    values = [f"v{i}" for i in range(1000)]
    assert produce(cluster, "t5", values) == list(range(1000))
    leader, epoch, isr = state(cluster, "t5")
    cluster.kill(leader)
    new_leader, new_epoch, new_isr = cluster.wait_until(
        lambda: (s := state(cluster, "t5"))[0] not in (leader, -1) and s, timeout_s=5, what="a new leader")
    assert new_leader in isr and new_epoch == epoch + 1 and leader not in new_isr
    assert consume(cluster, "t5", 1000) == values


def leo(cluster, broker_id: int, topic: str) -> int:
    return cluster.broker(broker_id).log_manager.get_log(topic, 0).log_end_offset


def leader_error(cluster, broker_id: int, topic: str) -> int:
    """The error code broker `broker_id` answers in Metadata for partition 0 of `topic`."""
    with BrokerClient(cluster.ports[broker_id]) as client:
        [answer] = client.metadata([topic], allow_auto_topic_creation=False).topics
        return answer.partitions[0].error_code if answer.partitions else answer.error_code


def _lose_both_replicas(cluster, topic: str, unclean: bool | None, before_leader_dies=lambda: None) -> list[str]:
    """Brokers 1 (leader) and 2 hold `topic` (unclean election overridden for it unless None); 2 dies,
    1 takes 10 more records alone, then dies; 2 comes back alone. Returns the values broker 2 holds."""
    overrides = {} if unclean is None else {"unclean.leader.election.enable": str(unclean).lower()}
    create_topic(cluster, topic, {0: [1, 2]}, **overrides)
    both = [f"both-{i}" for i in range(10)]
    assert produce(cluster, topic, both) == list(range(10))
    cluster.kill(2)
    cluster.wait_until(lambda: state(cluster, topic)[2] == [1], what="broker 2 out of the ISR")
    assert produce(cluster, topic, [f"alone-{i}" for i in range(10)]) == list(range(10, 20))
    before_leader_dies()
    cluster.kill(1)
    cluster.restart(2)
    return both


def test_T10_clean_election_only_waits_for_the_last_isr_member(make_cluster):
    cluster = make_cluster(3)
    both = _lose_both_replicas(cluster, "t10", unclean=False)
    cluster.wait_until(lambda: leader_error(cluster, 2, "t10") == Errors.LEADER_NOT_AVAILABLE.code,
                       what="broker 2 answering LEADER_NOT_AVAILABLE")
    assert state(cluster, "t10")[0] == -1 and state(cluster, "t10")[2] == [1]   # offline, last ISR member kept
    assert leo(cluster, 2, "t10") == 10                                        # its log untouched
    cluster.restart(1)
    cluster.wait_until(lambda: state(cluster, "t10")[0] == 1, what="broker 1 leading again")
    assert consume(cluster, "t10", 20) == both + [f"alone-{i}" for i in range(10)]
    cluster.wait_until(lambda: leo(cluster, 2, "t10") == 20, what="broker 2 catching up")
    assert cluster.halted == {}


def test_T10_a_lagging_brokers_auto_creation_keeps_the_topic_overrides(make_cluster):
    """The setting T10 rests on must survive a broker that has not heard of the topic yet (as a
    restarted one) answering Metadata with auto.create.topics.enable: the topic exists, so its
    overrides in /config/topics must stay."""
    cluster = make_cluster(3)
    apis = cluster.broker(2).apis
    gate, handler = threading.Event(), apis.handlers[ApiKeys.UPDATE_METADATA]
    apis.handlers[ApiKeys.UPDATE_METADATA] = lambda *args: gate.wait(10) and handler(*args)
    try:
        with ClusterAdmin(f"127.0.0.1:{cluster.ports[0]}") as admin:
            topic = NewTopic("kept", replica_assignment={0: [0, 1]},
                             configs={"unclean.leader.election.enable": "false"})
            assert admin.create_topics([topic]) == {"kept": None}
        with BrokerClient(cluster.ports[2]) as client:
            [answer] = client.metadata(["kept"], allow_auto_topic_creation=True).topics
            assert answer.error_code == Errors.LEADER_NOT_AVAILABLE.code    # broker 2 does not know it yet
    finally:
        gate.set()
    assert cluster.zk_utils.fetch_entity_config("topics", "kept") == {"unclean.leader.election.enable": "false"}


@pytest.mark.parametrize("protocol, log_format", [("0.10.0", "0.10.0"), ("2.8", "0.11.0")])
def test_T11_unclean_election_and_the_returning_leader_truncates(make_cluster, protocol, log_format):
    """With 0.10.0 the returning broker truncates to its HW, is out of range, asks the leader's end and
    truncates there; with leader epochs (KIP-101) it asks OffsetsForLeaderEpoch. Same logs either way."""
    cluster = make_cluster(3, **{"inter.broker.protocol.version": protocol,
                                 "log.message.format.version": log_format})
    selector = cluster.controller().controller.offline_partition_selector
    before = selector.unclean_elections
    both = _lose_both_replicas(cluster, "t11", unclean=True)
    leader, epoch, isr = cluster.wait_until(lambda: (s := state(cluster, "t11"))[0] == 2 and s,
                                            what="broker 2 elected uncleanly")
    assert isr == [2] and selector.unclean_elections == before + 1
    cluster.restart(1)
    cluster.wait_until(lambda: sorted(state(cluster, "t11")[2]) == [1, 2], what="broker 1 back in the ISR")
    assert leo(cluster, 1, "t11") == 10 and state(cluster, "t11")[:2] == (2, epoch)
    assert consume(cluster, "t11", 10) == both                    # broker 1's ten lone records are gone
    asked = cluster.broker(2).apis.request_counts[ApiKeys.OFFSET_FOR_LEADER_EPOCH]
    assert (asked > 0) == (protocol != "0.10.0")                   # 0.10.0: out of range, then the leader's end
    epochs = [[(e.epoch, e.start_offset) for e in
               cluster.broker(b).replica_manager.get_partition(("t11", 0)).local_replica.epochs.entries()]
              for b in (1, 2)]
    assert epochs[0] == epochs[1]                                 # the epoch caches agree as well
    assert cluster.halted == {}


@pytest.fixture
def controller_requests(monkeypatch):
    """Every LeaderAndIsr, UpdateMetadata and StopReplica any broker handles, in order, as
    (broker id, api, partitions): each KafkaApis built during the test gets its three handler-table
    entries wrapped (nothing in the broker changes)."""
    handled: list[tuple[int, ApiKeys, list[tuple[str, int]]]] = []
    original = KafkaApis.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        broker_id = self.config["broker.id"]
        for api in (ApiKeys.LEADER_AND_ISR, ApiKeys.UPDATE_METADATA, ApiKeys.STOP_REPLICA):
            def recording(request, header, body, handler=self.handlers[api], api=api):
                states = body.ungrouped_partitions if api is ApiKeys.STOP_REPLICA else body.ungrouped_partition_states
                handled.append((broker_id, api, sorted((p.topic_name, p.partition_index) for p in states)))
                handler(request, header, body)
            self.handlers[api] = recording

    monkeypatch.setattr(KafkaApis, "__init__", init)
    return handled


def test_T21_restarted_broker_gets_all_metadata_first_then_follows_and_rejoins(make_cluster, controller_requests):
    cluster = make_cluster(3, **{"auto.leader.rebalance.enable": "false"})
    assignment = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
    create_topic(cluster, "t21", assignment)
    create_topic(cluster, "other", {0: [0, 1]})
    for p in assignment:
        produce(cluster, "t21", [f"{p}-{i}" for i in range(50)], partition=p)
    cluster.kill(2)
    cluster.wait_until(lambda: all(2 not in state(cluster, "t21", p)[2] and state(cluster, "t21", p)[0] != 2
                                   for p in assignment), what="broker 2 out of every ISR")
    for p in assignment:
        produce(cluster, "t21", [f"{p}-{i}" for i in range(50, 100)], partition=p)
    seen = len(controller_requests)
    cluster.restart(2)
    cluster.wait_until(lambda: all(2 in state(cluster, "t21", p)[2] for p in assignment), what="broker 2 in every ISR")
    to_returner = [(api, parts) for b, api, parts in controller_requests[seen:] if b == 2]
    everything = [("other", 0)] + [("t21", p) for p in assignment]
    assert to_returner[0] == (ApiKeys.UPDATE_METADATA, everything)
    assert ApiKeys.LEADER_AND_ISR in [api for api, _ in to_returner[1:]]
    replica_manager = cluster.broker(2).replica_manager
    for p in assignment:
        partition = replica_manager.get_partition(("t21", p))
        assert not partition.is_leader and partition.leader_replica_id == state(cluster, "t21", p)[0]
        assert partition.local_replica.log_end_offset == 100


def test_T11_a_returning_broker_whose_own_setting_forbids_unclean_election_halts(make_cluster):
    """The controller (broker 0, default true) elects broker 2 uncleanly; broker 1's own configuration
    says false and the topic has no override, so on finding the leader's log shorter than its own it
    halts (Kafka's System.exit(1); a hard kill of that broker here) instead of truncating."""
    cluster = make_cluster(3, broker_overrides={1: {"unclean.leader.election.enable": "false"}},
                           **{"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.0",
                              "replica.high.watermark.checkpoint.interval.ms": 100})
    checkpoint = Path(cluster.config(1).log_dirs[0]) / "replication-offset-checkpoint"
    # broker 1 must come back knowing its high watermark was 20: then it fetches from 20, not from a
    # stale checkpointed 10 (the 0.10 case where it would truncate silently instead)
    _lose_both_replicas(cluster, "t11h", unclean=None, before_leader_dies=lambda: cluster.wait_until(
        lambda: checkpoint.exists() and "t11h 0 20" in checkpoint.read_text(), what="broker 1's checkpointed HW"))
    cluster.wait_until(lambda: state(cluster, "t11h")[0] == 2, what="broker 2 elected uncleanly")
    cluster.restart(1)
    cluster.wait_until(lambda: 1 in cluster.halted, what="broker 1 halting")
    assert "unclean leader election is disabled" in cluster.halted[1]
    cluster.wait_until(lambda: 1 not in cluster.live_brokers, what="broker 1 gone")
    assert leo(cluster, 1, "t11h") == 20                          # nothing thrown away
