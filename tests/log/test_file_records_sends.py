"""Slices sent while their file is sent elsewhere or closed: sends never wait for each other, a close
never waits for a send, and the descriptor outlives the last send under way, never a moment longer."""
from __future__ import annotations

import errno
import os
import select
import socket
import struct
import threading
import time

import pytest

from kafka_edu.server.log.file_records import FileRecords

SIZE = 1 << 20


def open_descriptors(path: str) -> int:
    """How many of this process's descriptors are open on `path` (deleted or not)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target in (path, f"{path} (deleted)")
    return count


@pytest.fixture
def records(tmp_path):
    records = FileRecords.open(str(tmp_path / "00000000000000000000.log"))
    records.append(os.urandom(SIZE))
    yield records
    records.close()


class StalledSend:
    """A whole-file sendfile into a socket whose peer does not read: once it has begun (`__init__`
    returns then) it blocks, up to 10 s, on the full socket, and it finishes when `drain` reads."""

    def __init__(self, records: FileRecords):
        self.records = records
        self.sender, self.receiver = socket.socketpair()
        self.sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        self.sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
        self.receiver.settimeout(10)
        self.sent: list[int] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not select.select([self.receiver], [], [], 0.01)[0]:     # its first bytes arrived
            assert time.monotonic() < deadline and not self.errors, f"the send did not begin: {self.errors}"

    def _send(self):
        try:
            piece = self.records.read(0, SIZE)
            total = 0
            while total < SIZE:
                total += piece.write_to(self.sender, total, SIZE - total)
            self.sent.append(total)
        except BaseException as exc:     # reported by the test, not lost in the thread
            self.errors.append(exc)

    def drain(self) -> bytes:
        received = bytearray()
        try:
            while len(received) < SIZE and not self.errors:
                received += self.receiver.recv(SIZE)
            self.thread.join(10)
        finally:
            self.sender.close()
            self.receiver.close()
        assert not self.errors, self.errors
        return bytes(received)


def test_a_send_never_waits_for_another_send_of_the_same_file(records):
    stalled = StalledSend(records)
    left, right = socket.socketpair()
    try:
        other = threading.Thread(target=lambda: records.read(0, 100).write_to(left, 0, 100), daemon=True)
        other.start()
        other.join(5)
        assert not other.is_alive(), "a send of the same file waited for the stalled one"
        assert stalled.thread.is_alive()
        assert right.recv(100) == records.read_bytes(0, 100)
    finally:
        left.close()
        right.close()
    expected = records.read_bytes(0, SIZE)
    assert stalled.drain() == expected and stalled.sent == [SIZE]


def test_a_close_during_a_send_leaves_the_descriptor_to_the_send(records):
    expected = records.read_bytes(0, SIZE)
    stalled = StalledSend(records)
    closer = threading.Thread(target=records.delete, daemon=True)
    closer.start()
    closer.join(5)
    assert not closer.is_alive(), "the close waited for the stalled send"
    assert not os.path.exists(records.path)
    assert open_descriptors(records.path) == 1, "the send under way keeps the descriptor open"
    with socket.socket() as unused, pytest.raises(OSError) as refused:   # no send begins on a closed file
        records.read(0, 10).write_to(unused, 0, 10)
    assert refused.value.errno == errno.EBADF
    assert stalled.drain() == expected and stalled.sent == [SIZE]
    assert open_descriptors(records.path) == 0, "the last send closes the descriptor"


def test_a_close_with_no_send_under_way_closes_at_once(records):
    records.read(0, 10)                                      # a slice held but not being sent
    records.close_handler()
    assert open_descriptors(records.path) == 0
