"""A cluster whose only listener is secured (4.8): the brokers replicate, elect and run their controller
over SASL_PLAINTEXT with PLAIN (and over SSL), logged in with their own credentials as Kafka's brokers
are; records acknowledged with acks=all survive the loss of their leader."""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest
from external import require

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.clients.producer.kafka_producer import KafkaProducer
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.network.channel_builders import SecurityConfigError
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "security"))
from _certs import make_certs  # noqa: E402

BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"
LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
BROKER_LOGIN = f'{LOGIN} username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
SASL = {"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": BROKER_LOGIN}
ALICE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"}


def leader_of(cluster, topic: str) -> int:
    return cluster.partition_state(topic, 0).leader_and_isr.leader


def produce_all(bootstrap: str, client: dict, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", "key.serializer": BYTES,
                              "value.serializer": BYTES, "max.block.ms": 20_000, "request.timeout.ms": 20_000,
                              **client})
    try:
        offsets = [f.get(30).offset for f in [producer.send(topic, value, partition=0) for value in values]]
        assert offsets == list(range(offsets[0], offsets[0] + len(values)))
    finally:
        producer.close()


def consume_all(bootstrap: str, client: dict, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **client})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values, deadline = [], time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(200).get(TopicPartition(topic, 0), [])]
        return values
    finally:
        consumer.close()


def replicate_and_survive_a_leader_kill(cluster, client: dict, topic: str) -> None:
    """RF 3 topic, acks=all records on every replica, leader killed, more records, all read back."""
    with ClusterAdmin(cluster.bootstrap_servers, configs=client, request_timeout_ms=20_000) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 3)]) == {topic: None}
    cluster.wait_until(lambda: len(cluster.partition_state(topic, 0).leader_and_isr.isr) == 3, 30, "an ISR of three")
    produce_all(cluster.bootstrap_servers, client, topic, [b"a", b"b", b"c"])
    for broker_id in range(3):                          # acks=all: every replica holds them before the answer
        assert cluster.broker(broker_id).replica_manager.get_partition((topic, 0)).local_replica.log_end_offset == 3
    first = leader_of(cluster, topic)
    cluster.kill(first)
    cluster.wait_until(lambda: leader_of(cluster, topic) not in (first, -1), 30, "a new leader")
    produce_all(cluster.bootstrap_servers, client, topic, [b"d", b"e"])
    assert consume_all(cluster.bootstrap_servers, client, topic, 5) == [b"a", b"b", b"c", b"d", b"e"]


def test_sasl_plaintext_only_cluster_replicates_and_elects_over_sasl(make_cluster):
    cluster = make_cluster(3, protocol="SASL_PLAINTEXT", **SASL)
    for broker_id in range(3):
        assert cluster.config(broker_id)["listeners"].startswith("SASL_PLAINTEXT://")
    replicate_and_survive_a_leader_kill(cluster, ALICE, "secured")
    principals = {p for b in cluster.live_brokers for proc in cluster.broker(b).socket_server.processors
                  for p in proc.principals().values()}
    assert "User:admin" in principals and "User:ANONYMOUS" not in principals   # fetchers and controller logged in


def test_ssl_only_cluster_replicates_and_elects_over_tls(make_cluster, tmp_path):
    require(shutil.which("openssl") is not None, "the openssl CLI is not installed")
    certs = make_certs(tmp_path)
    cluster = make_cluster(3, protocol="SSL", **{"ssl.keystore.location": str(certs / "broker-keystore.pem"),
                                                 "ssl.truststore.location": str(certs / "ca.pem")})
    replicate_and_survive_a_leader_kill(cluster, {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")},
                                        "tls")


def test_a_broker_without_inter_broker_credentials_refuses_to_start(tmp_path):
    config = KafkaConfig({"broker.id": 0, "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                          "security.inter.broker.protocol": "SASL_PLAINTEXT", **SASL,
                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{LOGIN} user_admin="admin-secret";'},
                         warn_unknown=False)
    with pytest.raises(SecurityConfigError, match="username and password"):
        KafkaServer(config, embedded_zookeeper=EmbeddedZooKeeper()).startup()
