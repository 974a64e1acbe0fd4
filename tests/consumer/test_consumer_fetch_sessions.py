"""The consumer's Fetcher through fetch sessions (KIP-227, Beyond 0.10), against our broker over sockets
and against librdkafka's mock cluster, which declines sessions."""
from __future__ import annotations

import uuid

import pytest
from _consumer_helpers import create_topic, start_broker

from kafka_edu.clients.consumer.consumer_network_client import ConsumerNetworkClient
from kafka_edu.clients.consumer.fetcher import Fetcher
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from kafka_edu.clients.fetch_session_handler import FINAL_EPOCH, FetchRequestData, PartitionRequest
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.clients.producer.serializers import ByteArraySerializer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import RequestHeader, encode_request

PARTITIONS = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("sessions"))
    yield server
    server.shutdown()


def new_topic(server) -> str:
    topic = f"s-{uuid.uuid4().hex[:8]}"
    create_topic(server, topic, PARTITIONS)
    return topic


def produce(server, topic: str, partitions, tag: str) -> None:
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{server.bound_port()}", "linger.ms": 0,
                              "key.serializer": ByteArraySerializer, "value.serializer": ByteArraySerializer})
    for p in partitions:
        producer.send(topic, f"{tag}-{p}".encode(), partition=p)
    producer.flush()
    producer.close()


def make(server, topic):
    metadata = Metadata()
    metadata.bootstrap([("127.0.0.1", server.bound_port())])
    client = ConsumerNetworkClient(NetworkClient(KSelector(), metadata), metadata)
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign_from_user([TopicPartition(topic, p) for p in range(PARTITIONS)])
    metadata.set_topics([topic])
    client.await_metadata_update(10_000)
    fetcher = Fetcher(client, subs, metadata, fetch_max_wait_ms=20, max_poll_records=1_000)
    fetcher.update_fetch_positions(subs.assigned_partitions())
    return client, subs, fetcher


def read(client, fetcher, count: int, got: dict, rounds: int = 500) -> None:
    """Poll until `count` more records arrived; each fetch round is answered before the next is sent."""
    target = sum(map(len, got.values())) + count
    for _ in range(rounds):
        if sum(map(len, got.values())) >= target:
            return
        fetcher.send_fetches()
        while client.pending_request_count():
            client.poll(100)
        for tp, records in fetcher.fetched_records().items():
            got.setdefault(tp.partition, []).extend(r.value for r in records)
    raise AssertionError(f"only {sum(map(len, got.values()))} of {target} records arrived")


def spy_errors(handler) -> list[int]:
    """The top-level error code of every Fetch response the handler sees."""
    seen, handle = [], handler.handle_response

    def recording(response):
        seen.append(response.get("error_code", 0))
        return handle(response)

    handler.handle_response = recording
    return seen


def test_a_caught_up_consumer_of_many_partitions_sends_small_incremental_requests(server):
    topic = new_topic(server)
    produce(server, topic, (0, 7, 19), "a")
    client, subs, fetcher = make(server, topic)
    got: dict[int, list[bytes]] = {}
    read(client, fetcher, 3, got)
    read(client, fetcher, 0, got)
    for _ in range(3):                                   # idle rounds: every one incremental and empty
        fetcher.send_fetches()
        while client.pending_request_count():
            client.poll(100)
    [handler] = fetcher.sessions.values()
    assert handler.session_id != 0 and handler.full_answered == 1 and handler.incremental_answered >= 3
    assert len(handler.session_partitions) == PARTITIONS
    [(node, idle)] = fetcher.create_fetch_requests().items()
    assert not idle.is_full and idle.to_send == {} and idle.forgotten == []

    version = client.client.api_versions[node.id_string].latest_usable_version(ApiKeys.FETCH)
    assert version >= 7

    def size(data: FetchRequestData) -> int:
        body = {"replica_id": -1, "max_wait_ms": 20, "min_bytes": 1, **data.wire_fields()}
        return len(encode_request(RequestHeader(ApiKeys.FETCH, version, 1, "c"), body))
    everything = {tp: PartitionRequest(subs.position(tp), fetcher.max_partition_fetch_bytes)
                  for tp in subs.assigned_partitions()}
    sessionless = FetchRequestData(0, FINAL_EPOCH, everything, [], everything)
    assert size(idle) * 5 < size(sessionless)
    assert got == {0: [b"a-0"], 7: [b"a-7"], 19: [b"a-19"]}
    client.close()


def test_a_session_the_broker_lost_is_reopened_by_a_full_request(server):
    topic = new_topic(server)
    client, subs, fetcher = make(server, topic)
    got: dict[int, list[bytes]] = {}
    produce(server, topic, range(PARTITIONS), "first")
    read(client, fetcher, PARTITIONS, got)
    [handler] = fetcher.sessions.values()
    errors, old_id = spy_errors(handler), handler.session_id
    cache = server.apis.fetch_sessions
    with cache._lock:
        cache.sessions.clear()                           # what a broker restart does to the cache
    produce(server, topic, (3, 4), "second")
    read(client, fetcher, 2, got)
    assert Errors.FETCH_SESSION_ID_NOT_FOUND.code in errors
    assert handler.session_id not in (0, old_id) and handler.full_answered == 2
    assert got == {p: [f"first-{p}".encode()] + ([f"second-{p}".encode()] if p in (3, 4) else [])
                   for p in range(PARTITIONS)}
    assert all(subs.position(TopicPartition(topic, p)) == (2 if p in (3, 4) else 1) for p in range(PARTITIONS))
    client.close()


def test_a_wrong_epoch_is_refused_and_the_next_request_is_full(server):
    topic = new_topic(server)
    client, subs, fetcher = make(server, topic)
    got: dict[int, list[bytes]] = {}
    produce(server, topic, (1,), "first")
    read(client, fetcher, 1, got)
    [handler] = fetcher.sessions.values()
    errors, full_before = spy_errors(handler), handler.full_answered
    handler.epoch += 5                                   # as if requests had been lost on the way
    produce(server, topic, (1, 2), "second")
    read(client, fetcher, 2, got)
    assert Errors.INVALID_FETCH_SESSION_EPOCH.code in errors and handler.full_answered == full_before + 1
    assert got == {1: [b"first-1", b"second-1"], 2: [b"second-2"]}
    client.close()


@pytest.mark.mock_cluster
def test_the_mock_cluster_declines_sessions_and_every_request_stays_full(mock_cluster):
    from confluent_kafka import Producer
    topic = f"s-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for i in range(40):
        producer.produce(topic, value=b"%d" % i, partition=i % 4)
    assert producer.flush(20) == 0
    with KafkaConsumer({"bootstrap.servers": mock_cluster.bootstrap, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest", "fetch.max.wait.ms": 50}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        seen: dict[int, list[bytes]] = {}
        for _ in range(200):
            for tp, records in consumer.poll(50).items():
                seen.setdefault(tp.partition, []).extend(r.value for r in records)
            if sum(map(len, seen.values())) >= 40:
                break
        handlers = consumer.fetcher.sessions.values()
        for _ in range(100):                 # empty polls until every broker has answered twice
            if handlers and all(h.full_answered >= 2 for h in handlers):
                break
            assert consumer.poll(20) == {}
        assert seen == {p: [b"%d" % i for i in range(p, 40, 4)] for p in range(4)}
        assert handlers and all(h.full_answered >= 2 for h in handlers)
        assert all(h.session_id == 0 and h.incremental_answered == 0 for h in handlers)
