"""T30 on a running cluster: the broker's registry, its beans under Kafka's names, and how they move
when a broker dies (ISR shrinks counted, the leader election timed)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))    # _broker_client

from _broker_client import BrokerClient, records  # noqa: E402

from kafka_edu.clients.admin import ClusterAdmin, NewTopic  # noqa: E402
from kafka_edu.server.cluster import InProcessCluster  # noqa: E402

ISR_SHRINKS = "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"
ELECTIONS = "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"
CHANNEL = "kafka.server:type=controller-channel-metrics,broker-id=1"


@pytest.fixture
def cluster(tmp_path):
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    cluster = InProcessCluster(3, {"replica.lag.time.max.ms": 1000, "replica.fetch.wait.max.ms": 100},
                               data_dir=str(tmp_path)).start()
    yield cluster
    cluster.shutdown()


def produce(cluster, topic: str, partition: int, count: int) -> None:
    leader = cluster.partition_state(topic, partition).leader_and_isr.leader
    with BrokerClient(cluster.ports[leader]) as client:
        for i in range(count):
            assert client.produce(topic, partition, records(b"v%d" % i), acks=-1).error_code == 0


def test_a_running_cluster_exposes_kafkas_beans_and_they_move_when_a_broker_dies(cluster):
    with ClusterAdmin(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic("test", replica_assignment={0: [1, 2, 0]})]) == {"test": None}
    cluster.wait_until(lambda: cluster.partition_state("test", 0), what="test-0's leader")
    cluster.wait_until(lambda: len(cluster.partition_state("test", 0).leader_and_isr.isr) == 3, what="a full ISR")
    produce(cluster, "test", 0, 5)
    leader = cluster.broker(1)
    beans = leader.mbean_server
    log_bean = "kafka.log:type=Log,name=NumLogSegments,topic=test,partition=0"
    assert beans.get_attribute(log_bean, "Value") == 1
    assert beans.get_attribute("kafka.log:type=Log,name=LogEndOffset,topic=test,partition=0", "Value") == 5
    messages_in = "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"
    assert beans.get_attribute(messages_in + ",topic=test", "Count") == 5
    assert beans.get_attribute(messages_in, "Count") == 5          # the all-topics meter
    assert beans.get_attribute("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=test", "Count") > 0
    follower_fetches = "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=FetchFollower"
    cluster.wait_until(lambda: beans.is_registered(follower_fetches), what="a follower fetch measured")
    assert beans.get_attribute(follower_fetches, "Count") > 0
    # a request is measured once its response is written, which the client may see first
    produce_time = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"
    cluster.wait_until(lambda: beans.get_attribute(produce_time, "Count") == 5, what="five produce requests measured")
    assert beans.get_attribute("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", "Value") == 0

    controller = cluster.controller()
    assert controller.broker_id == 0
    active = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
    assert controller.mbean_server.get_attribute(active, "Value") == 1
    assert cluster.broker(2).mbean_server.get_attribute(active, "Value") == 0
    channel = controller.mbean_server.get_attributes(CHANNEL)
    assert {"connection-count", "request-rate", "io-wait-ratio"} <= set(channel)
    assert channel["connection-count"] >= 1
    assert beans.get_attribute(ISR_SHRINKS, "Count") == 0
    elections_before = controller.mbean_server.get_attribute(ELECTIONS, "Count")

    # a follower that stops fetching falls out of the ISR by the leader's own check (the controller
    # takes a dead broker out of the ISRs before the leader's lag check can, as in Kafka)
    assert cluster.pause_fetchers(2)
    cluster.wait_until(lambda: beans.get_attribute(ISR_SHRINKS, "Count") >= 1, what="an ISR shrink counted")
    assert beans.get_attribute("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", "Value") == 1
    cluster.resume_fetchers(2)
    cluster.wait_until(lambda: beans.get_attribute("kafka.server:type=ReplicaManager,name=IsrExpandsPerSec",
                                                   "Count") >= 1, what="the follower back in the ISR")

    cluster.kill(1)                          # the leader dies: the controller elects another, timed
    cluster.wait_until(lambda: cluster.partition_state("test", 0).leader_and_isr.leader in (0, 2), what="a new leader")
    cluster.wait_until(lambda: controller.mbean_server.get_attribute(ELECTIONS, "Count") > elections_before,
                       what="the broker failure handled and timed")
    for attribute in ("Max", "Mean", "99thPercentile", "OneMinuteRate"):
        assert attribute in controller.mbean_server.get_attributes(ELECTIONS)
    assert controller.mbean_server.get_attribute(
        "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", "Count") == 0


def test_deleting_a_log_removes_its_gauges(cluster):
    with ClusterAdmin(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic("gone", replica_assignment={0: [0]})]) == {"gone": None}
    beans = cluster.broker(0).mbean_server
    size = "kafka.log:type=Log,name=Size,topic=gone,partition=0"
    cluster.wait_until(lambda: beans.is_registered(size), what="the log's gauges")
    cluster.broker(0).log_manager.delete_log("gone", 0)
    assert not beans.query_names("kafka.log:type=Log,*topic=gone*")


def test_a_killed_broker_restarts_with_fresh_beans(cluster):
    cluster.kill(2)
    assert not cluster.broker(2).mbean_server.query_names("kafka.server:type=ReplicaManager,*")
    restarted = cluster.restart(2)
    assert restarted.mbean_server.is_registered("kafka.server:type=ReplicaManager,name=IsrShrinksPerSec")
