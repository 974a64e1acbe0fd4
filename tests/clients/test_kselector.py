"""KSelector (2.4.2) against plain loopback servers written here: connect, one send per channel,
frames bigger than the socket buffers (and, Beyond 0.10, read in one poll with frame_wait_ms), staged
receives released one per poll, mute, peer close, invalid frames, idle close on a mock clock, wakeup."""
from __future__ import annotations

import os
import socket
import threading

import pytest

from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.utils.time import MockTime


class FrameServer:
    """Accepts connections; `reply(conn, payload)` answers each frame (default: echo it)."""

    def __init__(self, reply=None):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.reply = reply or (lambda conn, payload: conn.sendall(len(payload).to_bytes(4, "big") + payload))
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return self.listener.getsockname()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            while len(size := conn.recv(4, socket.MSG_WAITALL)) == 4:
                self.reply(conn, conn.recv(int.from_bytes(size, "big"), socket.MSG_WAITALL))
        except OSError:
            return

    def close(self):
        self.listener.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def server():
    s = FrameServer()
    yield s
    s.close()


@pytest.fixture
def selector():
    s = KSelector()
    yield s
    s.close()


def poll_until(selector, condition, polls=200):
    """Poll (100 ms each) until condition(selector) is true; collect what every poll reported."""
    seen = {"connected": [], "disconnected": [], "sends": [], "receives": []}
    for _ in range(polls):
        selector.poll(100)
        seen["connected"] += selector.connected
        seen["disconnected"] += selector.disconnected
        seen["sends"] += [s.destination for s in selector.completed_sends]
        seen["receives"] += [(r.source, r.payload) for r in selector.completed_receives]
        if condition(seen):
            return seen
    raise AssertionError(f"condition never held; saw {seen}")


def connect(selector, address, *ids):
    for id in ids:
        selector.connect(id, address)
    poll_until(selector, lambda seen: sorted(seen["connected"]) == sorted(ids))


def test_connect_send_receive(selector, server):
    connect(selector, server.address, "1", "2")
    assert selector.is_channel_ready("1") and selector.is_channel_ready("2")
    selector.send(NetworkSend("1", b"ping"))
    seen = poll_until(selector, lambda seen: seen["receives"])
    assert seen["sends"] == ["1"]
    assert seen["receives"] == [("1", b"ping")]


def test_one_send_at_a_time_per_channel(selector, server):
    connect(selector, server.address, "1")
    selector.send(NetworkSend("1", b"first"))
    with pytest.raises(RuntimeError, match="already in progress"):
        selector.send(NetworkSend("1", b"second"))
    poll_until(selector, lambda seen: seen["sends"])
    selector.send(NetworkSend("1", b"second"))          # allowed once the first completed
    seen = poll_until(selector, lambda seen: len(seen["receives"]) == 1 and seen["sends"])
    assert seen["receives"][0][1] in (b"first", b"second")


def test_large_frame_needs_several_polls(server):
    selector = KSelector()
    try:
        selector.connect("1", server.address, send_buffer_size=8192, receive_buffer_size=8192)
        poll_until(selector, lambda seen: seen["connected"])
        payload = os.urandom(4 << 20)
        selector.send(NetworkSend("1", payload))
        polls = {"n": 0}

        def done(seen):
            polls["n"] += 1
            return seen["receives"]
        seen = poll_until(selector, done, polls=20_000)   # about one socket buffer per poll
        assert seen["sends"] == ["1"]
        assert seen["receives"] == [("1", payload)]
        assert polls["n"] > 1
    finally:
        selector.close()


def polls_to_receive_a_large_reply(server, frame_wait_ms: int) -> int:
    """Polls from the end of a 4 MiB send to its echo, over 8 KiB socket buffers."""
    selector = KSelector(frame_wait_ms=frame_wait_ms)
    try:
        selector.connect("1", server.address, send_buffer_size=8192, receive_buffer_size=8192)
        poll_until(selector, lambda seen: seen["connected"])
        payload = os.urandom(4 << 20)
        selector.send(NetworkSend("1", payload))
        sent = poll_until(selector, lambda seen: seen["sends"], polls=20_000)
        polls = {"n": 0}

        def done(seen):
            polls["n"] += 1
            return seen["receives"]
        received = sent["receives"] or poll_until(selector, done, polls=20_000)["receives"]
        assert received == [("1", payload)]
        return polls["n"]
    finally:
        selector.close()


def test_frame_wait_reads_the_rest_of_a_begun_frame_in_one_poll(server):
    """Beyond 0.10 (4.5.4): a selector whose owner only waits for this reply lets the kernel gather it."""
    assert polls_to_receive_a_large_reply(server, frame_wait_ms=0) > 10
    assert polls_to_receive_a_large_reply(server, frame_wait_ms=5_000) <= 3


