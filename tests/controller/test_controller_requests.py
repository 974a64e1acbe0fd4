"""The inter-broker APIs over a real socket: controller-epoch fencing (T3), leader-epoch fencing (T4),
UpdateMetadata, ControlledShutdown, and malformed requests that must not harm the broker."""
from __future__ import annotations

import struct

import pytest
from _controller_cluster import Cluster
from blocking_client import CodecConnection, FrameConnection
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("requests"), size=1)
    cluster.zk_utils.create_topic_assignment("fenced", {0: [0]})
    server = cluster.servers[0]
    wait_for(lambda: server.replica_manager.get_partition(("fenced", 0)), what="the partition")
    # the controller's UpdateMetadata follows its LeaderAndIsr: a test that compares the metadata cache
    # before and after a request must not see that one land in between
    wait_for(lambda: server.metadata_cache.get_partition_info("fenced", 0), what="the partition's metadata")
    yield server
    cluster.shutdown()


@pytest.fixture
def client(broker):
    with CodecConnection(broker.bound_port()) as c:
        yield c


def partition_state(topic, partition, leader, leader_epoch, replicas, controller_epoch=1):
    return {"topic_name": topic, "partition_index": partition, "controller_epoch": controller_epoch,
            "leader": leader, "leader_epoch": leader_epoch, "isr": replicas, "partition_epoch": 0,
            "zk_version": 0, "replicas": replicas}


def leader_and_isr(client, controller_epoch, *states):
    return client.call(ApiKeys.LEADER_AND_ISR, 0, {"controller_id": 0, "controller_epoch": controller_epoch,
                                                   "ungrouped_partition_states": list(states), "live_leaders": []})


def test_stale_controller_epoch_is_refused_by_all_three_apis(broker, client):
    """T3: epoch current - 1 gets STALE_CONTROLLER_EPOCH and changes nothing."""
    current = broker.replica_manager.controller_epoch
    partition = broker.replica_manager.get_partition(("fenced", 0))
    before = (partition.leader_replica_id, partition.leader_epoch)
    answer = leader_and_isr(client, current - 1, partition_state("fenced", 0, 0, 99, [0]))
    assert answer.error_code == Errors.STALE_CONTROLLER_EPOCH.code and answer.partition_errors == []
    assert (partition.leader_replica_id, partition.leader_epoch) == before
    answer = client.call(ApiKeys.STOP_REPLICA, 0, {"controller_id": 0, "controller_epoch": current - 1,
                                                   "delete_partitions": True,
                                                   "ungrouped_partitions": [{"topic_name": "fenced",
                                                                             "partition_index": 0}]})
    assert answer.error_code == Errors.STALE_CONTROLLER_EPOCH.code
    assert broker.replica_manager.get_partition(("fenced", 0)) is partition and partition.local_replica is not None
    cached = broker.metadata_cache.get_partition_info("fenced", 0)
    answer = client.call(ApiKeys.UPDATE_METADATA, 2, {
        "controller_id": 7, "controller_epoch": current - 1, "live_brokers": [],
        "ungrouped_partition_states": [partition_state("fenced", 0, -2, 99, [0])]})
    assert answer.error_code == Errors.STALE_CONTROLLER_EPOCH.code
    assert broker.metadata_cache.get_partition_info("fenced", 0) == cached and broker.metadata_cache.controller_id == 0


