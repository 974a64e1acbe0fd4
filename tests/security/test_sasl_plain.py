"""T27: SASL/PLAIN on a SASL_PLAINTEXT listener of an in-process broker, over real sockets.

Raw frames drive the server's state machine exactly (handshake v0 with 0.10's raw tokens, handshake
v1 with SaslAuthenticate requests), so each rejection can be checked to happen before any request of
the connection reaches KafkaApis, while another authenticated connection keeps being served.
"""
from __future__ import annotations

import logging
import struct
import tracemalloc

import pytest
from blocking_client import CodecConnection

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "log.cleaner.enable": "false", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}, warn_unknown=False)
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield server
    server.shutdown()


def connect(broker) -> CodecConnection:
    return CodecConnection(broker.bound_port("SASL_PLAINTEXT"), timeout=10)


def metadata_count(broker) -> int:
    return broker.apis.request_counts[ApiKeys.METADATA]


def principals(broker) -> set[str]:
    return {p for proc in broker.socket_server.processors for p in proc.principals().values()}


def login_v1(conn: CodecConnection, user: str, password: str, mechanism: str = "PLAIN"):
    handshake = conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if handshake.error_code:
        return handshake
    return conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0{user}\0{password}".encode()})


def test_api_versions_before_handshake_then_login_as_alice(broker):
    with connect(broker) as conn:
        versions = conn.call(ApiKeys.API_VERSIONS, 1, {})
        assert versions.error_code == 0
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert ranges[ApiKeys.SASL_HANDSHAKE] == (0, 1) and ranges[ApiKeys.SASL_AUTHENTICATE] == (0, 1)
        answer = login_v1(conn, "alice", "alice-secret")
        assert answer.error_code == 0 and answer.auth_bytes == b""
        assert "User:alice" in principals(broker)
        metadata = conn.call(ApiKeys.METADATA, 1, {"topics": []})
        assert [b.port for b in metadata.brokers] == [broker.bound_port("SASL_PLAINTEXT")]


def test_sasl_authenticate_v0_after_handshake_v1(broker):
    with connect(broker) as conn:
        assert conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
        answer = conn.call(ApiKeys.SASL_AUTHENTICATE, 0, {"auth_bytes": b"\0alice\0alice-secret"})
        assert answer.error_code == 0
        assert conn.call(ApiKeys.METADATA, 1, {"topics": []}).brokers


def test_handshake_v0_with_raw_tokens(broker):
    with connect(broker) as conn:
        assert conn.call(ApiKeys.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).mechanisms == ["PLAIN"]
        conn.send_frame(b"\0admin\0admin-secret")
        assert conn.receive_frame() == b""                     # PLAIN's empty final answer
        assert conn.call(ApiKeys.METADATA, 0, {"topics": []}).brokers
    with connect(broker) as conn:
        conn.call(ApiKeys.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        conn.send_frame(b"\0admin\0wrong")
        assert conn.closed_by_peer(5)                          # 0.10: closed without a word


def test_wrong_password_closes_before_any_request_is_processed(broker):
    with connect(broker) as good:
        assert login_v1(good, "alice", "alice-secret").error_code == 0
        before = metadata_count(broker)
        for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
            with connect(broker) as bad:
                bad.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
                auth = bad.send(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": f"\0{user}\0{password}".encode()})
                bad.send(ApiKeys.METADATA, 1, {"topics": []})          # pipelined right behind the token
                correlation_id, answer = bad.receive(ApiKeys.SASL_AUTHENTICATE, 1)
                assert correlation_id == auth
                assert answer.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
                assert answer.error_message == "Authentication failed: Invalid username or password"
                assert bad.closed_by_peer(5)
        assert metadata_count(broker) == before
        assert good.call(ApiKeys.METADATA, 1, {"topics": []}).brokers     # the good connection is unaffected


def test_gssapi_gets_unsupported_mechanism_with_the_enabled_list(broker):
    with connect(broker) as conn:
        answer = conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code == Errors.UNSUPPORTED_SASL_MECHANISM.code
        assert answer.mechanisms == ["PLAIN"]
        assert conn.closed_by_peer(5)


def test_request_before_authentication_closes_with_one_log_line(broker, caplog):
    before = metadata_count(broker)
    with caplog.at_level(logging.INFO, logger="kafka_edu.server.network.processor"):
        with connect(broker) as conn:
            conn.send(ApiKeys.METADATA, 1, {"topics": []})
            assert conn.closed_by_peer(5)
    lines = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
    assert len(lines) == 1 and "unexpected METADATA request before SASL authentication" in lines[0]
    assert metadata_count(broker) == before


def test_illegal_sasl_state(broker):
    with connect(broker) as conn:                   # SaslAuthenticate before any handshake
        answer = conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert answer.error_code == Errors.ILLEGAL_SASL_STATE.code
        assert conn.closed_by_peer(5)
    with connect(broker) as conn:                   # a second handshake instead of a token
        conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == \
            Errors.ILLEGAL_SASL_STATE.code
        assert conn.closed_by_peer(5)


def test_malformed_tokens_and_frames_close_the_connection(broker):
    with connect(broker) as conn:
        conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": b"no separators at all"})
        assert answer.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert conn.closed_by_peer(5)
    with connect(broker) as conn:
        conn.send_frame(b"\x00\x01")                # not even a request header
        assert conn.closed_by_peer(5)
    with connect(broker) as conn:
        conn.call(ApiKeys.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        conn.send_frame(b"\xff\xfe\0\xff\0\xff")    # three fields, not UTF-8
        assert conn.closed_by_peer(5)


def test_a_100_mb_token_is_refused_from_its_size_prefix(broker):
    with connect(broker) as good:
        assert login_v1(good, "admin", "admin-secret").error_code == 0
        tracemalloc.start()
        try:
            with connect(broker) as conn:
                conn.call(ApiKeys.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
                conn.sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\0alice\0")
                assert conn.closed_by_peer(5)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 10 * 1024 * 1024
        assert good.call(ApiKeys.METADATA, 1, {"topics": []}).brokers


def test_plaintext_listener_stays_anonymous(broker):
    with CodecConnection(broker.bound_port("PLAINTEXT"), timeout=10) as conn:
        assert conn.call(ApiKeys.METADATA, 1, {"topics": []}).brokers
        assert "User:ANONYMOUS" in principals(broker)


def test_sasl_requests_after_login_get_illegal_sasl_state_and_the_connection_stays(broker):
    with connect(broker) as conn:
        assert login_v1(conn, "alice", "alice-secret").error_code == 0
        served = {k.api_key for k in conn.call(ApiKeys.API_VERSIONS, 2, {}).api_keys}
        assert {ApiKeys.SASL_HANDSHAKE, ApiKeys.SASL_AUTHENTICATE, ApiKeys.METADATA} <= served
        assert conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == \
            Errors.ILLEGAL_SASL_STATE.code
        answer = conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert answer.error_code == Errors.ILLEGAL_SASL_STATE.code and "after authentication" in answer.error_message
        assert conn.call(ApiKeys.METADATA, 1, {"topics": []}).brokers        # still open


def test_plaintext_listener_does_not_advertise_sasl(broker):
    with CodecConnection(broker.bound_port("PLAINTEXT"), timeout=10) as conn:
        served = {k.api_key for k in conn.call(ApiKeys.API_VERSIONS, 2, {}).api_keys}
        assert ApiKeys.METADATA in served and not served & {ApiKeys.SASL_HANDSHAKE, ApiKeys.SASL_AUTHENTICATE}
