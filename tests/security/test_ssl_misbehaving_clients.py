"""SASL over TLS with clients that misbehave before logging in. Decrypted bytes can wait in the TLS
layer where select does not see them; a channel that cannot act on them (its login failed, or its
answer cannot leave because the client reads nothing) must not be polled for them over and over,
or its Processor spins and the connection is never closed."""
from __future__ import annotations

import socket
import ssl
import struct

import pytest
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.header import RequestHeader, decode_response, encode_request
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    server = KafkaServer(KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "log.cleaner.enable": "false", "connections.max.idle.ms": 3000,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}, warn_unknown=False),
        embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield server
    server.shutdown()


def connect(broker, certs, listener: str, receive_buffer: int | None = None):
    raw = socket.socket()
    if receive_buffer:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.connect(("127.0.0.1", broker.bound_port(listener)))
    if listener == "SASL_PLAINTEXT":
        return raw
    return ssl.create_default_context(cafile=str(certs / "ca.pem")).wrap_socket(raw, server_hostname="localhost")


def frame(api: ApiKeys, version: int, correlation_id: int, body: dict) -> bytes:
    return encode_request(RequestHeader(api, version, correlation_id, "t"), body)


def answer(sock, api: ApiKeys, version: int):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data
    return decode_response(exactly(struct.unpack(">i", exactly(4))[0]), api, version)[1]


def closed_by_broker(sock, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def test_a_failed_login_with_a_request_behind_it_is_closed_after_the_delay(broker, certs):
    sock = connect(broker, certs, "SASL_SSL")
    sock.sendall(frame(ApiKeys.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
    assert answer(sock, ApiKeys.SASL_HANDSHAKE, 1).error_code == 0
    sock.sendall(frame(ApiKeys.SASL_AUTHENTICATE, 1, 2, {"auth_bytes": b"\0alice\0wrong"})     # in one write:
                 + frame(ApiKeys.METADATA, 1, 3, {"topics": []}))                             # it stays buffered
    assert answer(sock, ApiKeys.SASL_AUTHENTICATE, 1).error_code != 0
    assert closed_by_broker(sock, 3)                  # 100 ms after the answer; before, never (idle: 3 s)
    sock.close()


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_client_that_reads_no_answer_before_login_is_closed_when_idle(broker, certs, listener):
    """20,000 ApiVersions requests of an unsupported version, each answered, none read."""
    sock = connect(broker, certs, listener, receive_buffer=4096)
    payload = struct.pack(">hhih", ApiKeys.API_VERSIONS, 99, 1, 1) + b"t" + b"\0"
    sock.settimeout(0.5)
    try:
        for _ in range(200):
            sock.sendall((struct.pack(">i", len(payload)) + payload) * 100)
    except (socket.timeout, ssl.SSLWantWriteError):
        pass                                          # the broker stopped reading: its answers cannot leave
    processor = broker.socket_server.acceptors[listener].processors[0]
    wait_for(lambda: not processor.connection_ids(), timeout=8, what="the idle connection to be closed")
    sock.close()
