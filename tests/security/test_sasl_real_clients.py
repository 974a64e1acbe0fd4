"""Unmodified clients log in over SASL_PLAINTEXT/PLAIN: confluent-kafka (librdkafka), kafka-python, kcat.

For each: good credentials produce and read metadata; a wrong password, an unknown user and a
mechanism the broker has not enabled each end in an authentication error for that client, while a
good client on another connection keeps being served.
"""
from __future__ import annotations

import logging
import subprocess

import pytest

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

JAAS_FILE = """KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin" password="admin-secret"
   user_admin="admin-secret" user_alice="alice-secret";
};
"""
BAD = [("alice", "wrong", "PLAIN"), ("mallory", "alice-secret", "PLAIN"), ("alice", "alice-secret", "SCRAM-SHA-512")]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    work = tmp_path_factory.mktemp("sasl")
    (work / "kafka_server_jaas.conf").write_text(JAAS_FILE)
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(work / "logs"), "num.network.threads": 1, "num.io.threads": 2, "num.partitions": 1,
        "log.cleaner.enable": "false", "offsets.topic.replication.factor": 1, "sasl.enabled.mechanisms": "PLAIN",
        "java.security.auth.login.config": str(work / "kafka_server_jaas.conf")}, warn_unknown=False)
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield server
    server.shutdown()


def bootstrap(broker) -> str:
    return f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}"


# ---------------------------------------------------------------- confluent-kafka

def confluent_config(broker, user, password, mechanism="PLAIN", **extra):
    return {"bootstrap.servers": bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}


def test_confluent_kafka(broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    good = Producer(confluent_config(broker, "alice", "alice-secret"))
    delivered = []
    good.produce("sasl-confluent", b"v1", on_delivery=lambda err, msg: delivered.append(err))
    assert good.flush(15) == 0 and delivered == [None]
    for user, password, mechanism in BAD:
        errors = []
        bad = Producer(confluent_config(broker, user, password, mechanism, error_cb=errors.append))
        with pytest.raises(KafkaException):
            bad.list_topics(timeout=2)
        bad.poll(0.5)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), (user, mechanism, errors)
        assert "sasl-confluent" in good.list_topics(timeout=5).topics     # unaffected


# ---------------------------------------------------------------- kafka-python

def kafka_python_config(broker, user, password, mechanism="PLAIN"):
    return {"bootstrap_servers": bootstrap(broker), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password,
            "request_timeout_ms": 5000}


def test_kafka_python(broker, caplog):
    import kafka
    import kafka.errors
    good = kafka.KafkaProducer(**kafka_python_config(broker, "alice", "alice-secret"))
    assert good.send("sasl-kafka-python", b"v1").get(timeout=15).offset == 0
    for (user, password, mechanism), error in zip(BAD, ["SaslAuthenticationFailedError"] * 2 +
                                                  ["UnsupportedSaslMechanismError"], strict=True):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaProducer(**kafka_python_config(broker, user, password, mechanism), max_block_ms=1500, reconnect_backoff_max_ms=100, bootstrap_timeout_ms=1500)
        assert error in caplog.text, (user, mechanism)
        assert good.send("sasl-kafka-python", b"v2").get(timeout=15).offset >= 1     # unaffected
    good.close()


# ---------------------------------------------------------------- kcat

def run_kcat(kcat, broker, user, password, mechanism="PLAIN"):
    return subprocess.run([kcat, "-b", bootstrap(broker), "-L", "-m", "2", "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
                           "-X", f"sasl.password={password}"], capture_output=True, text=True, timeout=30)


def test_kcat(broker, kcat):
    good = run_kcat(kcat, broker, "alice", "alice-secret")
    assert good.returncode == 0 and "1 brokers" in good.stdout, good.stderr
    for user, password, mechanism in BAD:
        bad = run_kcat(kcat, broker, user, password, mechanism)
        assert bad.returncode != 0
        assert "Authentication" in bad.stderr or "mechanism" in bad.stderr, bad.stderr
    assert run_kcat(kcat, broker, "admin", "admin-secret").returncode == 0
