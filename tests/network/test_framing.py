"""NetworkReceive, NetworkSend and KafkaChannel over real socket pairs."""
from __future__ import annotations

import os
import selectors
import socket
import threading
import time

import pytest

from kafka_edu.common.network.kafka_channel import CREDIT_PER_FINISHED_WAIT, WAIT_CREDITS, KafkaChannel
from kafka_edu.common.network.network_receive import (
    InvalidReceiveError, NetworkReceive, TruncatedFrameError, arm_waits, disarm_waits)
from kafka_edu.common.network.network_send import NetworkSend


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    right.setblocking(False)
    yield left, right
    left.close()
    right.close()


def read_all(receive: NetworkReceive, sock: socket.socket) -> bytes:
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    while not receive.complete():
        selector.select(5)
        receive.read_from(sock)
    selector.close()
    return receive.payload


def test_frame_arriving_byte_by_byte(pair):
    left, right = pair
    frame = (11).to_bytes(4, "big") + b"hello world"
    receive = NetworkReceive("x")
    for i, byte in enumerate(frame):
        assert not receive.complete()
        left.sendall(bytes([byte]))
        assert receive.read_from(right) == 1, i
    assert receive.complete() and receive.payload == b"hello world"


def test_receive_never_reads_past_its_frame(pair):
    left, right = pair
    left.sendall((3).to_bytes(4, "big") + b"abc" + (2).to_bytes(4, "big") + b"de")
    assert read_all(NetworkReceive("x"), right) == b"abc"
    assert read_all(NetworkReceive("x"), right) == b"de"


def test_empty_frame_completes(pair):
    left, right = pair
    left.sendall(bytes(4))
    assert read_all(NetworkReceive("x"), right) == b""


@pytest.mark.parametrize("size", [-1, -(1 << 31), 101, (1 << 31) - 1])
def test_invalid_sizes_are_rejected_before_allocation(pair, size):
    left, right = pair
    left.sendall(size.to_bytes(4, "big", signed=True))
    with pytest.raises(InvalidReceiveError, match=f"size = {size}"):
        NetworkReceive("x", max_size=100).read_from(right)


def test_eof_between_frames_and_inside_one(pair):
    left, right = pair
    left.sendall((10).to_bytes(4, "big") + b"abc")
    receive = NetworkReceive("x")
    receive.read_from(right)
    left.close()
    with pytest.raises(TruncatedFrameError, match="after 7 of 14 bytes"):
        receive.read_from(right)
    with pytest.raises(EOFError) as info:
        NetworkReceive("y").read_from(right)
    assert not isinstance(info.value, TruncatedFrameError)


def test_payload_of_an_incomplete_frame_is_an_error():
    with pytest.raises(ValueError):
        _ = NetworkReceive("x").payload


def test_large_send_survives_partial_writes(pair):
    left, right = pair
    left.setblocking(False)
    buffers = [bytes([i]) * 300_000 for i in range(5)]
    send = NetworkSend("peer", buffers)
    assert send.size == 4 + 1_500_000
    received = {}

    def reader():
        sock = right
        sock.setblocking(True)
        size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
        received["payload"] = sock.recv(size, socket.MSG_WAITALL)

    first = send.write_to(left)                  # nobody reads yet: the socket buffer fills, the write is short
    assert 0 < first < send.size and not send.completed()
    thread = threading.Thread(target=reader)
    thread.start()
    selector = selectors.DefaultSelector()
    selector.register(left, selectors.EVENT_WRITE)
    writes = 1
    while not send.completed():
        selector.select(5)
        send.write_to(left)
        writes += 1
    thread.join(10)
    selector.close()
    assert received["payload"] == b"".join(buffers)
    assert writes > 1


