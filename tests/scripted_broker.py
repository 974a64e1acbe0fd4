"""A loopback broker whose every answer is scripted by the test, for client-side tests.

Each connection gets a thread that reads request frames, decodes them with our codec and asks a
handler per API key for the answer: a dict (encoded as the response at the request's version), raw
bytes (sent as they are: a whole frame, or garbage), or None (no answer at all). ApiVersions is
answered with our own ranges unless a test scripts it. Every request is recorded in `requests`.
"""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from kafka_edu.common.cluster import Node
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.header import RequestHeader, decode_request, encode_response

Handler = Callable[[RequestHeader, object], object]


def api_versions_answer(header: RequestHeader, body) -> dict:
    return {"error_code": 0, "api_keys": ApiKeys.version_ranges()}


class ScriptedBroker:
    """One fake broker on 127.0.0.1; `handlers` maps an ApiKeys member to its handler."""

    def __init__(self, handlers: dict[ApiKeys, Handler] | None = None, node_id: int = 0):
        self.handlers: dict[ApiKeys, Handler] = {ApiKeys.API_VERSIONS: api_versions_answer, **(handlers or {})}
        self.node_id = node_id
        self.requests: list[tuple[ApiKeys, int, object]] = []
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return self._listener.getsockname()

    @property
    def node(self) -> Node:
        host, port = self.address
        return Node(self.node_id, host, port)

    def apis_seen(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(api.name, version) for api, version, _ in self.requests]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                size = conn.recv(4, socket.MSG_WAITALL)
                if len(size) < 4:
                    return
                header, body = decode_request(conn.recv(int.from_bytes(size, "big"), socket.MSG_WAITALL))
                api = ApiKeys(header.api_key)
                with self._lock:
                    self.requests.append((api, header.api_version, body))
                handler = self.handlers.get(api)
                if handler is None:
                    raise AssertionError(f"the scripted broker has no answer for {api.name}")
                answer = handler(header, body)
                if isinstance(answer, (bytes, bytearray)):
                    conn.sendall(answer)
                elif answer is not None:
                    conn.sendall(encode_response(header.correlation_id, api, header.api_version, answer))
        except OSError:
            return
        finally:
            conn.close()

    def drop_connections(self) -> None:
        """Close every accepted connection from the broker's side."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._listener.close()
        self.drop_connections()


def metadata_answer(brokers: list[ScriptedBroker], topics: dict[str, int], controller_id: int | None = None,
                    errors: dict[str, int] | None = None,
                    placements: dict[tuple[str, int], tuple[int, list[int], list[int]]] | None = None) -> Handler:
    """A Metadata handler describing `brokers`; partition p of each topic is led by brokers[p % n], unless
    `placements` gives its (leader, replicas, isr): ids of brokers that are down, a leader of -1."""
    def placed(name: str, p: int) -> dict:
        node = brokers[p % len(brokers)].node_id
        leader, replicas, isr = (placements or {}).get((name, p), (node, [node], [node]))
        return {"error_code": 0, "partition_index": p, "leader_id": leader, "replica_nodes": replicas,
                "isr_nodes": isr}

    def answer(header, body):
        nodes = [{"node_id": b.node_id, "host": b.address[0], "port": b.address[1]} for b in brokers]
        wanted = None if body["topics"] is None else [t["name"] for t in body["topics"]]
        listed = []
        for name in sorted(topics) if wanted is None else wanted:
            if name not in topics:
                listed.append({"error_code": (errors or {}).get(name, 3), "name": name, "partitions": []})
                continue
            listed.append({"error_code": 0, "name": name, "partitions": [placed(name, p) for p in range(topics[name])]})
        controller = brokers[0].node_id if controller_id is None else controller_id
        return {"brokers": nodes, "controller_id": controller, "cluster_id": "scripted", "topics": listed}
    return answer


def scripted_cluster(count: int, topics: dict[str, int], handlers: dict[ApiKeys, Handler] | None = None
                     ) -> list[ScriptedBroker]:
    """`count` brokers (ids 1..count) that share a Metadata answer and the given handlers."""
    brokers = [ScriptedBroker(dict(handlers or {}), node_id=i + 1) for i in range(count)]
    answer = metadata_answer(brokers, topics)
    for b in brokers:
        b.handlers.setdefault(ApiKeys.METADATA, answer)
    return brokers
