import re

import pytest

from kafka_edu.common.config import ConfigException
from kafka_edu.server.kafka_config import EndPoint, KafkaConfig


def test_zero_ten_defaults():
    c = KafkaConfig({})
    assert c["num.network.threads"] == 3 and c["num.io.threads"] == 8
    assert c["queued.max.requests"] == 500 and c["socket.request.max.bytes"] == 104857600
    assert c["log.segment.bytes"] == 1073741824 and c["log.index.interval.bytes"] == 4096
    assert c["group.max.session.timeout.ms"] == 300000 and c["delete.topic.enable"] is False
    assert c.listeners == [EndPoint("PLAINTEXT", "", 9092)]
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.log_retention_ms == 168 * 3_600_000
    assert c.zookeeper_connection_timeout_ms == 6000


def test_retention_precedence():
    assert KafkaConfig({"log.retention.hours": "1"}).log_retention_ms == 3_600_000
    assert KafkaConfig({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms == 120_000
    assert KafkaConfig({"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_ms == 5


@pytest.mark.parametrize("version,magic", [("0.9.0", 0), ("0.10.0", 1), ("0.10.2-IV0", 1), ("0.11.0", 2), ("2.8", 2)])
def test_message_format_magic(version, magic):
    # a format may not be newer than the protocol brokers speak to each other
    config = KafkaConfig({"log.message.format.version": version, "inter.broker.protocol.version": version})
    assert config.message_format_magic == magic


@pytest.mark.parametrize("props,key", [
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners"),
    ({"listeners": "HTTP://:80"}, "listeners"),
    ({"listeners": "PLAINTEXT://:99999"}, "listeners"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"log.message.format.version": "0.7"}, "log.message.format.version"),
    ({"max.connections.per.ip.overrides": "nohost"}, "max.connections.per.ip.overrides"),
])
def test_bad_values_fail_naming_the_key(props, key):
    with pytest.raises(ConfigException) as info:
        c = KafkaConfig(props)
        c.max_connections_per_ip_overrides()
    assert info.value.name == key


def test_from_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=7\nlog.dirs=/a,/b\nzookeeper.connect=127.0.0.1:2181/kafka\n")
    c = KafkaConfig.from_file(path)
    assert c["broker.id"] == 7 and c.log_dirs == ["/a", "/b"]
    assert c["zookeeper.connect"] == "127.0.0.1:2181/kafka"


@pytest.mark.parametrize("props,key,message", [
    ({"broker.id": "1001"}, "broker.id",
     "broker.id must be equal or greater than -1 and not greater than reserved.broker.max.id"),
    ({"broker.id": "-2"}, "broker.id",
     "broker.id must be equal or greater than -1 and not greater than reserved.broker.max.id"),
    ({"broker.id": "-1", "broker.id.generation.enable": "false"}, "broker.id",
     "broker.id must be equal or greater than 0"),
    ({"log.roll.ms": "0"}, "log.roll.ms", "log.roll.ms must be equal or greater than 1"),
    ({"log.roll.jitter.ms": "-1"}, "log.roll.jitter.ms", "log.roll.jitter.ms must be equal or greater than 0"),
    ({"log.retention.minutes": "0"}, "log.retention.ms",
     "log.retention.ms must be unlimited (-1) or, equal or greater than 1"),
    ({"log.dirs": " , "}, "log.dirs", "At least one log directory must be defined via log.dirs or log.dir."),
    ({"log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": str(2 << 20)}, "log.cleaner.dedupe.buffer.size",
     "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."),
    ({"replica.fetch.wait.max.ms": "5000", "replica.socket.timeout.ms": "1000"}, "replica.fetch.wait.max.ms",
     "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"
     " to prevent unnecessary socket timeouts"),
    ({"replica.fetch.wait.max.ms": "10001"}, "replica.fetch.wait.max.ms",
     "replica.fetch.wait.max.ms should always be less than or equal to replica.lag.time.max.ms"),
    ({"listeners": "SSL://:9093"}, "security.inter.broker.protocol",
     "security.inter.broker.protocol must be a protocol in the configured set of advertised.listeners. "
     "The valid options based on currently configured protocols are SSL"),
    ({"advertised.listeners": "PLAINTEXT://h:9092,SSL://h:9093"}, "advertised.listeners",
     "advertised.listeners protocols must be equal to or a subset of listeners protocols. Found PLAINTEXT,SSL."),
    ({"inter.broker.protocol.version": "0.10.0"}, "log.message.format.version",
     "log.message.format.version 0.11.0 cannot be used when inter.broker.protocol.version is set to 0.10.0"),
    ({"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.10.1"}, "log.message.format.version",
     "log.message.format.version 0.10.1 cannot be used when inter.broker.protocol.version is set to 0.10.0"),
])
def test_keys_that_do_not_fit_together_fail_with_kafkas_message(props, key, message):
    with pytest.raises(ConfigException, match=re.escape(message)) as info:
        KafkaConfig(props)
    assert info.value.name == key


@pytest.mark.parametrize("props", [
    {"broker.id": "1000"}, {"broker.id": "-1"}, {"broker.id": "0", "broker.id.generation.enable": "false"},
    {"replica.fetch.wait.max.ms": "10000", "replica.lag.time.max.ms": "10000"},      # equal is allowed
    {"replica.fetch.wait.max.ms": "30000", "replica.lag.time.max.ms": "60000"},      # = replica.socket.timeout.ms
    {"log.cleaner.threads": "0", "log.cleaner.dedupe.buffer.size": "0"},              # no cleaner, no offset map
    {"listeners": "PLAINTEXT://:9092,SSL://:9093", "advertised.listeners": "SSL://h:9093",
     "security.inter.broker.protocol": "SSL"},
    {"inter.broker.protocol.version": "0.10.0", "log.message.format.version": "0.9.0"},
    {"inter.broker.protocol.version": "2.8", "log.message.format.version": "2.8.1"},  # both 2.8 to Kafka
])
def test_keys_that_fit_together_are_accepted(props):
    KafkaConfig(props)


def test_a_negative_retention_in_any_unit_is_unlimited():
    assert KafkaConfig({"log.retention.hours": "-1"}).log_retention_ms == -1
    assert KafkaConfig({"log.retention.ms": "-5", "log.retention.hours": "1"}).log_retention_ms == -1
