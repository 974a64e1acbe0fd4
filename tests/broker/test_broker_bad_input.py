"""Bad input on a live broker while a well-behaved client keeps producing and fetching: each bad
connection is closed (or answered with an error), the good one never notices."""
from __future__ import annotations

import logging
import random
import socket
import struct
import threading

import pytest
from _broker_client import BrokerClient, records, start_broker, values_of

from kafka_edu.common.protocol.api_keys import ApiKeys


@pytest.fixture(scope="module")
def busy_broker(tmp_path_factory):
    """A broker with a short idle timeout and a client producing and fetching in a loop meanwhile."""
    server = start_broker(tmp_path_factory.mktemp("bad-input"), **{"connections.max.idle.ms": 1000,
                                                                   "socket.request.max.bytes": 1 << 20})
    with BrokerClient(server.bound_port()) as setup:
        setup.create_topic("steady")
    stop, failures, rounds = threading.Event(), [], [0]

    def good_client():
        try:
            with BrokerClient(server.bound_port(), timeout=10) as client:
                while not stop.is_set():
                    n = rounds[0]
                    assert client.produce("steady", 0, records(f"m{n}".encode())).error_code == 0
                    assert values_of(client.fetch("steady", 0, n).records) == [f"m{n}".encode()]
                    rounds[0] += 1
        except Exception as exc:            # reported by the tests below
            failures.append(repr(exc))

    thread = threading.Thread(target=good_client, daemon=True)
    thread.start()
    yield server, failures, rounds
    stop.set()
    thread.join(10)
    server.shutdown()


def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.bound_port()), timeout=10)
    return sock


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        while chunk := sock.recv(4096):
            del chunk
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()


def frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 1, 4) + b"evil" + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("name, data", [
    ("random bytes", random.Random(7).randbytes(64)),
    ("2 GiB frame length", struct.pack(">i", 2**31 - 1) + b"\x00" * 16),
    ("negative frame length", struct.pack(">i", -5)),
    ("unknown api key", frame(99, 0)),
    ("unsupported produce version", frame(0, 9)),
    ("unsupported fetch version", frame(1, 12)),
    ("api this broker does not serve", frame(ApiKeys.SASL_HANDSHAKE, 0)),
    ("join group body cut short", frame(ApiKeys.JOIN_GROUP, 0)),
    ("metadata body cut short", frame(3, 1, b"\x00\x00\x00\x05\x00")),
    ("frame shorter than a header", struct.pack(">i", 3) + b"\x00\x03\x00"),
])
def test_bad_frames_close_their_connection_only(busy_broker, name, data, caplog):
    server, failures, rounds = busy_broker
    before = rounds[0]
    sock = connect(server)
    port = sock.getsockname()[1]
    with caplog.at_level(logging.INFO, logger="kafka_edu"):
        sock.sendall(data)
        assert closed_by_broker(sock), name
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and f":{port}" in r.getMessage()]
    assert len(said) == 1, said                     # one log line per bad connection
    with BrokerClient(server.bound_port()) as other:
        assert other.call(ApiKeys.API_VERSIONS, 1, {}).error_code == 0
    assert not failures
    assert rounds[0] > before or not failures


def test_truncated_frame_then_hang_up(busy_broker):
    server, failures, _ = busy_broker
    sock = connect(server)
    sock.sendall(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
    sock.close()
    with BrokerClient(server.bound_port()) as other:
        assert other.metadata(["steady"]).topics[0].error_code == 0
    assert not failures


def test_silent_client_is_closed_after_the_idle_timeout(busy_broker):
    server, failures, _ = busy_broker
    sock = connect(server)
    sock.settimeout(15)
    assert closed_by_broker(sock)
    assert not failures


def test_unsupported_api_versions_is_answered_not_closed(busy_broker):
    server, failures, rounds = busy_broker
    with BrokerClient(server.bound_port()) as client:
        client.sock.sendall(frame(18, 9, b"\x00"))        # header v2: an empty tagged-field section
        size = struct.unpack(">i", client.recv_exactly(4))[0]
        body = client.recv_exactly(size)
        assert struct.unpack(">ih", body[:6]) == (1, 35)
        assert client.call(ApiKeys.API_VERSIONS, 0, {}).error_code == 0
    assert not failures and rounds[0] > 0


def test_acks_all_with_a_negative_timeout_is_answered(busy_broker):
    """The records are appended before the wait is set up: a negative timeout must expire the wait at
    once (as in 0.10), not fail it and close the connection, which a producer would retry into duplicates."""
    server, failures, rounds = busy_broker
    with BrokerClient(server.bound_port(), timeout=10) as client:
        client.create_topic("impatient")
        answer = client.produce("impatient", 0, records(b"once"), acks=-1, timeout_ms=-1)
        assert (answer.error_code, answer.base_offset) == (0, 0)
        assert values_of(client.fetch("impatient", 0, 0).records) == [b"once"]
    assert not failures and rounds[0] > 0


def test_unreadable_records_in_a_v3_produce_fail_their_partition_only(busy_broker):
    server, failures, rounds = busy_broker
    with BrokerClient(server.bound_port(), timeout=10) as client:
        client.create_topic("half-bad", partitions=2)
        answer = client.call(ApiKeys.PRODUCE, 7, {"acks": 1, "timeout_ms": 1000, "transactional_id": None,
                                                  "topic_data": [{"name": "half-bad", "partition_data": [
                                                      {"index": 0, "records": b"\x00" * 70},
                                                      {"index": 1, "records": records(b"fine")}]}]})
        assert {p.index: p.error_code for p in answer.responses[0].partition_responses} == {0: 2, 1: 0}
        assert values_of(client.fetch("half-bad", 1, 0).records) == [b"fine"]
    assert not failures and rounds[0] > 0
