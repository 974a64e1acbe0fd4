"""Malformed input closes only the offending connection, with one log line, and no thread dies."""
from __future__ import annotations

import json
import logging
import random
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from network_harness import Broker, Client, EchoApi
from external import wait_for

from kafka_edu.common.utils.time import MockTime

NETWORK_LOGGER = "kafka_edu.server.network"


class GoodClient:
    """A well-behaved client that keeps making requests in the background and checks every answer."""

    def __init__(self, broker: Broker):
        self.client = broker.connect()
        self.answers = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        correlation_id = 0
        try:
            while not self._stop.is_set():
                correlation_id += 1
                body = f"ping {correlation_id}".encode()
                assert self.client.request(correlation_id, body) == (correlation_id, body)
                self.answers += 1
                self._stop.wait(0.01)
        except BaseException as exc:  # noqa: B036 - reported to the test thread
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()
        assert not self.errors, self.errors
        assert self.answers > 0


def warnings_about(caplog, connection_hint: str = "closing connection") -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith(NETWORK_LOGGER) and r.levelno >= logging.WARNING and connection_hint in r.getMessage()]


def misbehave(broker: Broker, caplog, payload: bytes, shutdown_write: bool = False) -> list[str]:
    """Send `payload` on a fresh connection while a good client works; return the warnings logged."""
    good = GoodClient(broker)
    wait_for(lambda: good.answers >= 3, what="the good client to get going")
    with caplog.at_level(logging.INFO, logger=NETWORK_LOGGER):
        bad = broker.connect()
        bad.sock.sendall(payload)
        if shutdown_write:
            bad.sock.shutdown(socket.SHUT_WR)
        assert bad.closed_by_peer()
        bad.close()
        before = good.answers
        wait_for(lambda: good.answers >= before + 3, what="the good client to carry on")
    good.stop()
    assert broker.threads_alive()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    wait_for(lambda: broker.server.connection_quotas.get("127.0.0.1") == 0, what="all connections released")
    return warnings_about(caplog)


@pytest.fixture
def broker():
    with Broker(**{"socket.request.max.bytes": 1 << 20}) as b:
        yield b


def test_random_bytes(broker, caplog):
    junk = random.Random(20261122).randbytes(4096)
    size = struct.unpack(">i", junk[:4])[0]
    assert size < 0 or size > 1 << 20          # the seed gives an invalid size prefix
    assert len(misbehave(broker, caplog, junk)) == 1


@pytest.mark.parametrize("prefix", [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF], ids=["2GiB-1", "2GiB", "minus-1"])
def test_huge_or_negative_frame_length(broker, caplog, prefix):
    lines = misbehave(broker, caplog, prefix.to_bytes(4, "big") + b"abc")
    assert len(lines) == 1 and "Invalid receive" in lines[0]


def test_frame_larger_than_socket_request_max_bytes(broker, caplog):
    lines = misbehave(broker, caplog, ((1 << 20) + 1).to_bytes(4, "big"))
    assert len(lines) == 1 and "larger than 1048576" in lines[0]


def test_a_frame_at_the_limit_is_accepted(broker):
    client = broker.connect()
    body = bytes(range(256)) * 4095
    assert 8 + len(body) <= 1 << 20
    assert client.request(1, body) == (1, body)
    client.close()


def test_truncated_frame(broker, caplog):
    frame = struct.pack(">ihhi", 100, 18, 0, 1) + b"only part of it"
    lines = misbehave(broker, caplog, frame, shutdown_write=True)
    assert len(lines) == 1 and "closed after" in lines[0]


def test_frame_too_short_for_a_request_header(broker, caplog):
    lines = misbehave(broker, caplog, struct.pack(">i", 3) + b"abc")
    assert len(lines) == 1 and "shorter than a request header" in lines[0]


def test_empty_frame(broker, caplog):
    assert len(misbehave(broker, caplog, struct.pack(">i", 0))) == 1