def test_frames_read_together_are_released_one_per_poll(selector):
    burst = FrameServer(reply=lambda conn, payload: conn.sendall(
        b"".join(len(p).to_bytes(4, "big") + p for p in (b"a", b"bb", b"ccc"))))
    try:
        connect(selector, burst.address, "1")
        selector.send(NetworkSend("1", b"go"))
        per_poll = []
        for _ in range(200):
            selector.poll(100)
            per_poll.append([r.payload for r in selector.completed_receives])
            if sum(map(len, per_poll)) == 3:
                break
        assert [p for batch in per_poll for p in batch] == [b"a", b"bb", b"ccc"]
        assert all(len(batch) <= 1 for batch in per_poll)
    finally:
        burst.close()


def test_mute_holds_frames_until_unmute(selector, server):
    connect(selector, server.address, "1")
    selector.mute("1")
    selector.send(NetworkSend("1", b"held"))
    poll_until(selector, lambda seen: seen["sends"])
    for _ in range(5):
        selector.poll(20)
        assert selector.completed_receives == []
    selector.unmute("1")
    assert poll_until(selector, lambda seen: seen["receives"])["receives"] == [("1", b"held")]


def test_peer_close_is_a_disconnect(selector, server):
    connect(selector, server.address, "1")
    for _ in range(100):
        if server.connections:
            break
        threading.Event().wait(0.05)
    server.connections[0].shutdown(socket.SHUT_RDWR)
    seen = poll_until(selector, lambda seen: seen["disconnected"])
    assert seen["disconnected"] == ["1"]
    assert "1" not in selector.channels
    with pytest.raises(ValueError, match="no open connection"):
        selector.send(NetworkSend("1", b"too late"))


def test_frames_before_a_close_are_still_delivered(selector):
    closer = FrameServer(reply=lambda conn, payload: (
        conn.sendall(b"".join(len(p).to_bytes(4, "big") + p for p in (b"one", b"two"))), conn.close()))
    try:
        connect(selector, closer.address, "1")
        selector.send(NetworkSend("1", b"go"))
        seen = poll_until(selector, lambda seen: seen["disconnected"] and len(seen["receives"]) == 2)
        assert seen["receives"] == [("1", b"one"), ("1", b"two")]
    finally:
        closer.close()


def test_refused_connect_is_reported():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        address = probe.getsockname()
    selector = KSelector()
    try:
        try:
            selector.connect("1", address)
        except ConnectionError:
            return                      # refused synchronously: the caller learns it at once
        seen = poll_until(selector, lambda seen: seen["disconnected"])
        assert seen["disconnected"] == ["1"] and seen["connected"] == []
    finally:
        selector.close()


def test_a_host_name_idna_cannot_encode_does_not_resolve():
    """A broker's metadata may carry any string as a host: one IDNA cannot encode fails like a name that
    does not resolve (an OSError the NetworkClient handles), not with a UnicodeError."""
    selector = KSelector()
    try:
        with pytest.raises(socket.gaierror, match="is not a host name"):
            selector.connect("1", ("bad\x8bhost", 9092))
        assert selector.channels == {}
    finally:
        selector.close()


def test_oversized_frame_closes_the_connection(server):
    selector = KSelector(max_receive_size=16)
    try:
        connect(selector, server.address, "1")
        selector.send(NetworkSend("1", bytes(100)))
        seen = poll_until(selector, lambda seen: seen["disconnected"])
        assert seen["disconnected"] == ["1"] and seen["receives"] == []
    finally:
        selector.close()


def test_idle_connections_close_oldest_first(server):
    clock = MockTime()
    selector = KSelector(connections_max_idle_ms=1000, time=clock)
    try:
        connect(selector, server.address, "a", "b", "c")
        clock.sleep(500)
        selector.send(NetworkSend("b", b"x"))
        poll_until(selector, lambda seen: seen["receives"])
        clock.sleep(600)                 # a and c idle 1100 ms, b idle 600 ms
        selector.poll(0)
        first = list(selector.disconnected)
        selector.poll(0)
        second = list(selector.disconnected)
        selector.poll(0)
        assert sorted(first + second) == ["a", "c"] and len(first) == 1 and selector.disconnected == []
        assert sorted(selector.channels) == ["b"]
    finally:
        selector.close()


def test_wakeup_ends_a_long_poll(selector):
    finished = threading.Event()

    def long_poll():
        selector.poll(60_000)
        finished.set()
    thread = threading.Thread(target=long_poll, daemon=True)
    thread.start()
    threading.Timer(0.1, selector.wakeup).start()
    assert finished.wait(30)


def test_bad_calls(selector, server):
    connect(selector, server.address, "1")
    with pytest.raises(ValueError, match="already a connection"):
        selector.connect("1", server.address)
    with pytest.raises(ValueError, match="no open connection"):
        selector.send(NetworkSend("2", b"x"))
    with pytest.raises(ValueError, match="timeout"):
        selector.poll(-1)
    with pytest.raises(OSError):
        selector.connect("3", ("no-such-host.invalid", 9092))
    assert "3" not in selector.channels
