"""An in-process broker on a free port and a blocking client speaking our protocol codec."""
from __future__ import annotations

from blocking_client import CodecConnection

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.server.replica.replica_manager import halt_process
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper

BROKER_DEFAULTS = {"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                   "num.io.threads": 4, "log.cleaner.enable": "false"}


def start_broker(log_dir, zookeeper: EmbeddedZooKeeper | None = None, *, halt=halt_process, **props) -> KafkaServer:
    """A started KafkaServer with its own embedded ZooKeeper (unless one is given); `halt` replaces
    the replica manager's os._exit (4.5.1)."""
    config = KafkaConfig({**BROKER_DEFAULTS, "log.dirs": str(log_dir), **props})
    server = KafkaServer(config, embedded_zookeeper=zookeeper or EmbeddedZooKeeper(), halt=halt)
    server.startup()
    return server


def records(*values, magic: int = 2, compression: CompressionType = CompressionType.NONE, timestamp: int = 1000,
            base_offset: int = 0, keys=None, **producer) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression=compression, base_offset=base_offset, **producer)
    for i, value in enumerate(values):
        builder.append(timestamp if isinstance(timestamp, int) else timestamp[i], keys[i] if keys else None, value)
    return bytes(builder.build())


def values_of(data: bytes) -> list[bytes]:
    return [r.value for r in MemoryRecords(data).records()]


class BrokerClient(CodecConnection):
    """One blocking connection to a broker on this host, with a method per request the tests use."""

    # --- conveniences -------------------------------------------------------------------------
    def metadata(self, topics, version: int = 5, **extra):
        body = {"topics": None if topics is None else [{"name": t} for t in topics], **extra}
        return self.call(ApiKeys.METADATA, version, body)

    def produce(self, topic: str, partition: int, data: bytes, version: int = 7, acks: int = 1,
                timeout_ms: int = 5000, transactional_id=None):
        body = {"acks": acks, "timeout_ms": timeout_ms, "transactional_id": transactional_id,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}]}
        response = self.call(ApiKeys.PRODUCE, version, body)
        return response.responses[0].partition_responses[0]

    def fetch_body(self, topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 1,
                   max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, replica_id: int = -1, **extra):
        return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                            "partition_max_bytes": partition_max_bytes}]}], **extra}

    def fetch(self, topic: str, partition: int, offset: int, version: int = 11, **kwargs):
        response = self.call(ApiKeys.FETCH, version, self.fetch_body(topic, partition, offset, **kwargs))
        return response.responses[0].partitions[0]

    def list_offset(self, topic: str, partition: int, timestamp: int, version: int = 5, **extra):
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp, **extra}]}]}
        return self.call(ApiKeys.LIST_OFFSETS, version, body).topics[0].partitions[0]

    def create_topics(self, topics: list[dict], version: int = 4, timeout_ms: int = 10_000, validate_only=False):
        body = {"topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only}
        return {t.name: t for t in self.call(ApiKeys.CREATE_TOPICS, version, body).topics}

    def create_topic(self, name: str, partitions: int = 1, **config) -> None:
        result = self.create_topics([{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                      "configs": [{"name": k.replace("_", "."), "value": str(v)}
                                                  for k, v in config.items()]}])[name]
        assert result.error_code == 0, result
