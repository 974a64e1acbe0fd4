"""Flat cost in connections: throughput with 10,000 idle connections held open against none, and memory.

One kafka-edu broker runs as its own process (as broker_vs_mock.py starts it). A child process
(`python benchmarks/connections.py --hold HOST:PORT N`) opens N plain sockets to it, sends one
ApiVersions request (v0) on each and reads its answer, so the broker holds N real channels that
have completed a request, then keeps them idle until its stdin closes.

Throughput: a confluent-kafka producer (acks=1, linger.ms=50, batch.size=1000000) writes N records
of 100 B to partition 0 of a fresh topic and a fresh consumer reads them back (the passes of
_flat.py). It is measured with no idle connection, then with the idle ones held, then once more
without; the first measurement of each kind is discarded (connections, page cache) and the ratio
(held / none) compares medians. Target >= 0.9 for produce and for consume.

Memory: the broker's VmRSS idle (after start-up) and with the idle connections held.

    python benchmarks/connections.py [--connections 10000] [--records 200000] [--repeats 2]

Needs a file limit (ulimit -n) above the number of connections, for this process's child and the broker.
"""
from __future__ import annotations

import argparse
import logging
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "compat")]

API_VERSIONS = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 5) + b"idler"   # key 18, v0, correlation 1
REQUEST = struct.pack(">i", len(API_VERSIONS)) + API_VERSIONS


def read_response(sock: socket.socket) -> None:
    """Read one size-prefixed response whole (its content does not matter here)."""
    need = 4 + struct.unpack(">i", _read_exactly(sock, 4))[0]
    _read_exactly(sock, need - 4)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed an idle connection")
        data += chunk
    return data


def hold(address: str, count: int, wave: int = 50) -> None:
    """The child: open `count` connections, each one ApiVersions round trip, in waves of the broker's
    accept backlog (50, so that no connect waits for a SYN retry), print "held", and keep them until
    stdin closes."""
    host, port = address.rsplit(":", 1)
    sockets: list[socket.socket] = []
    while len(sockets) < count:
        batch = [socket.create_connection((host, int(port)), timeout=60) for _ in range(min(wave, count - len(sockets)))]
        for sock in batch:
            sock.sendall(REQUEST)
        for sock in batch:
            read_response(sock)
        sockets.extend(batch)
    print("held", flush=True)
    sys.stdin.read()
    for sock in sockets:
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2, help="kept measurements of each kind")
    parser.add_argument("--hold", nargs=2, metavar=("HOST:PORT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold:
        hold(args.hold[0], int(args.hold[1]))
        return 0

    from _flat import consume_spread, create_topic, produce_spread, rss_mib
    from _summary import report
    from broker_process import BrokerProcess
    logging.basicConfig(level=logging.ERROR)

    def measure(topic: str) -> tuple[float, float]:
        create_topic(broker.bootstrap, topic, 1)
        produced = args.records / produce_spread(broker.bootstrap, topic, 1, args.records, args.size)
        consumed = args.records / consume_spread(broker.bootstrap, topic, {0: 0}, args.records)
        return produced, consumed

    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        holder = None
        try:
            time.sleep(2)                              # let start-up garbage settle before reading RSS
            idle = rss_mib(broker.proc.pid)
            none = [measure(f"none-{i}") for i in range(args.repeats + 1)][1:]
            started = time.perf_counter()
            holder = subprocess.Popen([sys.executable, __file__, "--hold", broker.bootstrap, str(args.connections)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if holder.stdout.readline().strip() != "held":
                raise RuntimeError(f"the child could not open {args.connections} connections")
            opened = time.perf_counter() - started
            held_rss = rss_mib(broker.proc.pid)
            sockets = sum(1 for fd in Path(f"/proc/{broker.proc.pid}/fd").iterdir() if "socket" in str(fd.readlink()))
            held = [measure(f"held-{i}") for i in range(args.repeats + 1)][1:]
            holder.stdin.close()
            holder.wait(60)
            holder = None
            none += [measure(f"after-{i}") for i in range(args.repeats + 1)][1:]
            print(f"{args.connections:,} connections opened (one ApiVersions each) in {opened:.1f} s; "
                  f"the broker then held {sockets:,} sockets")
            print(f"{'case':<16}{'none rec/s':>14}{f'{args.connections:,} idle rec/s':>22}{'ratio':>8}")
            for phase, i in (("produce", 0), ("consume", 1)):
                base = statistics.median(r[i] for r in none)
                loaded = statistics.median(r[i] for r in held)
                print(f"{phase + f' {args.size} B':<16}{base:>14,.0f}{loaded:>22,.0f}{loaded / base:>8.2f}", flush=True)
                report("connections", f"{phase} with {args.connections:,} idle / none", loaded / base, 0.9,
                       none_rate=base, held_rate=loaded)
            print(f"broker RSS: idle {idle:.0f} MiB, with {args.connections:,} connections {held_rss:.0f} MiB "
                  f"({(held_rss - idle) * 1024 / args.connections:.1f} KiB per connection)")
            report("memory", f"broker RSS with {args.connections:,} connections", held_rss, 256, unit="MiB",
                   higher_is_better=False, idle=idle)
        finally:
            if holder is not None:
                holder.kill()
                holder.wait(10)
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
