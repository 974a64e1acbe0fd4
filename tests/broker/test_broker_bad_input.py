"""Bad input on a live broker while a well-behaved client keeps producing and fetching: each bad
connection is closed (or answered with an error), the good one never notices."""
from __future__ import annotations

import logging
import random
import socket
import struct
import threading

import crc32c
import pytest
from _broker_client import BrokerClient, records, start_broker, values_of

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.record import compression
from kafka_edu.common.record import default_records as v2
from kafka_edu.common.record.compression import CompressionType


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


def undecodable_batch() -> bytes:
    """A v2 batch, header and CRC sound, whose one record claims an 8-byte value it does not have."""
    batch = bytearray(records(b"x"))
    assert batch[-3:] == b"\x02x\x00"            # value size 1 (zig-zag 2), the value, no headers
    batch[-3] = 0x10
    v2._UINT32.pack_into(batch, v2.CRC_OFFSET, v2.compute_batch_crc(batch))
    return bytes(batch)


def test_old_fetch_of_undecodable_stored_records_fails_that_partition_only(busy_broker):
    """A produced v2 batch is stored without decoding its records; an old fetch (v0-v3) must convert them,
    and a record that does not decode answers its partition CORRUPT_MESSAGE, as Kafka does, instead of
    closing the connection (and with it every other partition of the request)."""
    server, failures, rounds = busy_broker
    with BrokerClient(server.bound_port(), timeout=10) as client:
        client.create_topic("undecodable", partitions=2)
        assert client.produce("undecodable", 0, undecodable_batch()).error_code == 0
        assert client.produce("undecodable", 1, records(b"fine")).error_code == 0
        body = client.fetch_body("undecodable", 0, 0)
        partitions = body["topics"][0]["partitions"]
        partitions.append({**partitions[0], "partition": 1})
        answer = {p.partition_index: p for p in client.call(ApiKeys.FETCH, 3, body).responses[0].partitions}
        assert (answer[0].error_code, answer[0].records) == (2, b"")
        assert answer[1].error_code == 0 and values_of(answer[1].records) == [b"fine"]
        assert client.fetch("undecodable", 0, 0).error_code == 0      # a v2 reader gets the batch as stored
    assert not failures and rounds[0] > 0


def test_old_fetch_of_records_the_old_format_cannot_hold_fails_that_partition_only(busy_broker):
    """A v2 batch with a negative timestamp is stored as produced (its records are not decoded); a
    v1 message cannot carry that timestamp, so an old fetch gets CORRUPT_MESSAGE for it, not a closed
    connection (Kafka 1.x failed the whole request)."""
    server, failures, rounds = busy_broker
    batch = bytearray(records(b"before 1970"))
    struct.pack_into(">qq", batch, 27, -1000, -1000)          # base and max timestamp
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with BrokerClient(server.bound_port(), timeout=10) as client:
        client.create_topic("pre-epoch")
        assert client.produce("pre-epoch", 0, bytes(batch)).error_code == 0
        old = client.call(ApiKeys.FETCH, 3, client.fetch_body("pre-epoch", 0, 0)).responses[0].partitions[0]
        assert (old.error_code, old.records) == (2, b"")
        assert values_of(client.fetch("pre-epoch", 0, 0).records) == [b"before 1970"]
    assert not failures and rounds[0] > 0


def test_a_batch_that_inflates_past_the_limit_is_corrupt(busy_broker, monkeypatch):
    """Records the broker must decompress (a v1 wrapper to store as v2, a batch of a compacted topic)
    may inflate to MAX_DECOMPRESSED_BATCH_BYTES at most; past it the partition gets CORRUPT_MESSAGE."""
    server, failures, rounds = busy_broker
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BATCH_BYTES", 1 << 20)
    with BrokerClient(server.bound_port(), timeout=10) as client:
        client.create_topic("inflating-v1")
        client.create_topic("inflating-compacted", cleanup_policy="compact")
        two_mib = bytes(2 << 20)
        wrapper = records(two_mib, magic=1, compression=CompressionType.GZIP)
        batch = records(two_mib, keys=[b"k"], compression=CompressionType.ZSTD)
        assert len(wrapper) < 10_000 and len(batch) < 1_000
        assert client.produce("inflating-v1", 0, wrapper, version=2).error_code == 2
        assert client.produce("inflating-compacted", 0, batch).error_code == 2
        monkeypatch.undo()
        assert client.produce("inflating-v1", 0, wrapper, version=2).error_code == 0
        assert client.produce("inflating-compacted", 0, batch).error_code == 0
    assert not failures and rounds[0] > 0
