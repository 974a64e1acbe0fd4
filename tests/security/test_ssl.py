"""TLS listeners (Beyond 0.10): SSL and SASL_SSL with certificates made by the openssl CLI at test time.

kafka-edu's own client, confluent-kafka, kafka-python and kcat connect; a produced batch is fetched
back over TLS (the fetch path must not use sendfile there); the principal comes from the client
certificate on SSL and from SASL on SASL_SSL; an untrusted client or a wrong password fails alone.
"""
from __future__ import annotations

import subprocess
import time

import pytest
from _certs import openssl

from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.common.network.channel_builders import client_channel_builder
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.utils.time import SYSTEM_TIME
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "num.partitions": 1, "log.cleaner.enable": "false", "offsets.topic.replication.factor": 1,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"), "ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS},
        warn_unknown=False)
    server = KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper())
    server.startup()
    yield server
    server.shutdown()


def principals(broker, protocol):
    acceptor = broker.socket_server.acceptors[protocol]
    return {p for proc in acceptor.processors for p in proc.principals().values()}


def own_metadata(broker, protocol, **config):
    selector = KSelector(channel_builder=client_channel_builder({"security.protocol": protocol, **config}))
    metadata = Metadata()
    metadata.bootstrap([("127.0.0.1", broker.bound_port(protocol))])
    client = NetworkClient(selector, metadata, client_id="ssl-test", reconnect_backoff_ms=10_000)
    deadline = SYSTEM_TIME.milliseconds() + 10_000
    while metadata.fetch().is_bootstrap and not client.authentication_errors:
        assert SYSTEM_TIME.milliseconds() < deadline
        client.poll(100, SYSTEM_TIME.milliseconds())
    return selector, client, metadata.fetch()


def test_own_client_over_ssl_with_and_without_a_certificate(broker, certs):
    selector, client, cluster = own_metadata(broker, "SSL", **{"ssl.ca.location": str(certs / "ca.pem"),
                                             "ssl.certificate.location": str(certs / "alice.pem"),
                                             "ssl.key.location": str(certs / "alice.key")})
    assert [n.port for n in cluster.nodes] == [broker.bound_port("SSL")]
    assert "User:CN=alice,O=kafka-edu" in principals(broker, "SSL")
    selector.close()
    selector, client, cluster = own_metadata(broker, "SSL", **{"ssl.ca.location": str(certs / "ca.pem")})
    assert cluster.nodes and principals(broker, "SSL") == {"User:ANONYMOUS"}
    selector.close()


def test_a_value_cannot_pass_for_more_of_the_subject(broker, certs):
    """The principal escapes DN values as RFC 2253 does (Kafka: X500Principal.getName()): a certificate
    whose one CN is 'alice,O=kafka-edu' is not alice's, whose subject is O=kafka-edu, CN=alice."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "forger.key", "-out", "forger.csr",
            "-subj", "/CN=alice,O=kafka-edu", cwd=certs)
    openssl("x509", "-req", "-in", "forger.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "forger.pem", "-days", "2", cwd=certs)
    selector, client, cluster = own_metadata(broker, "SSL", **{"ssl.ca.location": str(certs / "ca.pem"),
                                             "ssl.certificate.location": str(certs / "forger.pem"),
                                             "ssl.key.location": str(certs / "forger.key")})
    assert cluster.nodes and principals(broker, "SSL") == {r"User:CN=alice\,O=kafka-edu"}
    selector.close()


def test_own_client_over_sasl_ssl(broker, certs):
    selector, client, cluster = own_metadata(broker, "SASL_SSL", **{
        "ssl.ca.location": str(certs / "ca.pem"), "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    assert cluster.nodes and "User:alice" in principals(broker, "SASL_SSL")
    selector.close()
    selector, client, _ = own_metadata(broker, "SASL_SSL", **{
        "ssl.ca.location": str(certs / "ca.pem"), "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "wrong"})
    assert "Invalid username or password" in str(next(iter(client.authentication_errors.values())))
    selector.close()


def test_untrusted_client_certificate_fails_alone(broker, certs):
    selector, client, _ = own_metadata(broker, "SSL", **{
        "ssl.ca.location": str(certs / "rogue.pem")})      # does not trust the broker
    assert client.authentication_errors or not selector.channels
    selector.close()
    selector, client, cluster = own_metadata(broker, "SSL", **{"ssl.ca.location": str(certs / "ca.pem")})
    assert cluster.nodes
    selector.close()


def test_confluent_kafka_produces_and_fetches_over_ssl_and_sasl_ssl(broker, certs):
    from confluent_kafka import Consumer, Producer
    for protocol, extra in (("SSL", {"ssl.certificate.location": str(certs / "alice.pem"),
                                     "ssl.key.location": str(certs / "alice.key")}),
                            ("SASL_SSL", {"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                          "sasl.password": "alice-secret"})):
        base = {"bootstrap.servers": f"127.0.0.1:{broker.bound_port(protocol)}", "security.protocol": protocol,
                "ssl.ca.location": str(certs / "ca.pem"), **extra}
        topic = f"tls-{protocol.lower()}"
        producer = Producer(base)
        values = [f"{protocol}-{i}".encode() * 50 for i in range(200)]     # > one TLS record per fetch
        for v in values:
            producer.produce(topic, v)
        assert producer.flush(15) == 0
        consumer = Consumer({**base, "group.id": f"g-{protocol}", "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": 50})
        consumer.subscribe([topic])
        got, deadline = [], time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert not msg.error(), msg.error()
                got.append(msg.value())
        consumer.close()
        assert got == values


def test_kafka_python_over_sasl_ssl(broker, certs):
    import kafka
    producer = kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.bound_port('SASL_SSL')}",
                                   security_protocol="SASL_SSL", ssl_cafile=str(certs / "ca.pem"),
                                   sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                   sasl_plain_password="alice-secret")
    assert producer.send("tls-kafka-python", b"v").get(timeout=15).offset == 0
    producer.close()


def test_kcat_over_ssl(broker, certs, kcat):
    for protocol, extra in (("SSL", []), ("SASL_SSL", ["-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice",
                                                       "-X", "sasl.password=alice-secret"])):
        run = subprocess.run([kcat, "-b", f"127.0.0.1:{broker.bound_port(protocol)}", "-L", "-m", "5",
                              "-X", f"security.protocol={protocol}", "-X", f"ssl.ca.location={certs / 'ca.pem'}",
                              *extra], capture_output=True, text=True, timeout=30)
        assert run.returncode == 0 and "1 brokers" in run.stdout, run.stderr
