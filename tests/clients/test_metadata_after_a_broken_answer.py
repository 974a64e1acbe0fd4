"""A metadata response that cannot be parsed (a wrong correlation id, an undecodable body) closes the
connection and must release the metadata updater like a disconnection does; otherwise fetch_in_progress
stays set and metadata is never fetched again."""
import time

import pytest
from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.clients.metadata import Metadata
from kafka_edu.clients.network_client import CorrelationIdMismatchError, NetworkClient
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.header import encode_response
from kafka_edu.common.protocol.types import ProtocolError


def now():
    return int(time.time() * 1000)


@pytest.mark.parametrize("bad", ["correlation", "garbage"])
def test_metadata_fetch_resumes_after_a_bad_metadata_response(bad):
    broker = ScriptedBroker(node_id=0)
    good = metadata_answer([broker], {"events": 1})
    answered = []

    def metadata(header, body):
        answered.append(header)
        if len(answered) == 1:
            if bad == "correlation":
                return encode_response(header.correlation_id + 1, ApiKeys.METADATA, header.api_version,
                                       good(header, body))
            payload = header.correlation_id.to_bytes(4, "big") + b"\x00\x01"   # header, then a torn body
            return len(payload).to_bytes(4, "big") + payload
        return good(header, body)

    broker.handlers[ApiKeys.METADATA] = metadata
    md = Metadata(refresh_backoff_ms=10)
    md.bootstrap([broker.address])
    client = NetworkClient(KSelector(), md, reconnect_backoff_ms=10)
    try:
        deadline = time.monotonic() + 5
        raised = []
        while md.fetch().is_bootstrap and time.monotonic() < deadline:
            try:
                client.poll(50, now())
            except (CorrelationIdMismatchError, ProtocolError) as exc:
                raised.append(exc)
        assert raised, "the first (bad) metadata answer should raise once"
        assert not client.metadata_updater.fetch_in_progress, "the failed metadata fetch is still 'in progress'"
        assert not md.fetch().is_bootstrap and len(answered) >= 2
    finally:
        client.close()
        broker.close()
