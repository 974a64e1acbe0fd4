"""What the book's thread structure costs per request in CPython, before any request is handled.

Issue 13 asks for at most 25% of a core at 1,000 records/s sent one per request. With a consumer
waiting on the log, each record is two requests (the Produce, and the Fetch it completes), so the
budget is 125 us of CPU per request, everything included. This benchmark measures the floor under
that budget: a client sends a 100-byte request, waits for the answer and sleeps 1 ms (so every
thread is asleep when the next request comes, as at 1,000 requests/s), and the server's process CPU
(user + system, less the client thread's own) is divided by the requests. Five servers, one run:

- inline: one selector thread reads each request and writes its answer (no hand-off at all);
- one hop: a selector thread reads, a handler thread (one of eight, on a queue) writes the answer;
- two hops: the Processor / handler / Processor round trip of 4.1, stripped to its skeleton: the
  handler queues the answer and wakes the selector thread through a socket pair, as RequestChannel does;
- SocketServer: kafka-edu's own Acceptor, Processors and RequestChannel, with eight handler threads
  that answer at once (no KafkaApis), without metrics and with them.

The ratio printed for each is its cost over the two-hop skeleton's. What the skeleton costs, times
2,000 requests/s, is the share of a core the structure needs with no work done.

    python benchmarks/request_floor.py [--requests 2000]
"""
from __future__ import annotations

import argparse
import queue
import resource
import selectors
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from _summary import report  # noqa: E402
from kafka_edu.common.metrics.metrics import MetricConfig, Metrics  # noqa: E402
from kafka_edu.common.network.network_send import NetworkSend  # noqa: E402
from kafka_edu.server.kafka_config import KafkaConfig  # noqa: E402
from kafka_edu.server.network.request_channel import Response  # noqa: E402
from kafka_edu.server.network.socket_server import SocketServer  # noqa: E402

HANDLERS = 8
ANSWER = b"ok" * 50


def server_cpu_per_request(address: tuple[str, int], frame: bytes, answer_size: int, requests: int) -> float:
    """Microseconds of this process's CPU per request, less the calling (client) thread's."""
    with socket.create_connection(address) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(50):                                   # warm up connection and threads
            conn.sendall(frame)
            conn.recv(answer_size, socket.MSG_WAITALL)
        usage, client = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
        for _ in range(requests):
            conn.sendall(frame)
            conn.recv(answer_size, socket.MSG_WAITALL)
            time.sleep(0.001)
        client = time.thread_time() - client
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime - client
    return cpu / requests * 1e6


def skeleton(hops: int, requests: int) -> float:
    """The bare structure: 0 hops (inline), 1 (handler answers), 2 (handler queues, selector answers)."""
    listener = socket.create_server(("127.0.0.1", 0))
    selector = selectors.DefaultSelector()
    wake_reader, wake_writer = socket.socketpair()
    for sock in (wake_reader, wake_writer):
        sock.setblocking(False)
    selector.register(wake_reader, selectors.EVENT_READ, "wakeup")
    selector.register(listener, selectors.EVENT_READ, "accept")
    requests_queue: queue.SimpleQueue = queue.SimpleQueue()
    answers: queue.SimpleQueue = queue.SimpleQueue()
    running = True

    def selector_thread() -> None:
        while running:
            for key, _ in selector.select(0.3):
                if key.data == "accept":
                    conn, _ = listener.accept()
                    conn.setblocking(False)
                    selector.register(conn, selectors.EVENT_READ, conn)
                elif key.data == "wakeup":
                    while True:
                        try:
                            wake_reader.recv(4096)
                        except BlockingIOError:
                            break
                    while not answers.empty():
                        conn, data = answers.get_nowait()
                        conn.send(data)
                else:
                    try:
                        data = key.data.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        selector.unregister(key.data)
                        key.data.close()
                    elif hops == 0:
                        key.data.send(data)
                    else:
                        requests_queue.put((key.data, data))

    def handler_thread() -> None:
        while (item := requests_queue.get()) is not None:
            if hops == 1:
                item[0].send(item[1])
            else:
                answers.put(item)
                wake_writer.send(b"\x00")

    threads = [threading.Thread(target=selector_thread)] + [threading.Thread(target=handler_thread)
                                                             for _ in range(HANDLERS)]
    for thread in threads:
        thread.start()
    try:
        return server_cpu_per_request(listener.getsockname(), bytes(100), 100, requests)
    finally:
        running = False
        for _ in range(HANDLERS):
            requests_queue.put(None)
        for thread in threads:
            thread.join()
        for sock in (listener, wake_reader, wake_writer):
            sock.close()
        selector.close()


def socket_server(requests: int, with_metrics: bool) -> float:
    """kafka-edu's SocketServer (4.1) with handler threads that answer at once."""
    server = SocketServer(KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0",
                                       "log.dirs": "/tmp/unused"}),
                          metrics=Metrics(MetricConfig()) if with_metrics else None)
    server.startup()
    stop = threading.Event()

    def answer() -> None:
        while not stop.is_set():
            request = server.request_channel.receive_request(timeout_ms=100)
            if request is not None:
                server.request_channel.send_response(Response(request, NetworkSend(request.connection_id, ANSWER)))

    handlers = [threading.Thread(target=answer) for _ in range(HANDLERS)]
    for handler in handlers:
        handler.start()
    body = bytes(2 + 2) + (1).to_bytes(4, "big") + (2).to_bytes(2, "big") + b"xy"   # key, version, id, client id
    frame = (len(body) + 90).to_bytes(4, "big") + body + bytes(90)
    try:
        return server_cpu_per_request(("127.0.0.1", server.bound_port()), frame, 4 + len(ANSWER), requests)
    finally:
        stop.set()
        for handler in handlers:
            handler.join()
        server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    cases = {"inline": lambda: skeleton(0, args.requests), "one hop": lambda: skeleton(1, args.requests),
             "two hops": lambda: skeleton(2, args.requests),
             "SocketServer": lambda: socket_server(args.requests, False),
             "SocketServer with metrics": lambda: socket_server(args.requests, True)}
    cost = {name: run() for name, run in cases.items()}
    base = cost["two hops"]
    print(f"{'server':<28}{'CPU us/request':>16}{'/ two hops':>12}")
    for name, us in cost.items():
        print(f"{name:<28}{us:>16.0f}{us / base:>12.2f}")
    print(f"two hops at 2,000 requests/s: {base * 2000 / 1e4:.0f}% of a core before any work (budget 25%)")
    for name, us in cost.items():
        report("request_floor", f"{name} / two-hop skeleton, CPU per request", us / base, None,
               ours_rate=us, peer_rate=base, unit_rate="us/request")
    report("request_floor", "two-hop skeleton at 2,000 requests/s", base * 2000 / 1e4, None, unit="% of a core",
           higher_is_better=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
