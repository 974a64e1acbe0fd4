"""Leadership of an offsets partition bounces (leader, follower, leader) while the coordinator's
one-thread scheduler is still busy: every move is queued, so the loads and unloads run in order
afterwards, and the last one, a load, must run too. The broker then owns the partition it leads;
before, the second load was dropped as "already in progress" and every group request got
NOT_COORDINATOR while FindCoordinator kept naming this broker."""
from __future__ import annotations

import threading

import pytest
from _broker_client import BrokerClient, start_broker
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors

OFFSETS_0 = ("__consumer_offsets", 0)
LEAD, FOLLOW = ({OFFSETS_0}, set()), (set(), {OFFSETS_0})


@pytest.fixture
def broker(tmp_path):
    server = start_broker(tmp_path, **{"offsets.topic.num.partitions": 1})
    with BrokerClient(server.bound_port()) as client:
        client.create_topic("orders", partitions=1)
        wait_for(lambda: client.call(ApiKeys.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0}).error_code == 0,
                 what="a coordinator")
    yield server
    server.shutdown()


def commit(client) -> int:
    answer = client.call(ApiKeys.OFFSET_COMMIT, 2, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                      "committed_metadata": ""}]}]})
    return answer.topics[0].partitions[0].error_code


def fetch(client) -> tuple[int, int]:
    answer = client.call(ApiKeys.OFFSET_FETCH, 2, {"group_id": "g",
                                                   "topics": [{"name": "orders", "partition_indexes": [0]}]})
    return answer.error_code, answer.topics[0].partitions[0].committed_offset


@pytest.mark.parametrize("moves", [[FOLLOW, LEAD], [FOLLOW, LEAD, FOLLOW, LEAD]], ids=["once", "twice"])
def test_every_queued_move_of_an_offsets_partition_runs(broker, moves):
    manager = broker.group_coordinator.group_manager
    with BrokerClient(broker.bound_port()) as client:
        assert commit(client) == Errors.NONE.code
        busy = threading.Event()                 # stands for a long load of another partition
        broker.group_coordinator_scheduler.schedule("busy", lambda: busy.wait(10))
        for leaders, followers in moves:         # what ReplicaManager tells its leadership listeners
            for listener in list(broker.replica_manager.leadership_listeners):
                listener(set(leaders), set(followers))
        assert manager.is_group_loading("g")     # answered LOAD_IN_PROGRESS meanwhile, not NOT_COORDINATOR
        busy.set()
        wait_for(lambda: not manager.is_loading() and manager.is_group_local("g"), what="the last load")
        assert fetch(client) == (Errors.NONE.code, 7)
