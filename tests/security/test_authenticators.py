"""The authenticators and channel builders without a broker: partial I/O, JAAS parsing, bad settings.

A trickling socket accepts at most a few bytes per call and refuses every other call, so each
token is written and read in many pieces; both state machines must still finish (PLAIN and SCRAM),
which is the book's "pending SASL state applied after the flush" rule.
"""
from __future__ import annotations

import socket

import pytest

from kafka_edu.common.network.authenticator import SaslClientAuthenticator, SaslServerAuthenticator
from kafka_edu.common.network.channel_builders import (
    SecurityConfigError, client_channel_builder, server_channel_builder)
from kafka_edu.common.security.jaas import JaasConfigError, parse_jaas_config, parse_jaas_file, server_jaas_options
from kafka_edu.common.security.plain import PlainSaslClient, PlainSaslServer
from kafka_edu.common.security.scram import ScramFormatter, ScramSaslClient, ScramSaslServer
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.network.socket_server import SocketServer


class TricklingSocket:
    """A non-blocking socket that moves at most `step` bytes per call and refuses every other call."""

    def __init__(self, sock: socket.socket, step: int = 3):
        self.sock, self.step, self.calls = sock, step, 0

    def _refuse(self) -> bool:
        self.calls += 1
        return self.calls % 2 == 0

    def sendmsg(self, buffers, *args) -> int:
        if self._refuse():
            raise BlockingIOError
        data = b"".join(bytes(b) for b in buffers)[:self.step]
        return self.sock.send(data)

    def recv_into(self, buffer, *args) -> int:
        if self._refuse():
            raise BlockingIOError
        return self.sock.recv_into(memoryview(buffer)[:self.step])


def drive(client, server, rounds=2000):
    for _ in range(rounds):
        if not client.complete():
            client.authenticate()
        if not server.complete():
            server.authenticate()
        if client.complete() and server.complete():
            return
    raise AssertionError(f"stuck: client {client.state}, server {server.state}")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("handshake_version", [0, 1])
def test_partial_writes_and_reads_during_authentication(mechanism, handshake_version):
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    credential = ScramFormatter(mechanism).credential("pw") if mechanism != "PLAIN" else None
    factory = {"PLAIN": lambda: PlainSaslServer({"user_alice": "pw"})}.get(
        mechanism, lambda: ScramSaslServer(mechanism, lambda u, m: credential if u == "alice" else None))
    sasl_client = PlainSaslClient("alice", "pw") if mechanism == "PLAIN" else ScramSaslClient(mechanism, "alice", "pw")
    server = SaslServerAuthenticator("s", TricklingSocket(left), [mechanism], lambda m: factory())
    client = SaslClientAuthenticator("c", TricklingSocket(right), sasl_client, handshake_version=handshake_version)
    drive(client, server)
    assert server.principal() == "User:alice"
    left.close()
    right.close()


def test_jaas_file_sections_and_listener_prefix(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text("""
        /* broker users */
        KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required user_a="1"; };
        sasl_plaintext.KafkaServer {
            org.apache.kafka.common.security.plain.PlainLoginModule required user_b="two \\"quoted\\"";
        };
        KafkaClient { org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="2"; };
    """)
    assert sorted(parse_jaas_file(path.read_text())) == ["KafkaClient", "KafkaServer", "sasl_plaintext.KafkaServer"]
    config = {"java.security.auth.login.config": str(path)}
    assert server_jaas_options(config, "SASL_PLAINTEXT", "PLAIN") == {"user_b": 'two "quoted"'}
    assert server_jaas_options(config, "SASL_SSL", "PLAIN") == {"user_a": "1"}
    inline = {**config, "listener.name.sasl_ssl.plain.sasl.jaas.config":
              'org.apache.kafka.common.security.plain.PlainLoginModule required user_c="3";'}
    assert server_jaas_options(inline, "SASL_SSL", "PLAIN") == {"user_c": "3"}
    with pytest.raises(JaasConfigError):
        parse_jaas_file("KafkaServer { not a module };")
    with pytest.raises(JaasConfigError):
        parse_jaas_config('a.B required x="1"; c.D required y="2";')


def test_quoted_values_are_tokens_and_each_mechanism_finds_its_module(tmp_path):
    """As Java's JAAS tokenizer: ';', '}' and '//' inside quotes belong to the value. A KafkaServer
    section lists one module per mechanism (Kafka's documented set-up); PLAIN reads PlainLoginModule's."""
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert parse_jaas_config(f'{plain} required username="alice" password="pa;ss}}";').options == {
        "username": "alice", "password": "pa;ss}"}
    path = tmp_path / "jaas.conf"
    path.write_text("KafkaServer {\n"
                    '  org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="a";\n'
                    f'  {plain} required\n'
                    '    user_alice="s3cr3t//x" // a real comment\n'
                    '    user_bob="bob-secret";\n'
                    "};\n")
    config = {"java.security.auth.login.config": str(path)}
    assert server_jaas_options(config, "SASL_PLAINTEXT", "PLAIN") == {"user_alice": "s3cr3t//x",
                                                                      "user_bob": "bob-secret"}
    assert server_jaas_options(config, "SASL_PLAINTEXT", "SCRAM-SHA-256") == {"username": "admin", "password": "a"}


def test_settings_that_cannot_work_fail_at_start_naming_the_key():
    with pytest.raises(SecurityConfigError, match="sasl.enabled.mechanisms: GSSAPI"):
        SocketServer(KafkaConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI",
                                  "security.inter.broker.protocol": "SASL_PLAINTEXT",
                                  "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "x.Y required a=\"b\";"},
                                 warn_unknown=False))
    with pytest.raises(SecurityConfigError, match="java.security.auth.login.config"):
        server_channel_builder("SASL_PLAINTEXT", ["PLAIN"], {})
    with pytest.raises(SecurityConfigError, match="credential store"):
        server_channel_builder("SASL_PLAINTEXT", ["SCRAM-SHA-256"], {})
    with pytest.raises(SecurityConfigError, match="sasl.mechanism: GSSAPI"):
        client_channel_builder({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a", "sasl.password": "b"})
    with pytest.raises(SecurityConfigError, match="sasl.jaas.config"):
        client_channel_builder({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"})