def test_kafka_channel_interest_follows_mute_and_send(pair):
    left, right = pair
    channel = KafkaChannel("c", right, 100, "127.0.0.1")
    assert channel.interest() == selectors.EVENT_READ
    channel.mute()
    assert channel.interest() == 0
    channel.set_send(NetworkSend("c", b"x"))
    assert channel.interest() == selectors.EVENT_WRITE
    with pytest.raises(RuntimeError):
        channel.set_send(NetworkSend("c", b"y"))
    assert channel.write() is not None and not channel.has_send()
    channel.unmute()
    assert channel.interest() == selectors.EVENT_READ
    assert left.recv(10) == b"\x00\x00\x00\x01x"


# --- Beyond 0.10: NetworkReceive.wait_for_rest (4.1), used by the follower's fetcher (4.5.4) ---

def write_later(sock: socket.socket, pieces: list[bytes], pause_s: float = 0.02) -> threading.Thread:
    def write():
        for piece in pieces:
            time.sleep(pause_s)
            sock.sendall(piece)
    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_wait_for_rest_gathers_a_frame_arriving_in_pieces(pair):
    left, right = pair
    payload = os.urandom(300_000)
    frame = len(payload).to_bytes(4, "big") + payload
    left.sendall(frame[:1000])
    receive = NetworkReceive("x")
    assert receive.read_from(right) == 1000
    writer = write_later(left, [frame[1000:100_000], frame[100_000:]])
    assert receive.wait_for_rest(right, 5.0) == len(frame) - 1000
    writer.join()
    assert receive.complete() and receive.payload == payload
    assert right.getblocking() is True                         # left armed for the next wait


def test_a_read_that_must_not_wait_does_not_block_on_an_armed_socket(pair):
    left, right = pair
    arm_waits(right, 5.0)
    receive = NetworkReceive("x")
    started = time.monotonic()
    assert receive.read_from(right) == 0                        # nothing there: no wait for the 5 s bound
    left.sendall((3).to_bytes(4, "big") + b"abc")
    assert receive.read_from(right) == 7 and receive.payload == b"abc"
    assert time.monotonic() - started < 1.0
    disarm_waits(right)
    assert right.getblocking() is False


def test_wait_for_rest_is_bounded_by_its_timeout_and_keeps_what_came(pair):
    left, right = pair
    left.sendall((100).to_bytes(4, "big") + b"a" * 10)
    receive = NetworkReceive("x")
    receive.read_from(right)
    writer = write_later(left, [b"b" * 20], pause_s=0.01)       # 20 more bytes, then silence
    started = time.monotonic()
    assert receive.wait_for_rest(right, 0.2) == 20
    assert 0.15 <= time.monotonic() - started < 2.0
    writer.join()
    assert not receive.complete() and right.getblocking() is True
    left.sendall(b"c" * 70)
    assert read_all(receive, right) == b"a" * 10 + b"b" * 20 + b"c" * 70


def test_wait_for_rest_before_the_size_arrived_does_not_block(pair):
    left, right = pair
    receive = NetworkReceive("x")
    left.sendall(b"\x00\x00")                                   # half a size prefix
    receive.read_from(right)
    started = time.monotonic()
    assert receive.wait_for_rest(right, 5.0) == 0
    assert time.monotonic() - started < 1.0


def test_peer_closing_during_wait_for_rest_is_a_truncated_frame(pair):
    left, right = pair
    left.sendall((100).to_bytes(4, "big") + b"a" * 10)
    receive = NetworkReceive("x")
    receive.read_from(right)
    closer = threading.Timer(0.05, left.close)
    closer.start()
    with pytest.raises(TruncatedFrameError, match="after 14 of 104 bytes"):
        receive.wait_for_rest(right, 5.0)
    closer.join()


def test_kafka_channel_waits_only_when_asked(pair):
    left, right = pair
    left.sendall((50).to_bytes(4, "big") + b"x" * 10)
    writer = write_later(left, [b"y" * 40], pause_s=0.05)
    channel = KafkaChannel("c", right)
    assert channel.read() is None                              # no wait: the rest is not there yet
    frame = channel.read(wait_s=5.0)
    writer.join()
    assert frame is not None and frame.payload == b"x" * 10 + b"y" * 40


