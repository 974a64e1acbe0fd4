"""ConsumerNetworkClient: a request that cannot be sent (the broker's ApiVersions rules the API out,
or its body cannot be encoded) fails its own future; it is neither lost nor raised out of poll() in
whichever thread happens to poll."""
import time

from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.clients.consumer.consumer_network_client import ConsumerNetworkClient
from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import NetworkClient
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors


def send_and_poll(broker: ScriptedBroker, api: ApiKeys, body: dict):
    """The future of one request sent through a fresh client, polled until it ends (or 3 s pass)."""
    broker.handlers[ApiKeys.METADATA] = metadata_answer([broker], {})
    metadata = Metadata()
    metadata.bootstrap([broker.address])
    client = ConsumerNetworkClient(NetworkClient(KSelector(), metadata), metadata)
    try:
        assert client.await_metadata_update(5_000)
        future = client.send(metadata.fetch().nodes[0], api, body)
        deadline = time.monotonic() + 3
        while not future.is_done() and time.monotonic() < deadline:
            client.poll(50)                     # raises if the failure escapes instead
        return future
    finally:
        client.close()
        broker.close()


def test_unsupported_api_fails_its_future():
    ranges = [r for r in ApiKeys.version_ranges() if r["api_key"] != ApiKeys.LIST_GROUPS]
    broker = ScriptedBroker({ApiKeys.API_VERSIONS: lambda h, b: {"error_code": 0, "api_keys": ranges}})
    future = send_and_poll(broker, ApiKeys.LIST_GROUPS, {})
    assert future.failed() and future.exception.error is Errors.UNSUPPORTED_VERSION


def test_unencodable_body_fails_its_future():
    """Committed metadata over 32767 bytes: the codec refuses the body."""
    future = send_and_poll(ScriptedBroker(), ApiKeys.OFFSET_COMMIT, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                 "committed_metadata": "x" * 40_000}]}]})
    assert future.failed()
