"""The broker configuration that ships inside the package: Kafka 0.10's config/server.properties
values on loopback and under ./data, on the embedded ZooKeeper, read when `server-start` is given no file."""
from __future__ import annotations

import pytest

from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.tools.process import DEFAULT_SERVER_PROPERTIES, server_properties


def test_the_packaged_default_is_kafkas_server_properties_on_the_embedded_zookeeper():
    config = KafkaConfig(server_properties(None))
    assert config["broker.id"] == 0
    assert [(e.protocol, e.host, e.port) for e in config.listeners] == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.log_dirs == ["./data/kafka-logs"]
    assert (config["num.partitions"], config["log.retention.hours"], config["log.segment.bytes"]) == (1, 168, 1 << 30)
    assert config["zookeeper.connect"] is None and "zookeeper.connect=" not in DEFAULT_SERVER_PROPERTIES


def test_a_named_file_replaces_the_default(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=7\nlog.dirs=./data\n")
    assert server_properties(str(path)) == {"broker.id": "7", "log.dirs": "./data"}
    with pytest.raises(OSError):
        server_properties(str(tmp_path / "missing.properties"))
