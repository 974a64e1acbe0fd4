"""KafkaRequestHandlerPool: M threads over one RequestChannel."""
from __future__ import annotations

import struct
import threading

from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.api.request_handler import KafkaRequestHandlerPool
from kafka_edu.server.network.request_channel import Request, RequestChannel, ResponseAction, Session

SESSION = Session("User:ANONYMOUS", "127.0.0.1")


def make(correlation_id: int, body: bytes = b"") -> Request:
    return Request(0, f"c{correlation_id}", SESSION, struct.pack(">hhi", 0, 0, correlation_id) + body, 0)


def drain(channel: RequestChannel, n: int) -> list:
    responses = []
    while len(responses) < n:
        r = channel.receive_response(0)
        if r is not None:
            responses.append(r)
    return responses


def test_every_request_is_handled_exactly_once_by_the_pool():
    channel = RequestChannel(1, 5)
    seen, lock, threads = [], threading.Lock(), set()

    def api(request):
        with lock:
            seen.append(request.correlation_id)
            threads.add(threading.current_thread().name)
        channel.no_operation(0, request)

    pool = KafkaRequestHandlerPool(0, channel, api, 4)
    for i in range(300):
        channel.send_request(make(i))
    drain(channel, 300)
    pool.shutdown()
    assert sorted(seen) == list(range(300))
    assert threads <= {f"kafka-request-handler-{i}" for i in range(4)}
    assert sum(h.handled for h in pool.runnables) == 300
    assert not any(h.is_alive() for h in pool.runnables)


def test_a_failing_api_closes_the_connection_and_the_thread_survives():
    channel = RequestChannel(1, 5)

    def api(request):
        if request.buffer.endswith(b"boom"):
            raise ValueError("boom")
        channel.no_operation(0, request)

    pool = KafkaRequestHandlerPool(0, channel, api, 1)
    channel.send_request(make(1, b"boom"))
    channel.send_request(make(2))
    responses = drain(channel, 2)
    assert [(r.request.correlation_id, r.action) for r in responses] == [
        (1, ResponseAction.CLOSE), (2, ResponseAction.NO_OP)]
    assert pool.runnables[0].is_alive()
    pool.shutdown()


def test_shutdown_lets_queued_requests_finish():
    channel = RequestChannel(1, 20)
    gate, done = threading.Event(), []

    def api(request):
        gate.wait(10)
        done.append(request.correlation_id)

    pool = KafkaRequestHandlerPool(0, channel, api, 2)
    for i in range(6):
        channel.send_request(make(i))
    stopper = threading.Thread(target=pool.shutdown)
    stopper.start()
    gate.set()
    stopper.join(10)
    assert sorted(done) == list(range(6))


def test_handler_stamps_dequeue_and_local_completion():
    clock = MockTime(start_ms=1000)
    channel = RequestChannel(1, 5, time=clock)

    def api(request):
        clock.sleep(7)
        channel.no_operation(0, request)

    pool = KafkaRequestHandlerPool(0, channel, api, 1, time=clock)
    r = make(1)
    channel.send_request(r)
    drain(channel, 1)
    pool.shutdown()
    assert r.request_dequeue_time_ms == 1000
    assert r.api_local_complete_time_ms == 1007
