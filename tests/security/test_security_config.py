"""The broker's 4.8 keys: declared with Kafka's defaults, validated, listener.name.* overrides known."""
from __future__ import annotations

import logging

import pytest

from kafka_edu.common.config import ConfigException
from kafka_edu.server.kafka_config import KafkaConfig


def test_defaults_and_typed_values():
    config = KafkaConfig({"sasl.server.max.receive.size": "1024", "ssl.key.password": "s3cret"})
    assert config["sasl.server.max.receive.size"] == 1024
    assert config["connection.failed.authentication.delay.ms"] == 100
    assert (config["ssl.keystore.type"], config["ssl.truststore.type"], config["ssl.client.auth"]) == \
        ("PEM", "PEM", "none")
    assert config["java.security.auth.login.config"] is None and config["ssl.keystore.location"] is None
    assert config["sasl.mechanism.inter.broker.protocol"] == "GSSAPI"
    assert repr(config["ssl.key.password"]) == "[hidden]" and config["ssl.key.password"] == "s3cret"


@pytest.mark.parametrize("bad", [{"ssl.client.auth": "sometimes"}, {"ssl.keystore.type": "JKS"},
                                 {"sasl.server.max.receive.size": "0"}])
def test_bad_values_fail_at_start_up(bad):
    with pytest.raises(ConfigException, match=next(iter(bad))):
        KafkaConfig(bad)


SASL_BETWEEN_BROKERS = {"listeners": "SASL_PLAINTEXT://:9093", "security.inter.broker.protocol": "SASL_PLAINTEXT"}


@pytest.mark.parametrize("props,message", [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.mechanism.inter.broker.protocol must be included in "
     "sasl.enabled.mechanisms when SASL is used for inter-broker communication"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
      "inter.broker.protocol.version": "0.9.0", "log.message.format.version": "0.9.0"},
     "Only GSSAPI mechanism is supported for inter-broker communication with SASL when "
     "inter.broker.protocol.version is set to 0.9.0"),
])
def test_the_inter_broker_sasl_mechanism_must_be_enabled_and_handshaken(props, message):
    with pytest.raises(ConfigException, match=message) as info:
        KafkaConfig({**SASL_BETWEEN_BROKERS, **props})
    assert info.value.name == "sasl.mechanism.inter.broker.protocol"


def test_an_enabled_inter_broker_sasl_mechanism_is_accepted():
    KafkaConfig({**SASL_BETWEEN_BROKERS, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                 "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    KafkaConfig({**SASL_BETWEEN_BROKERS, "inter.broker.protocol.version": "0.9.0",
                 "log.message.format.version": "0.9.0"})                 # GSSAPI needs no handshake


def test_listener_overrides_are_known_and_reach_the_channel_builders(caplog):
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";"
    with caplog.at_level(logging.WARNING):
        config = KafkaConfig({"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas, "no.such.key": "1"})
    assert [r.getMessage() for r in caplog.records] == [
        "The configuration no.such.key was supplied but isn't a known config."]
    chosen = config.security_configs()
    assert chosen["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == jaas
    assert chosen["sasl.server.max.receive.size"] == 524288 and "ssl.keystore.location" not in chosen
    assert "no.such.key" not in chosen and "log.dirs" not in chosen
