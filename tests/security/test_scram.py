"""SCRAM-SHA-256/512 (Beyond 0.10): RFC 7677's test vector, credentials in ZooKeeper as Kafka stores
them, and logins over SASL_PLAINTEXT by kafka-edu's own client, confluent-kafka, kafka-python and kcat.

KafkaServer hands its SocketServer the ZooKeeper-backed credential lookup (`ZkScramCredentials`).
"""
from __future__ import annotations

import base64
import json
import logging
import subprocess

import pytest
from blocking_client import CodecConnection

from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.common.network.channel_builders import client_channel_builder
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.security.auth import SaslAuthenticationError
from kafka_edu.common.security.scram import ScramFormatter, ScramSaslClient, ScramSaslServer
from kafka_edu.common.utils.time import SYSTEM_TIME
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.security.credential_provider import add_scram_credential
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'


def test_rfc7677_vector():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramFormatter("SCRAM-SHA-256").credential("pencil", 4096, salt)
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    server = ScramSaslServer("SCRAM-SHA-256", lambda u, m: credential if u == "user" else None,
                             nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate_response(client.initial_response())
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.evaluate_challenge(server_first)
    assert client_final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert server.evaluate_response(client_final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert client.evaluate_challenge(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.is_complete() and server.authorization_id == "user"


def test_bad_proofs_and_forged_server_are_rejected():
    credential = ScramFormatter("SCRAM-SHA-512").credential("right", 4096)
    server = ScramSaslServer("SCRAM-SHA-512", lambda u, m: credential)
    client = ScramSaslClient("SCRAM-SHA-512", "u", "right")
    final = client.evaluate_challenge(server.evaluate_response(client.initial_response()))
    with pytest.raises(SaslAuthenticationError):
        ScramSaslServer("SCRAM-SHA-512", lambda u, m: credential).evaluate_response(final)   # nonce of another login
    tampered = final[:-6] + (b"AAAA==" if not final.endswith(b"AAAA==") else b"BBBB==")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(tampered)
    with pytest.raises(SaslAuthenticationError, match="server signature"):
        client.evaluate_challenge(b"v=" + base64.b64encode(b"\0" * 64))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    zookeeper = EmbeddedZooKeeper()
    zk_utils = ZkUtils(zookeeper.connect())
    for mechanism in MECHANISMS:
        add_scram_credential(zk_utils, "alice", mechanism, "alice-secret")
    for name, junk in DAMAGED.items():
        zk_utils.zk.create(f"/config/users/{name}", junk, makepath=True)
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "log.cleaner.enable": "false", "sasl.enabled.mechanisms": ",".join(["PLAIN", *MECHANISMS]),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}, warn_unknown=False)
    server = KafkaServer(config, embedded_zookeeper=zookeeper)
    server.startup()
    yield server
    server.shutdown()


DAMAGED = {"damaged-json": b"{", "damaged-list": b"[1]", "damaged-number": b'{"version":1,"config":{"SCRAM-SHA-256":5}}',
           "damaged-text": b'{"version":1,"config":{"SCRAM-SHA-256":"abc"}}'}


@pytest.mark.parametrize("name", ["mallory", "..", "", "a//b", *DAMAGED])
def test_an_unknown_or_unpathable_user_is_refused_with_an_answer(broker, name, caplog):
    """A name that makes no ZooKeeper path under /config/users failed the lookup outside the login:
    no answer, a traceback from the Processor, a connection left hanging. So did, Beyond 0.10, an entry
    under /config/users that no tool wrote."""
    with caplog.at_level(logging.ERROR, logger="kafka_edu.server.network.processor"):
        with CodecConnection(broker.bound_port("SASL_PLAINTEXT"), timeout=5) as conn:
            assert conn.call(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
            answer = conn.call(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": f"n,,n={name},r=abcdef".encode()})
            assert answer.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
            assert conn.closed_by_peer(5)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_credentials_are_stored_as_kafka_stores_them(broker):
    zk_utils = broker.zk_utils
    stored = json.loads(zk_utils.read_data_maybe_null("/config/users/alice")[0])
    assert stored["version"] == 1 and sorted(stored["config"]) == MECHANISMS
    fields = dict(item.split("=", 1) for item in stored["config"]["SCRAM-SHA-256"].split(","))
    assert sorted(fields) == ["iterations", "salt", "server_key", "stored_key"] and fields["iterations"] == "4096"
    assert "alice-secret" not in json.dumps(stored)


def own_client_login(broker, mechanism, user, password):
    """kafka-edu's NetworkClient over a SASL KSelector: the metadata it gets, or the login error."""
    selector = KSelector(channel_builder=client_channel_builder({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            f'username="{user}" password="{password}";'}))
    metadata = Metadata()
    metadata.bootstrap([("127.0.0.1", broker.bound_port("SASL_PLAINTEXT"))])
    client = NetworkClient(selector, metadata, client_id="scram-test", reconnect_backoff_ms=10_000)
    try:
        deadline = SYSTEM_TIME.milliseconds() + 10_000
        while metadata.fetch().is_bootstrap and not client.authentication_errors:
            assert SYSTEM_TIME.milliseconds() < deadline
            client.poll(100, SYSTEM_TIME.milliseconds())
        errors = list(client.authentication_errors.values())
        return errors[0] if errors else metadata.fetch()
    finally:
        selector.close()


@pytest.mark.parametrize("mechanism", [*MECHANISMS, "PLAIN"])
def test_own_client(broker, mechanism):
    user, password = ("bob", "bob-secret") if mechanism == "PLAIN" else ("alice", "alice-secret")
    cluster = own_client_login(broker, mechanism, user, password)
    assert [n.port for n in cluster.nodes] == [broker.bound_port("SASL_PLAINTEXT")]
    error = own_client_login(broker, mechanism, user, "wrong")
    assert isinstance(error, SaslAuthenticationError) and "Authentication failed" in str(error)
    error = own_client_login(broker, "SCRAM-SHA-256", "nobody", "x")
    assert "Invalid user credentials" in str(error)


def test_confluent_kafka(broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    for mechanism in MECHANISMS:
        base = {"bootstrap.servers": f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
        good = Producer({**base, "sasl.username": "alice", "sasl.password": "alice-secret"})
        assert good.list_topics(timeout=10).brokers
        for user, password in (("alice", "wrong"), ("nobody", "x")):
            errors = []
            bad = Producer({**base, "sasl.username": user, "sasl.password": password, "error_cb": errors.append})
            with pytest.raises(KafkaException):
                bad.list_topics(timeout=2)
            bad.poll(0.3)
            assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
            assert good.list_topics(timeout=5).brokers


def test_kafka_python(broker, caplog):
    import kafka
    import kafka.errors
    for mechanism in MECHANISMS:
        config = {"bootstrap_servers": f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}",
                  "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
        good = kafka.KafkaProducer(**config, sasl_plain_username="alice", sasl_plain_password="alice-secret")
        assert good.send(f"scram-{mechanism.lower()}", b"v").get(timeout=15).offset == 0
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(**config, sasl_plain_username="alice", sasl_plain_password="wrong",
                                max_block_ms=1500, reconnect_backoff_max_ms=100, bootstrap_timeout_ms=1500)
        assert "SaslAuthenticationFailedError" in caplog.text
        good.close()


def test_kcat(broker, kcat):
    def run(mechanism, user, password):
        return subprocess.run([kcat, "-b", f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}", "-L", "-m", "2",
                               "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
                               "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"],
                              capture_output=True, text=True, timeout=30)
    for mechanism in MECHANISMS:
        assert run(mechanism, "alice", "alice-secret").returncode == 0
        bad = run(mechanism, "alice", "wrong")
        assert bad.returncode != 0 and "Authentication" in bad.stderr, bad.stderr