def test_client_that_connects_and_never_sends_is_closed_when_idle(caplog):
    clock = MockTime(start_ms=0)
    with Broker(time=clock, **{"connections.max.idle.ms": 1000}) as broker:
        with caplog.at_level(logging.INFO, logger=NETWORK_LOGGER):
            silent = broker.connect()
            wait_for(lambda: broker.connection_count() == 1, what="the silent connection")
            good = Client(broker.port)
            clock.sleep(600)
            assert good.request(1, b"active") == (1, b"active")
            clock.sleep(600)                       # silent: 1200 ms idle; good: 600 ms
            assert silent.closed_by_peer()
            assert good.request(2, b"still active") == (2, b"still active")
            idle_lines = [r.getMessage() for r in caplog.records if "idle for more than 1000 ms" in r.getMessage()]
            assert len(idle_lines) == 1
        silent.close()
        good.close()
        assert broker.threads_alive()


def test_a_connection_waiting_for_its_response_is_not_idle():
    clock = MockTime(start_ms=0)
    gate = threading.Event()
    with Broker(EchoApi(gate=gate), time=clock, **{"connections.max.idle.ms": 1000,
                                                   "num.network.threads": 1}) as broker:
        client = broker.connect()
        client.send(1, b"slow")
        wait_for(lambda: any(h.current is not None for h in broker.pool.runnables), what="request taken")
        clock.sleep(5000)
        probe = broker.connect()                   # same processor: its answer proves poll rounds ran
        probe.send(2, b"probe")
        wait_for(lambda: broker.connection_count() == 2 and sum(h.current is not None for h in broker.pool.runnables) == 2,
                 what="the probe request to be taken")
        gate.set()
        assert client.receive() == (1, b"slow")
        assert probe.receive() == (2, b"probe")
        client.close()
        probe.close()


def test_a_client_that_stops_reading_its_response_is_closed_when_idle():
    """Once the answer is being written the broker waits for the client: a client that reads nothing
    for connections.max.idle.ms loses its connection, its quota slot and the 8 MiB held for it."""
    with Broker(EchoApi(), **{"connections.max.idle.ms": 1000, "num.network.threads": 1,
                              "socket.send.buffer.bytes": 16384}) as broker:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", broker.port))
        body = b"x" * (8 << 20)
        sock.sendall(struct.pack(">ihhi", 8 + len(body), 18, 0, 1) + body)
        processor = broker.server.processors[0]
        wait_for(lambda: processor.inflight_count() == 1, what="the response to be in flight")
        wait_for(lambda: broker.connection_count() == 0, timeout=5, what="the stalled reader to be closed")
        assert broker.server.connection_quotas.get("127.0.0.1") == 0
        sock.close()


def test_out_of_file_descriptors_pauses_accepting_instead_of_spinning():
    """With the process at its descriptor limit every accept fails (EMFILE) while the connection waits
    in the backlog: the acceptor pauses for a round per failure (a few log lines, no busy loop: 8,099
    lines in 1.5 s before) and takes the connection once descriptors are free again. In a process of
    its own, where no other thread can take the one descriptor left."""
    probe = subprocess.run([sys.executable, str(Path(__file__).with_name("_accept_at_descriptor_limit.py"))],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr[-2000:]
    result = json.loads(probe.stdout.splitlines()[-1])
    assert 1 <= result["failures"] <= 5 and result["answered"] and result["threads_alive"], result


def test_many_bad_clients_at_once_leave_the_broker_serving(broker):
    good = GoodClient(broker)
    rng = random.Random(7)
    bad = []
    for i in range(30):
        client = broker.connect()
        kind = i % 3
        if kind == 0:
            client.sock.sendall(rng.randbytes(64))
        elif kind == 1:
            client.sock.sendall(struct.pack(">i", 50) + b"partial")
            client.sock.shutdown(socket.SHUT_WR)
        else:
            client.sock.sendall(struct.pack(">i", -5))
        bad.append(client)
    for client in bad:
        assert client.closed_by_peer()
        client.close()
    before = good.answers
    wait_for(lambda: good.answers >= before + 3, what="the good client to carry on")
    good.stop()
    assert broker.threads_alive()
    wait_for(lambda: broker.server.connection_quotas.get("127.0.0.1") == 0, what="all connections released")
