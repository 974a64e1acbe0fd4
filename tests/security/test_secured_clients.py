"""kafka-edu's own producer, consumer and admin client over SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256) and SSL:
good credentials work end to end, a wrong password ends the blocking call with the login's error;
the console tools reach a secured broker through --producer.config / --consumer.config.
"""
from __future__ import annotations

import subprocess
import time

import pytest
from compat.broker_process import KAFKA_EDU

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.security.auth import AuthenticationError
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.security.credential_provider import add_scram_credential
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils

BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    zookeeper = EmbeddedZooKeeper()
    add_scram_credential(ZkUtils(zookeeper.connect()), "alice", "SCRAM-SHA-256", "alice-secret")
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "num.partitions": 1, "log.cleaner.enable": "false", "offsets.topic.replication.factor": 1,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": str(certs / "broker-keystore.pem"), "ssl.truststore.location": str(certs / "ca.pem")})
    server = KafkaServer(config, embedded_zookeeper=zookeeper)
    server.startup()
    yield server
    server.shutdown()


def security(certs, case: str, password: str | None = None) -> tuple[str, dict]:
    """The listener protocol of a case and the client keys that log in to it."""
    if case == "SSL":
        return "SSL", {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    user, secret = ("bob", "bob-secret") if case == "PLAIN" else ("alice", "alice-secret")
    return "SASL_PLAINTEXT", {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": case,
                              "sasl.username": user, "sasl.password": password or secret}


@pytest.mark.parametrize("case", ["PLAIN", "SCRAM-SHA-256", "SSL"])
def test_producer_consumer_and_admin_log_in(broker, certs, case):
    protocol, keys = security(certs, case)
    bootstrap = f"127.0.0.1:{broker.bound_port(protocol)}"
    topic = f"secured-{case.lower()}"
    with ClusterAdmin(bootstrap, configs=keys, request_timeout_ms=10_000) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
        assert [n.port for n in admin.describe_cluster().nodes] == [broker.bound_port(protocol)]
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": BYTES, "value.serializer": BYTES,
                              "max.block.ms": 10_000, **keys})
    try:
        assert producer.send(topic, b"over " + case.encode(), partition=0).get(10).offset == 0
    finally:
        producer.close()
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **keys})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 10
        records = {}
        while not records:
            assert time.monotonic() < deadline
            records = consumer.poll(200)
        assert [r.value for r in records[TopicPartition(topic, 0)]] == [b"over " + case.encode()]
    finally:
        consumer.close()


@pytest.mark.parametrize("case", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_an_error_not_a_retry_loop(broker, certs, case):
    protocol, keys = security(certs, case, password="wrong")
    bootstrap = f"127.0.0.1:{broker.bound_port(protocol)}"
    with pytest.raises(AuthenticationError, match="Invalid username or password|[Aa]uthentication failed"):
        with ClusterAdmin(bootstrap, configs=keys, request_timeout_ms=20_000) as admin:
            admin.describe_cluster()
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "key.serializer": BYTES, "value.serializer": BYTES,
                              "max.block.ms": 20_000, **keys})
    try:
        with pytest.raises(AuthenticationError):
            producer.send("anything", b"x")
    finally:
        producer.close()
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "request.timeout.ms": 20_000, **keys})
    try:
        consumer.assign([TopicPartition("anything", 0)])
        with pytest.raises(AuthenticationError):
            for _ in range(100):        # 20 s: far longer than a refused login takes
                consumer.poll(200)
    finally:
        consumer.close()


def test_console_tools_read_their_security_keys_from_config_files(broker, tmp_path):
    bootstrap = f"127.0.0.1:{broker.bound_port('SASL_PLAINTEXT')}"
    good = tmp_path / "client.properties"
    good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.username=alice\nsasl.password=alice-secret\n")
    with ClusterAdmin(f"127.0.0.1:{broker.bound_port('PLAINTEXT')}") as admin:
        assert admin.create_topics([NewTopic("console-secured", 1, 1)]) == {"console-secured": None}
    sent = subprocess.run([str(KAFKA_EDU), "console-producer", "--broker-list", bootstrap, "--topic",
                           "console-secured", "--producer.config", str(good)],
                          input="hello\nworld\n", capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stderr
    read = subprocess.run([str(KAFKA_EDU), "console-consumer", "--bootstrap-server", bootstrap, "--topic",
                           "console-secured", "--from-beginning", "--max-messages", "2", "--timeout-ms", "15000",
                           "--consumer.config", str(good)], capture_output=True, text=True, timeout=60)
    assert read.stdout.splitlines() == ["hello", "world"], read.stderr
