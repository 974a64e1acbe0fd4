"""RequestChannel: bounded blocking request queue, per-processor response queues, listeners."""
from __future__ import annotations

import struct
import threading

import pytest

from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.network.request_channel import (
    ALL_DONE, InvalidRequestError, Request, RequestChannel, Response, ResponseAction, Session)

SESSION = Session("User:ANONYMOUS", "127.0.0.1")


def request(processor: int = 0, correlation_id: int = 1, api_key: int = 3, version: int = 5) -> Request:
    return Request(processor, f"conn-{correlation_id}", SESSION,
                   struct.pack(">hhi", api_key, version, correlation_id) + b"rest", 100)


def test_header_prefix_is_read_and_short_frames_rejected():
    r = request(correlation_id=-7, api_key=18, version=3)
    assert (r.api_key, r.api_version, r.correlation_id) == (18, 3, -7)
    with pytest.raises(InvalidRequestError):
        Request(0, "c", SESSION, b"\x00" * 7, 0)


def test_full_queue_blocks_until_a_request_is_taken():
    channel = RequestChannel(1, 2)
    assert channel.send_request(request(correlation_id=1))
    assert channel.send_request(request(correlation_id=2))
    assert not channel.send_request(request(correlation_id=3), timeout_ms=20)
    blocked_done = threading.Event()

    def blocked():
        channel.send_request(request(correlation_id=4))
        blocked_done.set()

    thread = threading.Thread(target=blocked)
    thread.start()
    assert not blocked_done.wait(0.05)
    assert channel.receive_request(0).correlation_id == 1
    assert blocked_done.wait(5)
    thread.join()
    assert [channel.receive_request(0).correlation_id for _ in range(2)] == [2, 4]
    assert channel.receive_request(0) is None
    assert channel.receive_request(10) is None


def test_many_producers_and_consumers_lose_and_duplicate_nothing():
    channel = RequestChannel(4, 3)
    taken, lock = [], threading.Lock()

    def produce(p):
        for i in range(200):
            channel.send_request(request(processor=p, correlation_id=p * 1000 + i))

    def consume():
        while (r := channel.receive_request(2000)) is not None and r is not ALL_DONE:
            with lock:
                taken.append(r.correlation_id)

    consumers = [threading.Thread(target=consume) for _ in range(3)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join()
    for _ in consumers:
        channel.send_request(ALL_DONE)
    for t in consumers:
        t.join()
    assert sorted(taken) == sorted(p * 1000 + i for p in range(4) for i in range(200))


def test_responses_go_to_their_processor_and_wake_it():
    clock = MockTime(start_ms=50)
    channel = RequestChannel(3, 10, time=clock)
    woken = []
    channel.add_response_listener(woken.append)
    r = request(processor=2)
    channel.send_response(Response(r, NetworkSend(r.connection_id, b"x")))
    channel.no_operation(1, request(processor=1))
    channel.close_connection(2, request(processor=2, correlation_id=9))
    assert woken == [2, 1, 2]
    assert [channel.response_queue_size(p) for p in range(3)] == [0, 1, 2]
    assert channel.receive_response(0) is None
    clock.sleep(5)
    first = channel.receive_response(2)
    assert first.action is ResponseAction.SEND and first.request is r
    assert r.response_complete_time_ms == 50 and r.response_dequeue_time_ms == 55
    assert channel.receive_response(2).action is ResponseAction.CLOSE
    assert channel.receive_response(1).action is ResponseAction.NO_OP


def test_bad_responses_are_refused():
    channel = RequestChannel(1, 1)
    with pytest.raises(ValueError):
        channel.send_response(Response(request(processor=3), action=ResponseAction.NO_OP))
    with pytest.raises(ValueError):
        Response(request(), action=ResponseAction.SEND)
    with pytest.raises(ValueError):
        RequestChannel(0, 1)


def test_timeline():
    r = request()
    r.request_dequeue_time_ms, r.api_local_complete_time_ms = 110, 130
    assert r.timeline() == {"request queue": 10, "local": 20, "remote": -1, "response queue": -1, "send": -1}