# --- Beyond 0.10: KafkaChannel.finish_send / finish_receive and the channel's wait credits (4.1) ---

def test_kafka_channel_writes_a_frame_through_a_small_send_buffer_in_one_call(pair):
    left, right = pair
    right.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    channel = KafkaChannel("c", right)
    payload = os.urandom(1_000_000)
    channel.set_send(NetworkSend("c", payload))
    got = []
    reader = threading.Thread(target=lambda: got.append(left.recv(len(payload) + 4, socket.MSG_WAITALL)))
    reader.start()
    assert channel.write(wait_s=5.0) is not None and not channel.has_send()
    reader.join()
    assert got == [len(payload).to_bytes(4, "big") + payload]
    assert channel.wait_credits == WAIT_CREDITS and right.getblocking() is True


def test_kafka_channel_stops_waiting_for_a_peer_whose_waits_time_out(pair):
    left, right = pair
    channel = KafkaChannel("c", right)
    left.sendall((100).to_bytes(4, "big") + b"a")
    waited = []
    for _ in range(5):                                    # the peer trickles a byte per turn
        started = time.monotonic()
        assert channel.read(wait_s=0.1) is None
        waited.append(time.monotonic() - started >= 0.09)
        left.sendall(b"b")
    assert waited == [True, True, True, False, False] and channel.wait_credits == 0
    assert right.getblocking() is False                        # out of waits: non-blocking again
    left.sendall(b"c" * 94)
    frame = channel.read(wait_s=0.1)
    assert frame is not None and frame.payload == b"a" + b"b" * 5 + b"c" * 94


def test_a_channel_out_of_waits_writes_without_blocking(pair):
    left, right = pair
    right.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    channel = KafkaChannel("c", right)
    channel.set_send(NetworkSend("c", bytes(1_000_000)))
    for _ in range(3):                                    # nobody reads: each bounded wait times out
        started = time.monotonic()
        assert channel.write(wait_s=0.05) is None
        assert time.monotonic() - started >= 0.04
    assert channel.wait_credits == 0 and right.getblocking() is False
    started = time.monotonic()
    assert channel.write(wait_s=5.0) is None                   # no credit left: no wait at all
    assert time.monotonic() - started < 1.0


def test_finished_waits_earn_credit_back_an_eighth_at_a_time(pair):
    left, right = pair
    channel = KafkaChannel("c", right)
    left.sendall((30).to_bytes(4, "big") + b"a" * 10)
    for _ in range(2):
        assert channel.read(wait_s=0.05) is None
    assert channel.wait_credits == WAIT_CREDITS - 2
    writer = write_later(left, [b"b" * 20], pause_s=0.02)
    frame = channel.read(wait_s=5.0)
    writer.join()
    assert frame is not None and frame.payload == b"a" * 10 + b"b" * 20
    assert channel.wait_credits == WAIT_CREDITS - 2 + CREDIT_PER_FINISHED_WAIT


def test_a_peer_late_every_other_frame_runs_out_of_waits(pair):
    """Like a consumer that reads only while its application polls: prompt sometimes, late often."""
    left, right = pair
    channel = KafkaChannel("c", right)
    waited = []
    for late in (True, False, True, False, True, True):
        left.sendall((30).to_bytes(4, "big") + b"a" * 10)
        writer = None if late else write_later(left, [b"b" * 20], pause_s=0.02)
        started = time.monotonic()
        frame = channel.read(wait_s=0.1 if late else 5.0)
        waited.append(time.monotonic() - started >= 0.09 if late else frame is not None)
        if late:
            assert frame is None
            left.sendall(b"b" * 20)
            frame = channel.read()
        else:
            writer.join()
        assert frame is not None and frame.payload == b"a" * 10 + b"b" * 20
    assert waited == [True, True, True, True, True, False]
    assert channel.wait_credits == WAIT_CREDITS - 3 + 2 * CREDIT_PER_FINISHED_WAIT
