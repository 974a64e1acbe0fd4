"""Selector metrics after a known traffic pattern over real sockets: a client KSelector and broker Processors."""
import socket
import threading

import pytest

from kafka_edu.common.metrics.jmx_reporter import JmxReporter, MBeanServer
from kafka_edu.common.metrics.metrics import Metrics
from kafka_edu.common.metrics.stats import MetricConfig
from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.network.request_channel import Response
from kafka_edu.server.network.socket_server import SocketServer

CONFIG = MetricConfig(samples=2, time_window_ms=30_000)
GROUP = "test-client-metrics"
TAGS = {"client-id": "t"}


def echo_server():
    """Answers every frame with a frame twice as long (the payload repeated)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn):
        with conn:
            while len(header := conn.recv(4, socket.MSG_WAITALL)) == 4:
                payload = conn.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)
                conn.sendall((2 * len(payload)).to_bytes(4, "big") + payload * 2)

    def accept_loop():
        with listener:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()
    return listener


def value(metrics, name, group=GROUP, tags=TAGS):
    return metrics.metric(metrics.metric_name(name, group, tags=tags)).value()


def poll_until(selector, condition, rounds=1000):
    """Poll, then ask `condition` about that poll's lists, until it holds."""
    for _ in range(rounds):
        selector.poll(50)
        if condition():
            return
    raise AssertionError("condition not reached")


def test_client_selector_metrics_after_known_traffic():
    clock = MockTime(start_ms=1_000_000)
    metrics = Metrics(CONFIG, time=clock)
    listener = echo_server()
    selector = KSelector(time=clock, metrics=metrics, metric_group_prefix="test-client", metric_tags=TAGS)
    try:
        address = listener.getsockname()
        for node in ("1", "2"):
            selector.connect(node, address)
        connected = []
        poll_until(selector, lambda: connected.extend(selector.connected) or len(connected) == 2)
        sizes = {"1": [10, 30, 50], "2": [100]}            # payload bytes; the frame adds 4
        for node, payloads in sizes.items():
            for size in payloads:
                selector.send(NetworkSend(node, bytes(size)))
                received = []
                poll_until(selector, lambda received=received: received.extend(selector.completed_receives) or received)
        clock.sleep(10_000)
        window_s = 10 + 30                                 # young window: padded by one full window
        assert value(metrics, "connection-count") == 2
        assert value(metrics, "connection-creation-rate") == pytest.approx(2 / window_s)
        assert value(metrics, "request-rate") == pytest.approx(4 / window_s)
        assert value(metrics, "response-rate") == pytest.approx(4 / window_s)
        assert value(metrics, "network-io-rate") == pytest.approx(8 / window_s)
        assert value(metrics, "outgoing-byte-rate") == pytest.approx((14 + 34 + 54 + 104) / window_s)
        assert value(metrics, "incoming-byte-rate") == pytest.approx((24 + 64 + 104 + 204) / window_s)
        assert value(metrics, "request-size-avg") == pytest.approx((14 + 34 + 54 + 104) / 4)
        assert value(metrics, "request-size-max") == 104
        node_tags = {**TAGS, "node-id": "node-1"}
        assert value(metrics, "request-rate", "test-client-node-metrics", node_tags) == pytest.approx(3 / window_s)
        assert value(metrics, "request-size-max", "test-client-node-metrics", node_tags) == 54
        polls = value(metrics, "select-rate") * window_s
        assert polls >= 6                                  # at least one poll per connect and per answer
        selector.close("2")
        assert value(metrics, "connection-count") == 1
        assert value(metrics, "connection-close-rate") == pytest.approx(1 / 30)   # its first sample starts now
    finally:
        selector.close()
        listener.close()
    assert [n.name for n in metrics.metrics()] == ["count"]     # close() removed the selector's metrics


def test_selector_without_metrics_has_no_sensors():
    selector = KSelector()
    try:
        assert selector._sensors is None
        selector.poll(0)
    finally:
        selector.close()


def test_io_wait_ratio_on_an_idle_selector_is_close_to_one():
    metrics = Metrics(CONFIG)
    selector = KSelector(metrics=metrics, metric_group_prefix="idle", metric_tags={})
    try:
        for _ in range(5):
            selector.poll(20)
        wait = metrics.metric(metrics.metric_name("io-wait-ratio", "idle-metrics")).value()
        io = metrics.metric(metrics.metric_name("io-ratio", "idle-metrics")).value()
        avg_wait_ns = metrics.metric(metrics.metric_name("io-wait-time-ns-avg", "idle-metrics")).value()
        assert avg_wait_ns >= 15_000_000                  # each poll waited about 20 ms
        assert 0 < wait and io < wait
    finally:
        selector.close()


def test_processor_metrics_and_jmx_beans():
    jmx = MBeanServer()
    metrics = Metrics(CONFIG, reporters=[JmxReporter("kafka.server", jmx)])
    server = SocketServer(KafkaConfig({"broker.id": 3, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused",
                                       "num.network.threads": 2}), metrics=metrics)
    server.startup()
    stop = threading.Event()

    def answer():
        while not stop.is_set():
            request = server.request_channel.receive_request(timeout_ms=20)
            if request is not None:
                server.request_channel.send_response(Response(request, NetworkSend(request.connection_id, b"ok")))

    handler = threading.Thread(target=answer, daemon=True)
    handler.start()
    beans = [f"kafka.server:type=socket-server-metrics,networkProcessor={i}" for i in (0, 1)]
    try:
        assert jmx.query_names("kafka.server:type=socket-server-metrics,*") == beans
        with socket.create_connection(("127.0.0.1", server.bound_port())) as conn:
            for correlation_id in range(7):
                conn.sendall((10).to_bytes(4, "big") + bytes(2 + 2) + correlation_id.to_bytes(4, "big") + b"xy")
                assert conn.recv(6, socket.MSG_WAITALL) == (2).to_bytes(4, "big") + b"ok"
            attributes = [jmx.get_attributes(b) for b in beans]
            busy = next(a for a in attributes if a["connection-count"] == 1)
            idle = next(a for a in attributes if a["connection-count"] == 0)
            # each rate divides by the window's age when it is read, and the two reads are a moment apart
            assert busy["incoming-byte-rate"] / busy["response-rate"] == pytest.approx(14, rel=0.01)
            assert busy["request-size-max"] == 6 and busy["request-size-avg"] == 6
            assert busy["outgoing-byte-rate"] / busy["request-rate"] == pytest.approx(6, rel=0.01)
            assert busy["connection-creation-rate"] > 0 and idle["response-rate"] == 0
            assert {"io-wait-ratio", "io-ratio", "select-rate", "network-io-rate"} <= set(busy)
    finally:
        stop.set()
        handler.join()
        server.shutdown()
    assert jmx.query_names("kafka.server:type=socket-server-metrics,*") == []
