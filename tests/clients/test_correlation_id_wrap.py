"""The correlation id is an INT32 on the wire and wraps as Java's `correlation++` does, so a long-lived
client keeps sending after 2**31-1 requests. The counter is set near its end here instead of sending two
billion requests."""
import time

from scripted_broker import ScriptedBroker

from kafka_edu.clients.network_client import ManualMetadataUpdater, NetworkClient
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys


def now():
    return int(time.time() * 1000)


def test_requests_keep_working_past_int32_correlation_ids():
    broker = ScriptedBroker({ApiKeys.FIND_COORDINATOR: lambda h, b: {"error_code": 0, "node_id": 0,
                                                                     "host": "h", "port": 1}})
    client = NetworkClient(KSelector(), metadata_updater=ManualMetadataUpdater([broker.node]))
    try:
        deadline = time.monotonic() + 10
        while not client.ready(broker.node, now()):
            assert time.monotonic() < deadline
            client.poll(20, now())
        client._correlation = 2**31 - 3          # as after ~2.1 billion requests
        for _ in range(4):
            got = []
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                                  callback=got.append), now())
            while not got:
                assert time.monotonic() < deadline
                client.poll(20, now())
            assert not got[0].disconnected and got[0].body.node_id == 0
    finally:
        client.close()
        broker.close()
