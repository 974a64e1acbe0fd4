"""Consumer groups of unmodified clients against a kafka-edu broker process.

For each of kafka-python, confluent-kafka and `kcat -G`: three consumers, each its own process, share
a 6-partition topic in one group.

1. The group splits the partitions, two each, none shared (the coordinator's DescribeGroups view).
2. One member is killed with SIGKILL while records are flowing. After its session timeout the two
   survivors own all six partitions and read what is left.
3. Committed offsets are honoured: every produced record is consumed at least once, and the only
   records consumed twice are the killed member's, at or after its last committed offset on its
   own partitions (the survivors start there, not at `auto.offset.reset=earliest`).
4. A broker restart keeps the group (state, members, assignments, loaded from `__consumer_offsets`)
   and its committed offsets: OffsetFetch answers the same, and a new consumer in the group resumes
   exactly at them.

The Python members (group_member.py) log what they consumed and committed; kcat prints what it
consumed unbuffered (`-u`) and auto-commits every 100 ms. The broker's group.min.session.timeout.ms
is lowered to 1000 so the clients can use a 3 s session.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from broker_process import BrokerProcess
from external import stop, wait_for
from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.common.cluster import TopicPartition

PARTITIONS = 6
PER_PHASE = 30                      # records per partition in each produce phase
SESSION_MS = 3000
MEMBER = Path(__file__).with_name("group_member.py")
CLIENTS = ["kafka-python", "confluent", "kcat"]
# three members and a broker on 3-second sessions: a busy machine can cost a member its session,
# so `make unit` runs this module after the parallel part, on an otherwise idle machine
pytestmark = pytest.mark.serial


class MemberProcess:
    """A group member as a child process, and what it logged."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, client_id: str, workdir: Path,
                 kcat: str | None = None, delay_ms: int = 0):
        self.client, self.client_id = client, client_id
        self.log = workdir / f"{client_id}.log"
        self.stderr = open(workdir / f"{client_id}.err", "wb")
        if client == "kcat":
            self.out = open(self.log, "wb")
            argv = [kcat, "-b", bootstrap, "-G", group, topic, "-u", "-f", "%p %o %s\n",
                    "-X", f"client.id={client_id}", "-X", f"session.timeout.ms={SESSION_MS}",
                    "-X", "heartbeat.interval.ms=500", "-X", "auto.commit.interval.ms=100",
                    "-X", "auto.offset.reset=earliest", "-X", "fetch.wait.max.ms=100"]
            self.proc = subprocess.Popen(argv, stdout=self.out, stderr=self.stderr)
        else:
            self.out = None
            argv = [sys.executable, str(MEMBER), client, bootstrap, group, topic, client_id, str(self.log),
                    "--delay-ms", str(delay_ms)]
            self.proc = subprocess.Popen(argv, stdout=self.stderr, stderr=subprocess.STDOUT)

    def events(self) -> list[dict]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().splitlines()
        if self.client == "kcat":
            events = []
            for line in lines:
                parts = line.split(" ", 2)
                if len(parts) == 3:
                    events.append({"ev": "consumed", "p": int(parts[0]), "o": int(parts[1]), "v": parts[2]})
            return events
        return [json.loads(line) for line in lines if line.endswith("}")]

    def consumed(self) -> list[tuple[int, int, str]]:
        return [(e["p"], e["o"], e["v"]) for e in self.events() if e["ev"] == "consumed"]

    def last_commits(self) -> dict[int, int]:
        last: dict[int, int] = {}
        for e in self.events():
            if e["ev"] == "committed":
                last.update({int(p): o for p, o in e["offsets"].items()})
        return last

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        stop(self.proc, grace=15)
        if self.out:
            self.out.close()
        self.stderr.close()


def produce(bootstrap: str, topic: str, phase: str) -> set[str]:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for p in range(PARTITIONS):
        for i in range(PER_PHASE):
            value = f"{phase}-{p}-{i}"
            producer.produce(topic, value=value.encode(), partition=p)
            values.add(value)
    assert producer.flush(30) == 0
    return values


def assignment(admin: ClusterAdmin, group: str) -> dict[str, list[int]] | None:
    """client id -> partitions of a Stable group, as the coordinator hands them out."""
    described = admin.describe_group(group)
    if described.state != "Stable" or any(m.assignment is None for m in described.members):
        return None
    return {m.client_id: sorted(tp.partition for tp in m.assignment.partitions) for m in described.members}


def split_among(admin: ClusterAdmin, group: str, client_ids: set[str]):
    """The assignment once exactly `client_ids` hold all partitions, none shared (else None)."""
    current = assignment(admin, group)
    if current is None or set(current) != client_ids:
        return None
    owned = [p for ps in current.values() for p in ps]
    if sorted(owned) != list(range(PARTITIONS)) or any(not ps for ps in current.values()):
        return None
    return current


