"""Decode with our schemas the first request frames that real clients send to a plain socket.

A scripted fake broker accepts connections and decodes every request frame with
`kafka_edu.common.protocol`. It answers just enough for the clients to finish a metadata round:
ApiVersions at a flexible version (v3/v4, which we do not serve) gets the KIP-511 fallback, an
ApiVersions v0 response with error 35 and our version ranges; ApiVersions v0-2 gets a proper
answer; Metadata gets a one-broker cluster with one topic. Anything else closes the connection.
"""
from __future__ import annotations

import importlib
import socket
import subprocess
import threading
from dataclasses import dataclass

import pytest
from external import require

from kafka_edu.common.protocol.api_keys import ApiKeys, UnsupportedVersionError
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import RequestHeader, decode_request, encode_response
from kafka_edu.common.protocol.types import COMPACT_STRING, INT32, ProtocolError

TOPIC = "events"
PARTITIONS = 2


@dataclass
class Received:
    connection: int
    header: RequestHeader
    body: object | None          # the decoded Struct, None when the version is one we do not serve
    software: tuple[str, str] | None = None   # ApiVersions v3+: client software name and version


class FakeBroker:
    """A listening socket on loopback with one thread per connection; records every decoded request."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[Received] = []
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        n = 0
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn, n), daemon=True).start()
            n += 1

    @staticmethod
    def _read_exactly(conn, n):
        data = bytearray()
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def _serve(self, conn, n):
        try:
            while True:
                size = INT32.read(self._read_exactly(conn, 4))
                frame = self._read_exactly(conn, size)
                reply = self._handle(n, frame)
                if reply is None:
                    return
                conn.sendall(reply)
        except (ConnectionError, OSError):
            return
        except ProtocolError as e:
            with self.lock:
                self.failures.append(f"connection {n}: {e}")
        finally:
            conn.close()

    def _handle(self, n, frame):
        try:
            header, body = decode_request(frame)
            software = None
        except UnsupportedVersionError as e:
            if e.header is None or e.header.api_key != ApiKeys.API_VERSIONS:
                raise
            header, body = e.header, None
            _, pos = RequestHeader.read_from(frame)
            name, pos = COMPACT_STRING.read_from(frame, pos)
            software = (name, COMPACT_STRING.read_from(frame, pos)[0])
        with self.lock:
            self.received.append(Received(n, header, body, software))
        if header.api_key == ApiKeys.API_VERSIONS:
            if body is None:   # KIP-511: answer in v0, which every client can read
                return encode_response(header.correlation_id, ApiKeys.API_VERSIONS, 0,
                                       {"error_code": Errors.UNSUPPORTED_VERSION.code,
                                        "api_keys": ApiKeys.version_ranges()})
            return encode_response(header.correlation_id, ApiKeys.API_VERSIONS, header.api_version,
                                   {"error_code": 0, "api_keys": ApiKeys.version_ranges()})
        if header.api_key == ApiKeys.METADATA:
            return encode_response(header.correlation_id, ApiKeys.METADATA, header.api_version, self.metadata(body))
        return None

    def metadata(self, request) -> dict:
        if request.topics is None or (not request.topics and request.schema is ApiKeys.METADATA.request_schema(0)):
            wanted = [TOPIC]            # null (v1+) or an empty list in v0: every topic
        else:
            wanted = [t.name for t in request.topics]   # an empty list in v1+: brokers only
        return {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "kafka-edu-fake", "controller_id": 1,
                "topics": [{"error_code": 0, "name": name, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": [1], "isr_nodes": [1]} for p in range(PARTITIONS)]} for name in wanted]}

    def requests(self, api: ApiKeys) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.header.api_key == api]

    def close(self):
        self.server.close()
        with self.lock:
            for conn in self.connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()


def client_library(name: str):
    """Import a real client library; missing, it skips locally and fails in CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        require(False, f"{name} is not installed (pip install -e '.[dev]')")


@pytest.fixture
def broker():
    fake = FakeBroker()
    yield fake
    fake.close()
    assert not fake.failures, fake.failures


def check_negotiation(broker: FakeBroker, client_id: str, software: str):
    """The first frame is a flexible ApiVersions; after error 35 the client retries with one we serve."""
    first = [r for r in broker.received if r.connection == 0]
    head = first[0]
    assert head.header.api_key == ApiKeys.API_VERSIONS and head.header.api_version >= 3
    assert head.header.header_version == 2 and head.header.client_id == client_id
    assert head.body is None and head.software[0] == software
    retry = first[1]
    assert retry.header.api_key == ApiKeys.API_VERSIONS and retry.header.api_version <= 2
    assert retry.header.correlation_id != head.header.correlation_id
    assert retry.body == {}           # ApiVersions v0-2 requests have no fields
    return head, retry


@pytest.mark.kcat
def test_kcat_metadata_listing(broker, kcat):
    out = subprocess.run([kcat, "-b", f"127.0.0.1:{broker.port}", "-L", "-m", "3", "-X", "client.id=kcat-h1"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    head, retry = check_negotiation(broker, "kcat-h1", "librdkafka")
    metadata = broker.requests(ApiKeys.METADATA)
    assert metadata and all(m.header.client_id == "kcat-h1" for m in metadata)
    assert all(m.header.api_version <= ApiKeys.METADATA.max_version for m in metadata)
    assert metadata[0].body.topics == []     # librdkafka first asks for brokers only
    assert any(m.body.topics is None for m in metadata)   # then -L asks for every topic
    assert f'topic "{TOPIC}" with {PARTITIONS} partitions' in out.stdout
    assert f"broker 1 at 127.0.0.1:{broker.port}" in out.stdout
    print(f"kcat: {head.header} software={head.software}; retry v{retry.header.api_version}; "
          f"metadata v{metadata[0].header.api_version}")


def test_confluent_kafka_admin_list_topics(broker):
    confluent_kafka = client_library("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}", "client.id": "ck-h1"})
    everything = admin.list_topics(timeout=15)
    assert set(everything.topics) == {TOPIC} and everything.cluster_id == "kafka-edu-fake"
    one = admin.list_topics(topic="orders", timeout=15)
    assert len(one.topics["orders"].partitions) == PARTITIONS
    head, retry = check_negotiation(broker, "ck-h1", "confluent-kafka-python")
    asked = [m.body.topics for m in broker.requests(ApiKeys.METADATA)]
    assert None in asked and [{"name": "orders"}] in [[t.to_dict() for t in a] for a in asked if a]
    print(f"confluent-kafka {confluent_kafka.version()}: {head.header} software={head.software}; "
          f"retry v{retry.header.api_version}; metadata versions "
          f"{sorted({m.header.api_version for m in broker.requests(ApiKeys.METADATA)})}")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_kafka_python_topics(broker):
    kafka = client_library("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}", client_id="kp-h1",
                                   request_timeout_ms=10_000)
    try:
        topics = consumer.topics()
    finally:
        consumer.close()
    assert topics == {TOPIC}
    head, retry = check_negotiation(broker, "kp-h1", "kafka-python")
    metadata = broker.requests(ApiKeys.METADATA)
    assert metadata and all(m.header.client_id == "kp-h1" for m in metadata)
    assert metadata[0].body.topics == [] and any(m.body.topics is None for m in metadata)
    print(f"kafka-python {kafka.__version__}: {head.header} software={head.software}; "
          f"retry v{retry.header.api_version}; metadata v{metadata[0].header.api_version} {metadata[0].body}")


