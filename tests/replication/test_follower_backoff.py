"""A follower whose leader is gone (issue 8, item 7): it keeps trying, one attempt per
replica.fetch.backoff.ms, and never spins. Two ways of being gone, both on real sockets: the leader's
port refuses connections (its process stopped), and the port accepts and closes at once (a leader
that dies on every connection)."""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

from _broker_client import records
from _cluster import wait_until

BACKOFF_S = 0.1           # replica.fetch.backoff.ms in the replication suite
WATCH_S = 2.0


def cpu_seconds(thread: threading.Thread) -> float:
    """User + system CPU a thread of this process has used (Linux /proc)."""
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_follower_whose_leader_is_gone_backs_off_and_never_spins(make_cluster):
    cluster = make_cluster(2)
    cluster.create_partition("f", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("f", 0, records(b"a", b"b"), acks=1).error_code == 0
    wait_until(lambda: cluster.partition(1, "f").local_replica.log_end_offset == 2, what="the follower's copy")
    (fetcher,) = cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()
    port = cluster.brokers[0].bound_port()
    accepted = []
    with socket.socket() as gone:
        cluster.stop(0)              # nobody tells the follower: it still fetches from broker 0's address
        gone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        gone.bind(("127.0.0.1", port))   # held at once (no other socket takes it), not yet listening

        used = cpu_seconds(fetcher)
        time.sleep(WATCH_S)          # connection refused, again and again
        refused_cpu = cpu_seconds(fetcher) - used

        gone.listen(16)              # now the port accepts, and closes every connection at once
        gone.settimeout(0.05)
        used = cpu_seconds(fetcher)
        deadline = time.monotonic() + WATCH_S
        while time.monotonic() < deadline:
            try:
                connection, _ = gone.accept()
            except TimeoutError:
                continue
            accepted.append(time.monotonic())
            connection.close()
        closed_cpu = cpu_seconds(fetcher) - used

    assert fetcher.is_alive() and cluster.halted == []
    # at most one attempt per backoff (and a few for the timing of the first); never none
    assert 3 <= len(accepted) <= WATCH_S / BACKOFF_S + 3, accepted
    # a spinning fetcher would burn most of a core; one that waits uses milliseconds
    assert refused_cpu < 0.2 and closed_cpu < 0.2, (refused_cpu, closed_cpu)
    assert cluster.partition(1, "f").local_replica.log_end_offset == 2
