"""A disk that refuses a write (4.5.1): the broker halts, as 0.10 does, and loses nothing it acknowledged.

The fault is real: the broker process gets a file-size limit (RLIMIT_FSIZE, which Python turns into
EFBIG on the write that crosses it), so its next append fails in the operating system. The broker
must not go on serving a log it could not write: it logs one CRITICAL line naming the log and exits 1.
Restarted, its recovery cuts the part of the batch that reached the file, and every acknowledged
record is read back exactly once.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS / "compat"))     # broker_process

from broker_process import BrokerProcess  # noqa: E402
from external import made_dir, wait_for  # noqa: E402

VALUE_SIZE = 1000


def produce(producer, values, acked: list, failed: list) -> None:
    def delivered(err, msg):
        (failed if err else acked).append(msg.value())
    for value in values:
        while True:
            try:
                producer.produce("t", value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)


def read_all(bootstrap: str, expected: int) -> list[bytes]:
    """Every record of t-0: reads until `expected` came and then five polls in a row find nothing more."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
    found, quiet = [], 0
    deadline = time.monotonic() + 60
    while (len(found) < expected or quiet < 5) and time.monotonic() < deadline:
        message = consumer.poll(1)
        quiet = quiet + 1 if message is None else 0
        if message is not None and message.error() is None:
            found.append(message.value())
    consumer.close()
    return found


def test_a_broker_whose_disk_refuses_a_write_halts_and_recovers_exactly_what_it_acknowledged(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = BrokerProcess(tmp_path / "broker").start()
    try:
        values = [f"{i:08d}".encode().ljust(VALUE_SIZE, b".") for i in range(5000)]
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 5,
                                             "message.timeout.ms": 5000, "retries": 0})
        acked, failed = [], []
        produce(producer, values[:2000], acked, failed)
        assert producer.flush(30) == 0 and not failed and len(acked) == 2000

        segment = broker.log_dir / "t-0" / "00000000000000000000.log"
        limit = max(segment.stat().st_size, (broker.workdir / "broker.log").stat().st_size) + 300_000
        broker.limit_file_size(limit)
        produce(producer, values[2000:], acked, failed)
        assert broker.proc.wait(60) == 1
        assert "halting: unrecoverable I/O error while handling produce request: I/O error in append to log t-0" \
            in broker.output()
        producer.flush(30)                       # what was not acknowledged fails: the broker is gone
        assert len(acked) + len(failed) == len(values) and failed
        assert segment.stat().st_size >= limit - 1     # part of a batch reached the file past its end

        broker.start()                          # a new process, without the limit: recovery runs
        assert segment.stat().st_size < limit
        after = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": 1})
        produce(after, [b"after the restart"], acked, failed)
        assert after.flush(30) == 0
        assert read_all(broker.bootstrap, len(acked)) == acked
    finally:
        broker.stop()


def test_a_broker_that_cannot_write_its_high_watermark_checkpoint_halts(tmp_path):
    """0.10's ReplicaManager.checkpointHighWatermarks: "Error writing to highwatermark file", then halt(1)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = BrokerProcess(tmp_path / "broker", {"replica.high.watermark.checkpoint.interval.ms": "100"}).start()
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": 1})
        produce(producer, [b"before"], [], [])
        assert producer.flush(30) == 0
        checkpoint = broker.log_dir / "replication-offset-checkpoint"
        deadline = time.monotonic() + 30
        while "t 0 1" not in (checkpoint.read_text() if checkpoint.exists() else ""):
            assert time.monotonic() < deadline, "the HW of t-0 never reached the checkpoint"
            time.sleep(0.1)
        # the next write cannot open its temporary file (a write under way leaves its file there until renamed)
        wait_for(lambda: made_dir(broker.log_dir / "replication-offset-checkpoint.tmp"), 30,
                 "a moment with no checkpoint being written")
        assert broker.proc.wait(30) == 1
        assert f"halting: error writing the high-watermark checkpoint {checkpoint}" in broker.output()
        assert "t 0 1" in checkpoint.read_text()                          # the last good checkpoint stays

        (broker.log_dir / "replication-offset-checkpoint.tmp").rmdir()   # the disk is back: so is the broker
        broker.start()
        assert read_all(broker.bootstrap, 1) == [b"before"]
    finally:
        broker.stop()
