"""ConsumerNetworkClient and RequestFuture: futures, unsent queue, expiry, delayed tasks, wakeup."""
from __future__ import annotations

import pytest
from _consumer_helpers import start_broker

from kafka_edu.clients.client_request import IllegalStateError
from kafka_edu.clients.consumer.consumer_network_client import (
    ConsumerNetworkClient,
    DelayedTaskQueue,
    DisconnectException,
    RequestFuture,
    RequestTimeoutException,
    WakeupException,
)
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.common.cluster import Node
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.utils.time import MockTime


def test_future_completes_once_and_runs_listeners():
    future, seen = RequestFuture(), []
    future.add_listener(seen.append, lambda e: seen.append(("failed", e)))
    future.complete(5)
    assert seen == [5] and future.value == 5 and not future.failed()
    with pytest.raises(IllegalStateError):
        future.raise_error(Errors.NOT_COORDINATOR)
    late = []
    future.add_listener(late.append, late.append)
    assert late == [5]


def test_compose_and_chain_propagate_failure():
    source, target = RequestFuture(), RequestFuture()
    composed = source.compose(lambda v, f: f.complete(v * 2))
    composed.chain(target)
    source.raise_error(Errors.NOT_COORDINATOR)
    assert target.failed() and target.is_retriable() and target.exception.error is Errors.NOT_COORDINATOR
    with pytest.raises(IllegalStateError):
        _ = target.value


def test_delayed_tasks_order_and_remove():
    queue, ran = DelayedTaskQueue(), []
    a, b = (lambda now: ran.append(("a", now))), (lambda now: ran.append(("b", now)))
    queue.add(b, 20)
    queue.add(a, 10)
    queue.add(a, 30)
    assert queue.next_timeout(0) == 10
    assert queue.poll(25) == 2 and ran == [("a", 25), ("b", 25)]
    queue.remove(a)
    assert len(queue) == 0 and queue.poll(100) == 0


@pytest.fixture
def offline_client():
    time = MockTime()
    metadata = Metadata(time=time)
    network = NetworkClient(KSelector(time=time), metadata, time=time, reconnect_backoff_ms=10_000)
    client = ConsumerNetworkClient(network, metadata, time=time, request_timeout_ms=1_000)
    yield client, time
    client.close()


def test_unsent_request_to_refused_node_fails_with_disconnect(offline_client):
    client, time = offline_client
    future = client.send(Node(3, "127.0.0.1", 1), ApiKeys.API_VERSIONS, {})
    assert client.pending_request_count("3") == 1
    for _ in range(50):
        client.poll(10)
        if future.is_done():
            break
    assert isinstance(future.exception, DisconnectException) and future.is_retriable()
    assert client.pending_request_count() == 0


def test_unsent_request_expires_after_request_timeout(offline_client):
    client, time = offline_client
    node = Node(4, "127.0.0.1", 1)
    client.client.connection_states.connecting("4", time.milliseconds())   # stuck connecting: never ready
    future = client.send(node, ApiKeys.API_VERSIONS, {})
    time.sleep(1_001)
    client.poll(0)
    assert isinstance(future.exception, RequestTimeoutException) and future.is_retriable()


def test_fail_unsent_requests(offline_client):
    client, _ = offline_client
    future = client.send(Node(5, "127.0.0.1", 1), ApiKeys.API_VERSIONS, {})
    client.fail_unsent_requests("5", Errors.COORDINATOR_NOT_AVAILABLE.exception())
    assert future.exception.error is Errors.COORDINATOR_NOT_AVAILABLE


def test_wakeup_raises_once_and_respects_disable(offline_client):
    client, _ = offline_client
    client.wakeup()
    client.disable_wakeups()
    client.poll(0)
    client.enable_wakeups()
    with pytest.raises(WakeupException):
        client.poll(0)
    client.poll(0)                                   # consumed
    with pytest.raises(IllegalStateError):
        client.enable_wakeups()


def test_delayed_tasks_run_inside_poll(offline_client):
    client, time = offline_client
    ran = []
    client.schedule(ran.append, 50)
    client.poll(0)
    assert ran == []
    time.sleep(50)
    client.poll(0)
    assert ran == [50]


def test_poll_future_against_broker(tmp_path):
    server = start_broker(tmp_path)
    try:
        metadata = Metadata()
        metadata.bootstrap([("127.0.0.1", server.bound_port())])
        client = ConsumerNetworkClient(NetworkClient(KSelector(), metadata), metadata)
        future = client.send(client.least_loaded_node(), ApiKeys.API_VERSIONS, {})
        assert client.poll_future(future, 10_000)
        assert future.value["error_code"] == 0
        client.close()
    finally:
        server.shutdown()