def test_stale_leader_epoch_and_foreign_partition(broker, client):
    """T4: a partition whose leader epoch is not newer is refused; one not assigned here is unknown."""
    current = broker.replica_manager.controller_epoch
    epoch = broker.replica_manager.get_partition(("fenced", 0)).leader_epoch
    answer = leader_and_isr(client, current, partition_state("fenced", 0, 0, epoch, [0], current),
                            partition_state("elsewhere", 0, 5, 1, [5, 6], current))
    errors = {(p.topic_name, p.partition_index): p.error_code for p in answer.partition_errors}
    assert answer.error_code == 0
    assert errors == {("fenced", 0): Errors.STALE_CONTROLLER_EPOCH.code,
                      ("elsewhere", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION.code}


def test_update_metadata_v0_and_v2_brokers(broker, client):
    current = broker.replica_manager.controller_epoch
    body = {"controller_id": 0, "controller_epoch": current, "ungrouped_partition_states": [],
            "live_brokers": [{"id": 0, "v0_host": "10.0.0.1", "v0_port": 9092}]}
    assert client.call(ApiKeys.UPDATE_METADATA, 0, body).error_code == 0
    assert [str(e) for e in broker.metadata_cache.get_alive_broker(0).end_points] == ["PLAINTEXT://10.0.0.1:9092"]
    body["live_brokers"] = [{"id": 0, "rack": "r1", "endpoints": [
        {"host": "127.0.0.1", "port": broker.bound_port(), "security_protocol": 0},
        {"host": "h", "port": 1, "security_protocol": 2}]}]
    assert client.call(ApiKeys.UPDATE_METADATA, 2, body).error_code == 0
    alive = broker.metadata_cache.get_alive_broker(0)
    assert alive.rack == "r1" and [e.protocol for e in alive.end_points] == ["PLAINTEXT", "SASL_PLAINTEXT"]
    body["live_brokers"][0]["endpoints"][0]["security_protocol"] = 77      # no such protocol
    assert client.call(ApiKeys.UPDATE_METADATA, 2, body).error_code == Errors.INVALID_REQUEST.code
    assert broker.metadata_cache.get_alive_broker(0) == alive


def test_controlled_shutdown_of_unknown_broker_and_truncated_frame(broker, client):
    answer = client.call(ApiKeys.CONTROLLED_SHUTDOWN, 1, {"broker_id": 42})
    assert answer.error_code == Errors.BROKER_NOT_AVAILABLE.code and answer.remaining_partitions == []
    with CodecConnection(broker.bound_port()) as other:
        other.send_frame(b"\x00\x04\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00")     # LeaderAndIsr v0, body cut
        assert other.closed_by_peer(timeout=10)
    assert client.call(ApiKeys.CONTROLLED_SHUTDOWN, 1, {"broker_id": 0}).error_code == 0
    assert client.call(ApiKeys.API_VERSIONS, 0, {}).error_code == 0


def test_controlled_shutdown_v0_has_no_client_id(tmp_path):
    """ControlledShutdown v0 (0.8's header: no client id) over a raw socket: leaderships that can move
    do, and the v0 response lists, in its own layout, the partition that cannot (no other ISR member)."""
    cluster = Cluster(tmp_path, size=2)
    try:
        controller = cluster.controller()
        leaving = 1 - controller.broker_id
        cluster.zk_utils.create_topic_assignment("cs0", {0: [leaving, controller.broker_id], 1: [leaving, 99]})
        wait_for(lambda: all(cluster.zk_utils.get_leader_and_isr("cs0", p) is not None for p in (0, 1)),
                 what="cs0's partitions")
        with FrameConnection(controller.bound_port()) as raw:
            raw.send_frame(struct.pack(">hhii", ApiKeys.CONTROLLED_SHUTDOWN, 0, 4242, leaving))
            frame = raw.receive_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
        (length,) = struct.unpack_from(">h", frame, 10)
        topic = frame[12:12 + length].decode()
        (partition,) = struct.unpack_from(">i", frame, 12 + length)
        assert (correlation_id, error_code, count, topic, partition) == (4242, 0, 1, "cs0", 1)
        assert len(frame) == 12 + length + 4
        assert cluster.zk_utils.get_leader_and_isr("cs0", 0).leader_and_isr.leader == controller.broker_id
        assert cluster.zk_utils.get_leader_and_isr("cs0", 1).leader_and_isr.leader == leaving
        assert controller.controller.context.shutting_down_broker_ids == {leaving}
    finally:
        cluster.shutdown()



def test_a_refused_update_metadata_leaves_the_controller_epoch(tmp_path):
    """A malformed UpdateMetadata from a 'newer' controller is refused and moves no epoch, so the
    live controller's requests are still accepted (0.10 sets the epoch only after the cache update)."""
    cluster = Cluster(tmp_path, size=1)
    try:
        broker = cluster.servers[0]
        current = broker.replica_manager.controller_epoch
        good = {"controller_id": 0, "controller_epoch": current, "ungrouped_partition_states": [], "live_brokers": []}
        with CodecConnection(broker.bound_port()) as client:
            for protocol in (77, -1):                   # ids 0-3 only; -1 is no index from the end
                bad = {"controller_id": 0, "controller_epoch": current + 5, "ungrouped_partition_states": [],
                       "live_brokers": [{"id": 0, "rack": None,
                                         "endpoints": [{"host": "h", "port": 1, "security_protocol": protocol}]}]}
                assert client.call(ApiKeys.UPDATE_METADATA, 2, bad).error_code == Errors.INVALID_REQUEST.code
                assert broker.replica_manager.controller_epoch == current
            assert client.call(ApiKeys.UPDATE_METADATA, 2, good).error_code == Errors.NONE.code
    finally:
        cluster.shutdown()
