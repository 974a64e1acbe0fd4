"""Blocking connections to a broker for the test suites: Kafka's size-prefixed frames, raw or encoded.

One class per layer, so the network tests (raw frames), the broker tests (our codec, plus
conveniences in tests/broker/_broker_client.py) and the compatibility tests (our codec against
librdkafka's mock cluster) read and write frames the same way.
"""
from __future__ import annotations

import itertools
import socket
import struct

from kafka_edu.common.protocol.header import RequestHeader, decode_response, encode_request


class FrameConnection:
    """One blocking TCP connection carrying size-prefixed frames."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 20.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def recv_exactly(self, n: int) -> bytes:
        """Exactly `n` bytes; EOFError if the peer closes first."""
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError(f"connection closed after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive_frame(self) -> bytes:
        return self.recv_exactly(struct.unpack(">i", self.recv_exactly(4))[0])

    def closed_by_peer(self, timeout: float | None = None) -> bool:
        """True once the broker has closed this connection (recv returns EOF or a reset)."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


class CodecConnection(FrameConnection):
    """Requests encoded and responses decoded with our protocol schemas; one request at a time."""

    _ids = itertools.count(1)
    client_id = "test"

    def send(self, api: int, version: int, body, correlation_id: int | None = None) -> int:
        correlation_id = next(self._ids) if correlation_id is None else correlation_id
        self.sock.sendall(encode_request(RequestHeader(api, version, correlation_id, self.client_id), body))
        return correlation_id

    def receive(self, api: int, version: int):
        """The next response as (correlation id, decoded body)."""
        return decode_response(self.receive_frame(), api, version)

    def call(self, api: int, version: int, body):
        sent = self.send(api, version, body)
        correlation_id, response = self.receive(api, version)
        assert correlation_id == sent
        return response
