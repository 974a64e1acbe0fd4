"""SocketServer end to end: acceptance tests 1-5 of the chapter notes (§6), plus response actions."""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from network_harness import Broker, EchoApi
from external import wait_for

from kafka_edu.common.network.kafka_channel import WAIT_CREDITS, KafkaChannel
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.network.acceptor import BindError
from kafka_edu.common.network.channel_builders import SecurityConfigError
from kafka_edu.server.network.socket_server import SocketServer

BROKER_THREAD_PREFIXES = ("kafka-socket-acceptor-", "kafka-network-thread-", "kafka-request-handler-")


def broker_threads(besides: set[threading.Thread] = frozenset()) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(BROKER_THREAD_PREFIXES) and t not in besides]


@pytest.fixture(scope="module")
def others() -> set[threading.Thread]:
    """Broker threads alive before this module's first test: another module's broker (a session fixture
    of the Spark tests, run earlier on the same worker). Threads this module leaks are not among them."""
    return set(broker_threads())


# --- 1. threads and topology ------------------------------------------------------------------

def test_two_listeners_start_the_expected_threads_and_shutdown_joins_them(others):
    broker = Broker(listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                    **{"num.network.threads": 3, "num.io.threads": 8, "broker.id": 5,
                       "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                       'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="a";'})
    with broker:
        threads = broker_threads(others)
        acceptors = sorted(t.name for t in threads if t.name.startswith("kafka-socket-acceptor-"))
        assert [name.rsplit("-", 1)[0] for name in acceptors] == [
            "kafka-socket-acceptor-PLAINTEXT", "kafka-socket-acceptor-SASL_PLAINTEXT"]
        processors = {t.name for t in threads if t.name.startswith("kafka-network-thread-")}
        assert processors == {f"kafka-network-thread-5-PLAINTEXT-{i}" for i in range(3)} | {
            f"kafka-network-thread-5-SASL_PLAINTEXT-{i}" for i in range(3, 6)}
        assert [p.id for p in broker.server.acceptors["PLAINTEXT"].processors] == [0, 1, 2]
        assert [p.id for p in broker.server.acceptors["SASL_PLAINTEXT"].processors] == [3, 4, 5]
        handlers = [t for t in threads if t.name.startswith("kafka-request-handler-")]
        assert sorted(t.name for t in handlers) == sorted(f"kafka-request-handler-{i}" for i in range(8))
        assert all(t.daemon for t in handlers)
        client = broker.connect("PLAINTEXT")
        assert client.request(1, b"PLAINTEXT") == (1, b"PLAINTEXT")
        client.close()
        client = broker.connect("SASL_PLAINTEXT")      # 4.8: a request before authenticating closes it
        client.send_frame(b"\x00\x03\x00\x00\x00\x00\x00\x01\xff\xff")
        assert client.closed_by_peer(5)
        client.close()
    assert broker_threads(others) == []


# --- 2. round-robin ---------------------------------------------------------------------------

def test_six_connections_are_dealt_round_robin_to_three_processors():
    with Broker(**{"num.network.threads": 3}) as broker:
        clients = [broker.connect() for _ in range(6)]
        wait_for(lambda: broker.connection_count() == 6, what="6 registered connections")
        assert [len(p.connection_ids()) for p in broker.server.processors] == [2, 2, 2]
        for i, client in enumerate(clients):
            assert client.request(i, b"x") == (i, b"x")
            client.close()


# --- 3. per-IP quota --------------------------------------------------------------------------

def test_a_third_connection_from_one_address_is_closed():
    with Broker(**{"max.connections.per.ip": 2}) as broker:
        quotas = broker.server.connection_quotas
        first, second = broker.connect(), broker.connect()
        assert first.request(1, b"a") == (1, b"a")
        assert second.request(2, b"b") == (2, b"b")
        third = broker.connect()
        assert third.closed_by_peer()
        assert quotas.get("127.0.0.1") == 2
        assert first.request(3, b"still") == (3, b"still")
        assert second.request(4, b"fine") == (4, b"fine")

        first.close()
        wait_for(lambda: quotas.get("127.0.0.1") == 1, what="the closed connection to be released")
        fourth = broker.connect()
        assert fourth.request(5, b"new") == (5, b"new")
        assert quotas.get("127.0.0.1") == 2
        second.close()
        fourth.close()
        third.close()


def test_overrides_raise_the_limit_for_one_host():
    with Broker(**{"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "127.0.0.1:3"}) as broker:
        clients = [broker.connect() for _ in range(3)]
        for i, client in enumerate(clients):
            assert client.request(i) == (i, b"")
        extra = broker.connect()
        assert extra.closed_by_peer()
        for client in [*clients, extra]:
            client.close()


# --- 4. one request in flight per connection --------------------------------------------------

def test_pipelined_requests_are_handled_one_at_a_time_and_answered_in_order():
    api = EchoApi(delay_s=0.2)
    with Broker(api, **{"num.io.threads": 4}) as broker:
        client = broker.connect()
        for correlation_id in (1, 2, 3):
            client.send(correlation_id, f"r{correlation_id}".encode())
        assert [client.receive() for _ in range(3)] == [(1, b"r1"), (2, b"r2"), (3, b"r3")]
        assert api.max_active_per_connection == 1
        assert [c for _, c in api.handled] == [1, 2, 3]
        client.close()


def test_requests_on_separate_connections_are_handled_in_parallel():
    # Each request waits at a 3-party barrier: it can only pass if all three run at the same time.
    api = EchoApi(barrier=threading.Barrier(3))
    with Broker(api, **{"num.io.threads": 4}) as broker:
        clients = [broker.connect() for _ in range(3)]
        for i, client in enumerate(clients):
            client.send(i, b"together")
        assert [client.receive() for client in clients] == [(i, b"together") for i in range(3)]
        assert not api.barrier.broken
        for client in clients:
            client.close()


# --- 5. backpressure --------------------------------------------------------------------------

def test_a_full_request_queue_blocks_processors_without_losing_requests():
    gate = threading.Event()
    api = EchoApi(gate=gate)
    with Broker(api, **{"queued.max.requests": 1, "num.io.threads": 2, "num.network.threads": 3}) as broker:
        channel = broker.server.request_channel
        depths, sampling = [], threading.Event()

        def sample():
            while not sampling.is_set():
                depths.append(channel.request_queue_size())

        sampler = threading.Thread(target=sample)
        sampler.start()
        clients = [broker.connect() for _ in range(5)]
        for i, client in enumerate(clients):
            client.send(i, f"req{i}".encode())
        wait_for(lambda: sum(h.current is not None for h in broker.pool.runnables) == 2
                 and channel.request_queue_size() == 1, what="both handlers busy and the queue full")
        gate.set()
        answers = [client.receive() for client in clients]
        sampling.set()
        sampler.join()
        assert answers == [(i, f"req{i}".encode()) for i in range(5)]
        assert sorted(c for _, c in api.handled) == [0, 1, 2, 3, 4]
        assert max(depths) <= 1
        for client in clients:
            client.close()


# --- response actions -------------------------------------------------------------------------

def test_no_op_unmutes_so_the_next_request_is_read():
    with Broker() as broker:
        client = broker.connect()
        client.send(1, b"noop")
        assert client.request(2, b"after") == (2, b"after")
        client.close()


def test_close_action_and_a_failing_api_close_only_that_connection():
    with Broker() as broker:
        bystander = broker.connect()
        for body in (b"close", b"raise"):
            victim = broker.connect()
            victim.send(7, body)
            assert victim.closed_by_peer()
            victim.close()
            assert bystander.request(8, b"ok") == (8, b"ok")
        assert bystander.request(9, b"ok") == (9, b"ok")
        assert broker.threads_alive()
        bystander.close()


def test_a_response_for_a_vanished_connection_is_dropped():
    gate = threading.Event()
    with Broker(EchoApi(gate=gate)) as broker:
        leaver = broker.connect()
        leaver.send(1, b"late")
        wait_for(lambda: any(h.current is not None for h in broker.pool.runnables), what="request taken")
        leaver.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        leaver.close()                                   # reset: the broker may only notice on write
        gate.set()
        stayer = broker.connect()
        assert stayer.request(2, b"ok") == (2, b"ok")
        wait_for(lambda: broker.server.connection_quotas.get("127.0.0.1") == 1, what="leaver released")
        assert broker.threads_alive()
        stayer.close()


# --- Beyond 0.10: a begun frame is finished in one turn of the Processor ----------------------

def test_a_4_mb_request_and_its_4_mb_answer_each_take_one_turn(monkeypatch):
    turns = {"read": 0, "write": 0}
    for name in turns:
        original = getattr(KafkaChannel, name)

        def counted(self, wait_s=0.0, _original=original, _name=name):
            done = _original(self, wait_s)
            turns[_name] += done is None and (_name == "read" or self.has_send())
            return done
        monkeypatch.setattr(KafkaChannel, name, counted)
    body = os.urandom(4 << 20)
    with Broker(**{"num.network.threads": 1}) as broker:      # Kafka's 100 KiB socket buffers
        with broker.connect() as client:
            assert client.request(9, body) == (9, body)
    assert turns["read"] <= 3 and turns["write"] <= 3, turns   # some 30 without the waits


def test_a_client_stalling_mid_frame_costs_three_bounded_waits_then_none():
    frame = struct.pack(">ihhi", 8 + 100, 18, 0, 5) + b"s" * 100
    with Broker(**{"num.network.threads": 1}) as broker:
        processor = broker.server.processors[0]
        with broker.connect() as staller, broker.connect() as other:
            staller.sock.sendall(frame[:20])
            for i, byte in enumerate(frame[20:26]):            # a byte per turn, never the whole rest
                time.sleep(0.03)
                staller.sock.sendall(bytes([byte]))
                assert other.request(i, b"still served") == (i, b"still served")
            wait_for(lambda: sorted(processor.wait_credits().values()) == [0, WAIT_CREDITS],
                     what="the stalling connection's wait credits spent")
            staller.sock.sendall(frame[26:])
            assert staller.receive() == (5, b"s" * 100)             # nothing lost on the way
            assert broker.threads_alive()


# --- start-up errors --------------------------------------------------------------------------

def test_a_port_in_use_fails_startup_with_bind_error(port, others):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        server = SocketServer(KafkaConfig({"listeners": f"PLAINTEXT://127.0.0.1:{port}"}))
        with pytest.raises(BindError, match=f"127.0.0.1:{port}"):
            server.startup()
        server.shutdown()
    assert broker_threads(others) == []


def test_a_tls_listener_without_a_keystore_is_refused_naming_the_key():
    with pytest.raises(SecurityConfigError, match="ssl.keystore.location"):
        SocketServer(KafkaConfig({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL"}))


def test_an_unresolvable_override_host_is_a_clear_error():
    config = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                          "max.connections.per.ip.overrides": "no-such-host.invalid:5"})
    with pytest.raises(ValueError, match="max.connections.per.ip.overrides.*no-such-host.invalid"):
        SocketServer(config)


def test_processors_take_the_failed_authentication_delay_from_the_typed_config():
    """A properties-file string reaches every Processor as the int the config declares."""
    server = SocketServer(KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                                       "connection.failed.authentication.delay.ms": "250"}))
    server.startup()
    try:
        assert [p._failed_authentication_delay_ms for p in server.processors] == [250, 250]
    finally:
        server.shutdown()
