"""One consumer-group member as its own process, for tests/compat/test_real_client_groups.py.

    python group_member.py {kafka-python|confluent} BOOTSTRAP GROUP TOPIC CLIENT_ID LOG [--delay-ms N]

It subscribes to TOPIC in GROUP, and after every batch it consumed commits exactly the offsets after
that batch, synchronously, before it polls again (so at a rebalance nothing it consumed is
uncommitted). Every step is one JSON line appended to LOG with a single write, so a SIGKILL loses at
most the line being written:

    {"ev": "assigned", "partitions": [0, 1]}
    {"ev": "consumed", "p": 0, "o": 17, "v": "phase1-0-17"}
    {"ev": "committed", "offsets": {"0": 18}}          (only once the broker acknowledged it)
    {"ev": "commit-failed", "offsets": {...}, "error": "..."}

SIGTERM closes the consumer properly (it leaves the group).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time

SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500


class EventLog:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, ev: str, **fields) -> None:
        os.write(self.fd, (json.dumps({"ev": ev, **fields}) + "\n").encode())


def run_kafka_python(args, log: EventLog, running) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            log("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            log("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                             fetch_max_wait_ms=100, max_poll_records=10)
    consumer.subscribe([args.topic], listener=Listener())
    while running():
        batches = consumer.poll(timeout_ms=200)
        offsets = {}
        for tp, records in batches.items():
            for r in records:
                log("consumed", p=tp.partition, o=r.offset, v=r.value.decode())
                time.sleep(args.delay_ms / 1000)
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        if offsets:
            shown = {str(tp.partition): o.offset for tp, o in offsets.items()}
            try:
                consumer.commit(offsets)
                log("committed", offsets=shown)
            except Exception as exc:
                log("commit-failed", offsets=shown, error=repr(exc))
    consumer.close()
    log("closed")


def run_confluent(args, log: EventLog, running) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                         "fetch.wait.max.ms": 100})
    consumer.subscribe([args.topic],
                       on_assign=lambda c, ps: log("assigned", partitions=sorted(p.partition for p in ps)),
                       on_revoke=lambda c, ps: log("revoked", partitions=sorted(p.partition for p in ps)))
    while running():
        offsets = {}
        for message in consumer.consume(num_messages=10, timeout=0.2):
            if message.error():
                log("error", error=str(message.error()))
                continue
            log("consumed", p=message.partition(), o=message.offset(), v=message.value().decode())
            offsets[message.partition()] = message.offset() + 1
            time.sleep(args.delay_ms / 1000)
        if offsets:
            shown = {str(p): o for p, o in offsets.items()}
            try:
                result = consumer.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in offsets.items()],
                                         asynchronous=False)
                failed = [tp for tp in result if tp.error]
                if failed:
                    log("commit-failed", offsets=shown, error=str(failed[0].error))
                else:
                    log("committed", offsets=shown)
            except KafkaException as exc:
                log("commit-failed", offsets=shown, error=str(exc))
    consumer.close()
    log("closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["kafka-python", "confluent"])
    for name in ("bootstrap", "group", "topic", "client_id", "log"):
        parser.add_argument(name)
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args()
    log = EventLog(args.log)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    log("started", pid=os.getpid())
    {"kafka-python": run_kafka_python, "confluent": run_confluent}[args.client](args, log, lambda: not stop)


if __name__ == "__main__":
    main()
