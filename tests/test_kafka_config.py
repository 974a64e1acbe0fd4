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
    assert KafkaConfig({"log.message.format.version": version}).message_format_magic == magic


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
