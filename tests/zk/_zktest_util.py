"""Helpers shared by the coordination tests (imported as a plain module, like tests/log's)."""
from __future__ import annotations

import time

from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_client import SessionState, ZkClient


class ZkCluster:
    """Opens sessions on one tree and closes whatever is still open at the end of the test."""

    def __init__(self, backend: str, connect: str | None = None):
        self.backend = backend
        self.connect = connect
        self.embedded = EmbeddedZooKeeper() if backend == "embedded" else None
        self.clients: list[ZkClient] = []

    def client(self) -> ZkClient:
        if self.embedded is not None:
            client = self.embedded.connect()
        else:
            from kafka_edu.server.zk.kazoo_backend import KazooZkClient
            client = KazooZkClient(self.connect, session_timeout_ms=4000, connection_timeout_ms=10000)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()


def wait_for(predicate, what: str, timeout_s: float = 20):
    """Poll until predicate() is truthy; a failure guard, never a timing assertion."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def expire(client: ZkClient, states: list) -> None:
    """Expire client's session for real and wait until it is back on a new session."""
    old = client.session_id
    client.expire_session()
    wait_for(lambda: SessionState.EXPIRED in states and states[-1] is SessionState.CONNECTED
             and client.session_id not in (0, old), "a new session after expiry")
