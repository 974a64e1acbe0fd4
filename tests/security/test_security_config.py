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
