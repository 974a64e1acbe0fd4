"""A slow consumer holds a zero-copy Fetch response while the segment it slices is deleted: by its
topic's deletion, or by retention. The number of the closed descriptor is soon reused by another file
the broker opens (here: the next topic's segment); the response must never carry that file's bytes.
It fails instead, and the connection is closed, as a closed FileChannel does in Kafka."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from _broker_client import BrokerClient, records, start_broker
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.header import RequestHeader, encode_request

MB_OF_A = [b"A" * 1000] * 400


def slow_fetch(port: int, client: BrokerClient) -> socket.socket:
    """Ask for 2.4 MB through 4 KiB buffers, and read nothing yet."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = client.fetch_body("victim", 0, 0, max_bytes=8 << 20, partition_max_bytes=8 << 20)
    sock.sendall(encode_request(RequestHeader(ApiKeys.FETCH, 11, 1, "slow"), body))
    return sock


def read_everything(sock: socket.socket) -> bytes:
    sock.settimeout(20)
    received = bytearray()
    while chunk := sock.recv(1 << 16):
        received += chunk
        if len(received) >= 4 and len(received) >= 4 + struct.unpack_from(">i", received)[0]:
            break
    return bytes(received)


@pytest.mark.parametrize("deletion", ["topic", "retention"])
def test_a_slow_fetch_never_sends_another_files_bytes(tmp_path, deletion):
    server = start_broker(tmp_path, **{"delete.topic.enable": "true", "socket.send.buffer.bytes": 4096,
                                       "log.segment.delete.delay.ms": 300})
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("victim", segment_bytes=1_000_000)
            for _ in range(6):
                assert client.produce("victim", 0, records(*MB_OF_A)).error_code == 0
            sock = slow_fetch(server.bound_port(), client)
            time.sleep(1.0)                                    # both small buffers are full: the send waits
            if deletion == "topic":
                client.call(ApiKeys.DELETE_TOPICS, 3, {"topic_names": ["victim"], "timeout_ms": 10_000})
                wait_for(lambda: not (tmp_path / "victim-0").exists(), what="the topic's directory to go")
            else:
                log = server.log_manager.get_log("victim", 0)
                log.segments[0].set_last_modified_ms(int(time.time() * 1000) - 8 * 86_400_000)
                assert server.log_manager.cleanup_logs() == 1  # the first segment, the one being sent
                wait_for(lambda: not any(name.endswith(".deleted") for name in os.listdir(tmp_path / "victim-0")),
                         what="the segment's files to go")
            client.create_topic("secret")                      # new files take the free descriptor numbers
            for _ in range(6):
                assert client.produce("secret", 0, records(*[b"S" * 1000] * 400)).error_code == 0
            received = read_everything(sock)
            sock.close()
        assert b"SSSSSSSS" not in received                     # never another topic's records
        assert len(received) < 4 + struct.unpack_from(">i", received)[0]   # the answer was cut off instead
    finally:
        server.shutdown()
