"""`kafka-edu get-offsets` (GetOffsetShell) against a kafka-edu broker process: `t:p:offset` lines
for latest, earliest and by-time lookups, --partitions, 0.10's error lines, and an unreachable broker."""
from __future__ import annotations

import subprocess

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.producer.kafka_producer import KafkaProducer

BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("offsets")).start()
    with ClusterAdmin(proc.bootstrap) as admin:
        assert admin.create_topics([NewTopic("clicks", 3, 1)]) == {"clicks": None}
    with KafkaProducer({"bootstrap.servers": proc.bootstrap, "key.serializer": BYTES,
                        "value.serializer": BYTES}) as producer:
        for i in range(30):                 # partition 0: 20 records at 1000..39000 ms, partition 1: 10
            producer.send("clicks", b"v%d" % i, partition=0 if i % 3 else 1, timestamp=1000 * (i + 1))
    yield proc
    assert proc.stop() == 0, proc.output()


def shell(broker, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "get-offsets", "--broker-list", broker.bootstrap, *argv],
                          capture_output=True, text=True, timeout=60)


def test_latest_and_earliest(broker):
    latest = shell(broker, "--topic", "clicks", "--time", "-1")
    assert (latest.returncode, latest.stdout, latest.stderr) == (0, "clicks:0:20\nclicks:1:10\nclicks:2:0\n", "")
    earliest = shell(broker, "--topic", "clicks", "--time", "-2", "--partitions", "2,0")
    assert earliest.stdout == "clicks:2:0\nclicks:0:0\n"


def test_by_time(broker):
    # partition 1 holds timestamps 1000, 4000, ..., 28000 at offsets 0..9; 13000 is offset 4
    done = shell(broker, "--topic", "clicks", "--time", "12500", "--partitions", "1")
    assert done.stdout == "clicks:1:4\n"
    beyond = shell(broker, "--topic", "clicks", "--time", "99000")
    assert beyond.stdout == "clicks:0:\nclicks:1:\nclicks:2:\n"


def test_missing_topic_and_partition(broker):
    done = shell(broker, "--topic", "nosuch", "--time", "-1")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("Error: no valid topic metadata for topic: nosuch,  probably the topic does not exist, "
                           "run kafka-list-topic.sh to verify\n")
    partial = shell(broker, "--topic", "clicks", "--time", "-1", "--partitions", "9,1")
    assert partial.returncode == 0
    assert (partial.stdout, partial.stderr) == ("clicks:1:10\n", "Error: partition 9 does not exist\n")


@pytest.mark.parametrize("argv, message", [
    (["--topic", "clicks"], "the following arguments are required: --time"),
    (["--topic", "clicks", "--time", "-1", "--partitions", "a,b"], "--partitions must be"),
    (["--topic", "clicks", "--time", "-3"], "--time must be"),
    (["--topic", "clicks", "--time", "-1", "--offsets", "2"], "unrecognized arguments"),
])
def test_usage_errors(broker, argv, message):
    done = shell(broker, *argv)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


def test_unreachable_broker():
    done = subprocess.run([str(KAFKA_EDU), "get-offsets", "--broker-list", "127.0.0.1:1", "--topic", "t",
                           "--time", "-1", "--timeout", "500"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("Error: ")
