"""Partition reassignment in two phases (T18): the AR widens to old + new, then narrows to new once
the new replicas are in the ISR; the old replicas' logs are deleted and the request znode goes."""
from __future__ import annotations

import pytest
from _controller_cluster import Cluster
from blocking_client import CodecConnection
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.server.zk.zk_utils import REASSIGN_PARTITIONS_PATH


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("reassign"), size=6)
    yield cluster
    cluster.shutdown()


def batch(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder()
    for v in values:
        builder.append(1000, None, v)
    return bytes(builder.build())


def produce(server, topic, values):
    with CodecConnection(server.bound_port()) as c:
        answer = c.call(ApiKeys.PRODUCE, 7, {"acks": -1, "timeout_ms": 5000, "transactional_id": None, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch(*values)}]}]})
    return answer.responses[0].partition_responses[0].error_code


def test_reassignment_moves_the_partition_and_keeps_the_data(cluster):
    controller = cluster.controller().controller
    zk = cluster.zk_utils
    zk.create_topic_assignment("t", {0: [1, 2, 3]})
    wait_for(lambda: zk.get_leader_and_isr("t", 0) is not None and
             cluster.servers[1].replica_manager.get_partition(("t", 0)) is not None
             and cluster.servers[1].replica_manager.get_partition(("t", 0)).is_leader, what="t-0 led by 1")
    assert produce(cluster.servers[1], "t", [b"a", b"b", b"c"]) == 0
    seen = []
    subscription = zk.zk.subscribe_data_changes("/brokers/topics/t", lambda path, data: seen.append(
        zk.get_partition_assignment_for_topics(["t"])["t"][0]))
    zk.update_partition_reassignment_data({("t", 0): [3, 4, 5]})
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, timeout=20, what="reassignment finished")
    subscription.cancel()
    assert zk.get_partition_assignment_for_topics(["t"])["t"][0] == [3, 4, 5]
    assert [1, 2, 3, 4, 5] in seen or any(set(s) == {1, 2, 3, 4, 5} for s in seen)
    state = zk.get_leader_and_isr("t", 0).leader_and_isr
    assert state.leader in (3, 4, 5) and set(state.isr) <= {3, 4, 5}
    assert ("t", 0) not in controller.context.partitions_being_reassigned
    wait_for(lambda: not any((cluster.tmp_path / f"broker-{b}" / "t-0").exists() for b in (1, 2)),
             what="old replicas' logs deleted")
    leader = cluster.servers[state.leader]
    wait_for(lambda: leader.replica_manager.get_partition(("t", 0)) is not None
             and leader.replica_manager.get_partition(("t", 0)).is_leader, what="the new leader leading")
    def consumed():
        with CodecConnection(leader.bound_port()) as c:
            fetched = c.call(ApiKeys.FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        return [r.value for r in MemoryRecords(fetched.responses[0].partitions[0].records).records()]
    wait_for(lambda: consumed() == [b"a", b"b", b"c"], what="the acknowledged messages on the new leader")


def test_pointless_or_impossible_reassignments_are_dropped(cluster):
    controller = cluster.controller().controller
    zk = cluster.zk_utils
    zk.create_topic_assignment("u", {0: [0, 1]})
    wait_for(lambda: zk.get_leader_and_isr("u", 0) is not None, what="u-0")
    before = zk.get_leader_and_isr("u", 0)
    zk.update_partition_reassignment_data({("u", 0): [0, 1]})
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, what="identical AR dropped")
    zk.update_partition_reassignment_data({("u", 0): [0, 42]})
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, what="dead broker dropped")
    assert zk.get_leader_and_isr("u", 0) == before
    assert zk.get_partition_assignment_for_topics(["u"])["u"][0] == [0, 1]
    assert sum("reassignment to" in line and "dropped" in line for line in controller.state_change_log) == 2


def test_a_reassignment_that_cannot_start_is_dropped_not_left_pending(cluster):
    """A partition created while none of its replicas was alive has no leader and ISR; moving it
    fails in phase A, and the request goes away (as in 0.10) instead of blocking every later one."""
    controller = cluster.controller().controller
    zk = cluster.zk_utils
    zk.create_topic_assignment("orphan", {0: [7]})                     # broker 7 never existed
    wait_for(lambda: ("orphan", 0) in controller.context.partition_replica_assignment, what="the topic seen")
    assert zk.get_leader_and_isr("orphan", 0) is None
    zk.update_partition_reassignment_data({("orphan", 0): [0]})
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, what="the request dropped")
    assert ("orphan", 0) not in controller.context.partitions_being_reassigned
    assert any("orphan-0: reassignment to [0] failed" in change for change in controller.state_change_log)


def test_a_reassignment_to_no_replicas_is_dropped(cluster):
    """An empty target would leave the partition with no replica at all; the controller refuses it
    (Kafka's tool refuses such a file too, since 0.11) and keeps the assignment and leader."""
    controller = cluster.controller().controller
    zk = cluster.zk_utils
    zk.create_topic_assignment("v", {0: [0, 1]})
    wait_for(lambda: zk.get_leader_and_isr("v", 0) is not None, what="v-0")
    before = zk.get_leader_and_isr("v", 0)
    zk.update_partition_reassignment_data({("v", 0): []})
    wait_for(lambda: zk.zk.exists(REASSIGN_PARTITIONS_PATH) is None, what="the empty target dropped")
    assert zk.get_leader_and_isr("v", 0) == before
    assert zk.get_partition_assignment_for_topics(["v"])["v"][0] == [0, 1]
    assert any("v-0: reassignment to [] dropped: no replica is named" in c for c in controller.state_change_log)