def committed(admin: ClusterAdmin, group: str, topic: str) -> dict[int, int]:
    return {tp.partition: o.offset for tp, o in admin.list_group_offsets(group).items() if tp.topic == topic}


def log_ends(admin: ClusterAdmin, topic: str) -> dict[int, int]:
    ends = admin.list_offsets({TopicPartition(topic, p): -1 for p in range(PARTITIONS)})
    return {tp.partition: o.offset for tp, o in ends.items()}


@pytest.mark.parametrize("client", CLIENTS)
def test_group_of_three_survives_a_kill_and_a_broker_restart(client, tmp_path, request):
    kcat = request.getfixturevalue("kcat") if client == "kcat" else None
    broker = BrokerProcess(tmp_path, {"group.min.session.timeout.ms": "1000",
                                      "offsets.topic.num.partitions": "10"}).start()
    admin = ClusterAdmin(broker.bootstrap, request_timeout_ms=20_000)
    topic, group = f"{client}-orders", f"{client}-group"
    members: list[MemberProcess] = []

    def member(client_id: str) -> MemberProcess:
        started = MemberProcess(client, broker.bootstrap, group, topic, client_id, tmp_path, kcat,
                                delay_ms=0 if client == "kcat" else 20)
        members.append(started)
        return started

    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        produced = produce(broker.bootstrap, topic, "phase1")
        trio = [member(f"{client}-{i}") for i in range(3)]

        # 1. three members, six partitions, none shared
        split = wait_for(lambda: split_among(admin, group, {m.client_id for m in trio}), 60, "a three-way split")
        assert sorted(len(ps) for ps in split.values()) == [2, 2, 2]

        # 2. kill one while it is reading its partitions
        victim, survivors = trio[0], trio[1:]
        victim_partitions = split[victim.client_id]
        produced |= produce(broker.bootstrap, topic, "phase2")

        def victim_progress() -> bool:
            seen = [v for p, _, v in victim.consumed() if v.startswith("phase2") and p in victim_partitions]
            if client == "kcat":            # kcat stores offsets before printing: kill it when idle
                return len(seen) == PER_PHASE * len(victim_partitions)
            return len(seen) >= 10
        wait_for(victim_progress, 60, "the victim to read phase 2")
        victim.kill()
        time.sleep(1)                       # let the broker read what the victim had already sent
        at_kill = committed(admin, group, topic)
        produced |= produce(broker.bootstrap, topic, "phase3")

        takeover = wait_for(lambda: split_among(admin, group, {m.client_id for m in survivors}),
                            SESSION_MS / 1000 + 30, "the survivors to take over")
        assert sorted(p for ps in takeover.values() for p in ps) == list(range(PARTITIONS))

        def everything_read() -> bool:
            return {v for m in trio for _, _, v in m.consumed()} >= produced
        wait_for(everything_read, 60, "every record to be consumed")

        # 3. at least once, and duplicates only where the victim had not committed
        consumptions = Counter((p, o) for m in trio for p, o, _ in m.consumed())
        duplicates = {po for po, n in consumptions.items() if n > 1}
        allowed = {(p, o) for p, o, _ in victim.consumed() if p in victim_partitions and o >= at_kill.get(p, 0)}
        assert duplicates <= allowed, sorted(duplicates - allowed)[:10]
        if client != "kcat":
            logged = victim.last_commits()
            assert all(logged[p] <= at_kill[p] for p in logged)

        # 4. a broker restart keeps the group and its offsets
        ends = log_ends(admin, topic)
        wait_for(lambda: committed(admin, group, topic) == ends, 30, "the survivors to commit everything")
        for m in survivors:
            m.kill()                        # no LeaveGroup: the group stays Stable in the log
        before = admin.describe_group(group)
        assert broker.stop() == 0, broker.output()
        broker.start()
        admin.close()
        admin = ClusterAdmin(broker.bootstrap, request_timeout_ms=20_000)
        after = wait_for(lambda: admin.describe_group(group), 30, "the restarted coordinator")
        assert (after.state, after.protocol) == (before.state, before.protocol) == ("Stable", before.protocol)
        assert [(m.member_id, m.client_id, m.assignment) for m in after.members] == \
            [(m.member_id, m.client_id, m.assignment) for m in before.members]
        assert committed(admin, group, topic) == ends

        phase4 = produce(broker.bootstrap, topic, "phase4")
        newcomer = member(f"{client}-new")
        wait_for(lambda: {v for _, _, v in newcomer.consumed()} >= phase4, SESSION_MS / 1000 + 40,
                 "the new member to read phase 4")
        read = newcomer.consumed()
        assert {v for _, _, v in read} == phase4
        assert {p: min(o for q, o, _ in read if q == p) for p in range(PARTITIONS)} == ends
    finally:
        for m in members:
            m.stop()
        admin.close()
        broker.stop()
