"""acks=0/1/-1 on a live broker: seed-ch4a acceptance tests 6 and 25 (the follower played through the
ReplicaManager's fetch path), min.insync.replicas, and the delayed produce's timeout."""
from __future__ import annotations

import threading
import time

import pytest
from _broker_client import BrokerClient, records, values_of
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.replica.replica_manager import FetchPartitionInfo


def test_acks_0_sends_nothing_and_the_next_request_is_answered(broker, client):
    """Acceptance test 6, first half: no response bytes, then Metadata on the same connection works."""
    client.create_topic("fire")
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "fire", "partition_data": [{"index": 0, "records": records(b"and forget")}]}]}
    client.send(ApiKeys.PRODUCE, 7, body, correlation_id=1000)
    metadata_id = client.send(ApiKeys.METADATA, 1, {"topics": [{"name": "fire"}]})
    correlation_id, response = client.receive(ApiKeys.METADATA, 1)
    assert correlation_id == metadata_id                    # the first bytes back belong to the Metadata
    assert response.topics[0].name == "fire"
    assert values_of(client.fetch("fire", 0, 0).records) == [b"and forget"]


def test_acks_0_with_an_error_closes_the_connection(broker, client):
    """Acceptance test 6, second half: an acks=0 produce to an unknown partition closes the connection."""
    client.send(ApiKeys.PRODUCE, 7, {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "nowhere-at-all", "partition_data": [{"index": 3, "records": records(b"lost")}]}]})
    assert client.closed_by_peer(timeout=10)
    with BrokerClient(broker.bound_port()) as other:
        assert other.call(ApiKeys.API_VERSIONS, 0, {}).error_code == 0


@pytest.mark.parametrize("acks", [1, -1])
def test_acks_1_and_all_on_a_single_replica(client, acks):
    client.create_topic(f"acks{acks}")
    response = client.produce(f"acks{acks}", 0, records(b"a", b"b"), acks=acks)
    assert (response.error_code, response.base_offset) == (0, 0)


@pytest.fixture
def two_replicas(broker, client, request):
    """A topic whose partition 0 has replicas [0, 1] and ISR {0, 1}; broker 1 is registered in
    ZooKeeper (so it counts as alive) but nothing runs it: the test plays its fetcher."""
    if broker.zk_utils.get_broker_info(1) is None:
        broker.zk_utils.register_broker(1, "127.0.0.1", 1, ["PLAINTEXT://127.0.0.1:1"])
        broker.zk_client.await_events()
    topic = f"isr2-{request.node.name.split('[')[0][-20:]}"
    result = client.create_topics([{"name": topic, "num_partitions": -1, "replication_factor": -1,
                                    "assignments": [{"partition_index": 0, "broker_ids": [0, 1]}]}])[topic]
    assert result.error_code == 0
    partition = wait_for(lambda: broker.replica_manager.get_partition((topic, 0)), what="the partition")
    assert sorted(partition.in_sync_replicas) == [0, 1]
    return topic


def _follower_fetch(broker, topic, offset):
    broker.replica_manager.fetch_messages(0, 1, 1, 1 << 20, False, [((topic, 0), FetchPartitionInfo(offset, 1 << 20))],
                                          lambda results: None)


def test_acks_all_waits_for_the_follower_then_answers_none(broker, client, two_replicas):
    """Acceptance test 25, DelayedProduce: nothing until the follower fetches past the produced offset."""
    topic = two_replicas
    answer = {}

    def produce():
        with BrokerClient(broker.bound_port()) as c:
            answer["response"] = c.produce(topic, 0, records(b"x", b"y", b"z"), acks=-1, timeout_ms=30_000)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    wait_for(lambda: broker.replica_manager.delayed_produce_purgatory.watch_counts().get((topic, 0)),
             what="a produce waiting on the partition")
    _follower_fetch(broker, topic, 0)                       # the follower has nothing yet: HW stays 0
    time.sleep(0.2)
    assert "response" not in answer
    assert broker.replica_manager.get_partition((topic, 0)).high_watermark == 0
    _follower_fetch(broker, topic, 3)                       # it now holds offsets 0-2: HW = 3
    thread.join(20)
    assert (answer["response"].error_code, answer["response"].base_offset) == (0, 0)
    assert values_of(client.fetch(topic, 0, 0).records) == [b"x", b"y", b"z"]


def test_acks_all_times_out_when_the_follower_is_stopped(broker, client, two_replicas):
    """Acceptance test 25, timeout: REQUEST_TIMED_OUT after (at least) the request's timeout."""
    started = time.monotonic()
    response = client.produce(two_replicas, 0, records(b"late"), acks=-1, timeout_ms=200)
    assert response.error_code == Errors.REQUEST_TIMED_OUT.code
    assert time.monotonic() - started >= 0.2
    # on_expiration runs right after on_complete sent the response
    wait_for(lambda: broker.replica_manager.delayed_produce_expirations[(two_replicas, 0)] >= 1, what="expiry")
    assert client.fetch(two_replicas, 0, 0).records == b""   # written, but not committed: consumers see nothing


def test_consumer_reads_only_below_the_high_watermark(broker, client, two_replicas):
    for value in (b"1", b"2"):          # two batches: the HW moves by whole batches, as followers copy them
        assert client.produce(two_replicas, 0, records(value), acks=1).error_code == 0
    assert client.fetch(two_replicas, 0, 0).high_watermark == 0
    _follower_fetch(broker, two_replicas, 1)
    data = client.fetch(two_replicas, 0, 0)
    assert data.high_watermark == 1 and values_of(data.records) == [b"1"]
    assert client.list_offset(two_replicas, 0, -1).offset == 1      # latest, for a consumer, is the HW


def test_min_insync_replicas_refuses_acks_all_before_writing(client):
    created = client.create_topics([{"name": "strict", "num_partitions": -1, "replication_factor": -1,
                                     "assignments": [{"partition_index": 0, "broker_ids": [0]}],
                                     "configs": [{"name": "min.insync.replicas", "value": "2"}]}])
    assert created["strict"].error_code == 0
    response = client.produce("strict", 0, records(b"no"), acks=-1)
    assert response.error_code == Errors.NOT_ENOUGH_REPLICAS.code
    assert client.produce("strict", 0, records(b"yes"), acks=1).error_code == 0
    assert values_of(client.fetch("strict", 0, 0).records) == [b"yes"]
