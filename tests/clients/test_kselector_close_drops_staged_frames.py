"""KSelector.close(id) drops the frames it had already read for that connection: the NetworkClient
gave up on those requests (a timeout, a broken answer, close(node)), and their answers must not turn
up on the next poll, unmatched or matched against a new connection's requests."""
import time

from scripted_broker import ScriptedBroker

from kafka_edu.clients.network_client import ManualMetadataUpdater, NetworkClient
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.header import encode_response
from kafka_edu.common.utils.time import MockTime


def answer(header):
    return encode_response(header.correlation_id, ApiKeys.FIND_COORDINATOR, header.api_version,
                           {"error_code": 0, "node_id": 0, "host": "h", "port": 1})


def test_timed_out_connection_leaves_no_stale_frames():
    held = []

    def find_coordinator(header, body):      # hold the first two, answer all three at once
        held.append(header)
        if len(held) < 3:
            return None
        return b"".join(answer(h) for h in held)

    broker = ScriptedBroker({ApiKeys.FIND_COORDINATOR: find_coordinator})
    clock = MockTime(start_ms=10_000)
    client = NetworkClient(KSelector(time=clock), metadata_updater=ManualMetadataUpdater([broker.node]),
                           request_timeout_ms=5_000, time=clock)
    try:
        deadline = time.monotonic() + 10
        while not client.ready(broker.node, clock.milliseconds()):
            assert time.monotonic() < deadline
            client.poll(20, clock.milliseconds())
        got = []
        for _ in range(3):
            while not client.can_send_request("0"):
                assert time.monotonic() < deadline
                client.poll(0, clock.milliseconds())
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                                  callback=got.append), clock.milliseconds())
        while len(held) < 3:                   # written, without reading the answers yet
            assert time.monotonic() < deadline
            client.poll(0, clock.milliseconds()) if client.selector.channels["0"]._send is not None else None
            time.sleep(0.01)
        time.sleep(0.2)                        # all three answers are in the socket buffer
        clock.sleep(5_001)
        client.poll(0, clock.milliseconds())   # reads 3 frames, answers the 1st, times out the 2nd
        assert len(got) == 3 and [r.disconnected for r in got] == [False, True, True]
        assert "0" not in client.selector.channels
        # The connection is gone and its requests answered: the next polls have nothing to deliver.
        for _ in range(3):
            client.poll(0, clock.milliseconds())
    finally:
        client.close()
        broker.close()


def test_stale_frames_of_a_closed_connection_are_not_delivered_on_its_successor():
    """NetworkClient.close(node) then reconnect: the old connection's unread answers kill the new one."""
    held = []

    def find_coordinator(header, body):
        held.append(header)
        if len(held) < 2:
            return None
        return b"".join(answer(h) for h in held)

    broker = ScriptedBroker({ApiKeys.FIND_COORDINATOR: find_coordinator})
    client = NetworkClient(KSelector(), metadata_updater=ManualMetadataUpdater([broker.node]),
                           reconnect_backoff_ms=0)
    now = lambda: int(time.time() * 1000)
    try:
        deadline = time.monotonic() + 10
        while not client.ready(broker.node, now()):
            assert time.monotonic() < deadline
            client.poll(20, now())
        got = []
        for _ in range(2):
            while not client.can_send_request("0"):
                client.poll(0, now())
            client.send(client.new_client_request("0", ApiKeys.FIND_COORDINATOR, {"key": "g"},
                                                  callback=got.append), now())
        while len(held) < 2 or client.selector.channels["0"].has_send():
            assert time.monotonic() < deadline
            client.poll(0, now()) if client.selector.channels["0"].has_send() else time.sleep(0.01)
        time.sleep(0.2)
        client.poll(0, now())                  # reads both frames: one delivered, one staged
        assert len(got) == 1 and not got[0].disconnected
        client.close("0")                      # e.g. the caller gives up on this node
        assert client.in_flight_request_count("0") == 0
        # a new connection to the same node must work
        while not client.ready(broker.node, now()):
            assert time.monotonic() < deadline
            client.poll(20, now())
        assert broker.accepted == 2
    finally:
        client.close()
        broker.close()
