"""A live SocketServer + handler pool with a scriptable test API, and a blocking test client."""
from __future__ import annotations

import struct
import threading
import time
from collections import Counter

from blocking_client import FrameConnection

from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.utils.time import SYSTEM_TIME, Time
from kafka_edu.server.api.request_handler import KafkaRequestHandlerPool
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.network.request_channel import Request, RequestChannel, Response
from kafka_edu.server.network.socket_server import SocketServer


class EchoApi:
    """Answers with correlation id + body. Bodies b"noop", b"close", b"raise" pick other actions.

    It records, per connection, how many requests it is running at once, so a test can prove the
    broker never hands it two requests of one connection concurrently.
    """

    def __init__(self, delay_s: float = 0.0, gate: threading.Event | None = None,
                 barrier: threading.Barrier | None = None):
        self.channel: RequestChannel | None = None
        self.delay_s, self.gate, self.barrier = delay_s, gate, barrier
        self._lock = threading.Lock()
        self._active: Counter[str] = Counter()
        self.max_active_per_connection = 0
        self.handled: list[tuple[str, int]] = []

    def __call__(self, request: Request) -> None:
        body = request.buffer[8:]
        with self._lock:
            self._active[request.connection_id] += 1
            self.max_active_per_connection = max(self.max_active_per_connection,
                                                 self._active[request.connection_id])
        try:
            if self.gate is not None:
                assert self.gate.wait(20), "gate never opened"
            if self.barrier is not None:
                self.barrier.wait(20)
            if self.delay_s:
                time.sleep(self.delay_s)
            if body == b"raise":
                raise RuntimeError("the test API was told to fail")
        finally:
            with self._lock:
                self._active[request.connection_id] -= 1
                self.handled.append((request.connection_id, request.correlation_id))
        if body == b"noop":
            self.channel.no_operation(request.processor, request)
        elif body == b"close":
            self.channel.close_connection(request.processor, request)
        else:
            self.channel.send_response(Response(request, NetworkSend(
                request.connection_id, [struct.pack(">i", request.correlation_id), body])))


class Broker:
    """SocketServer + KafkaRequestHandlerPool on loopback, as a context manager."""

    def __init__(self, api: EchoApi | None = None, time: Time = SYSTEM_TIME, **props):
        defaults = {"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 3, "num.io.threads": 4}
        self.config = KafkaConfig({**defaults, **props})
        self.api = api or EchoApi()
        self.server = SocketServer(self.config, time=time)
        self.api.channel = self.server.request_channel
        self.pool: KafkaRequestHandlerPool | None = None

    def __enter__(self) -> Broker:
        self.server.startup()
        self.pool = KafkaRequestHandlerPool(self.config["broker.id"], self.server.request_channel, self.api,
                                            self.config["num.io.threads"])
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.pool.shutdown()

    @property
    def port(self) -> int:
        return self.server.bound_port()

    def connect(self, protocol: str = "PLAINTEXT") -> Client:
        return Client(self.server.bound_port(protocol))

    def threads_alive(self) -> bool:
        threads = [*self.server.acceptors.values(), *self.server.processors, *self.pool.runnables]
        return all(t.is_alive() for t in threads)

    def connection_count(self) -> int:
        return sum(len(p.connection_ids()) for p in self.server.processors)


class Client(FrameConnection):
    """A blocking client speaking the size-prefixed request framing with raw bodies."""

    def send(self, correlation_id: int, body: bytes = b"", api_key: int = 18, api_version: int = 0) -> None:
        self.send_frame(struct.pack(">hhi", api_key, api_version, correlation_id) + body)

    def receive(self) -> tuple[int, bytes]:
        payload = self.receive_frame()
        return struct.unpack(">i", payload[:4])[0], payload[4:]

    def request(self, correlation_id: int, body: bytes = b"") -> tuple[int, bytes]:
        self.send(correlation_id, body)
        return self.receive()
