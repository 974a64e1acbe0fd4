"""`kafka-edu producer-perf-test` against a kafka-edu broker process: 0.10's final and window lines
(acceptance test 17), the throttle, --payload-file, --print-metrics, --plot, and the errors."""
from __future__ import annotations

import re
import signal
import subprocess
import time
import uuid

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess
from external import interruptible

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.common.cluster import TopicPartition

FINAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                   r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th\.$")
WINDOW = re.compile(r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
                    r"\d+\.\d max latency\.$")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("pperf")).start()
    yield proc
    assert proc.stop() == 0, proc.output()


def new_topic(broker, partitions=2) -> str:
    topic = f"pperf-{uuid.uuid4().hex[:8]}"
    with ClusterAdmin(broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}
    return topic


def perf(*argv, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "producer-perf-test", *argv], capture_output=True, text=True,
                          timeout=timeout)


def end_offsets(broker, topic, partitions=2) -> int:
    with ClusterAdmin(broker.bootstrap) as admin:
        return sum(o.offset for o in admin.list_offsets({TopicPartition(topic, p): -1
                                                          for p in range(partitions)}).values())


def test_final_line_of_an_unthrottled_run(broker):
    topic = new_topic(broker)
    done = perf("--topic", topic, "--num-records", "100000", "--record-size", "100", "--throughput", "-1",
                "--producer-props", f"bootstrap.servers={broker.bootstrap}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(WINDOW.match(line) for line in lines[:-1]), lines
    m = FINAL.match(lines[-1])
    assert m, lines[-1]
    assert m.group(1) == "100000"
    records_per_sec, mb_per_sec, max_latency = float(m.group(2)), float(m.group(3)), float(m.group(5))
    p50, p95, p99, p999 = map(int, m.group(6, 7, 8, 9))
    assert p50 <= p95 <= p99 <= p999 <= max_latency
    assert float(m.group(4)) <= max_latency
    assert abs(mb_per_sec - records_per_sec * 100 / 2**20) <= 0.005 + 1e-9
    assert re.search(r"records/sec \(", lines[-1]) and re.match(r"^\d+\.\d{6}$", m.group(2))
    assert end_offsets(broker, topic) == 100000
    assert done.stderr == ""


def test_throttled_run_takes_its_time_and_reports_windows(broker):
    topic = new_topic(broker)
    started = time.monotonic()
    done = perf("--topic", topic, "--num-records", "5000", "--record-size", "10", "--throughput", "1000",
                "--reporting-interval", "2000", "--producer-props", f"bootstrap.servers={broker.bootstrap}")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert FINAL.match(lines[-1]) and lines[-1].startswith("5000 records sent")
    windows = lines[:-1]
    assert len(windows) >= 2 and all(WINDOW.match(w) for w in windows), lines
    assert sum(int(w.split()[0]) for w in windows) <= 5000
    assert elapsed >= 4.0                   # 5000 records at most 1000/s: the throttle held the rate
    assert end_offsets(broker, topic) == 5000


def test_payload_file_metrics_and_plot(broker, tmp_path):
    topic = new_topic(broker, partitions=1)
    (tmp_path / "payloads.txt").write_text("alpha|beta|gamma")
    (tmp_path / "producer.properties").write_text(f"bootstrap.servers={broker.bootstrap}\nlinger.ms=2\n")
    plot = tmp_path / "run.svg"
    done = perf("--topic", topic, "--num-records", "300", "--payload-file", str(tmp_path / "payloads.txt"),
                "--payload-delimiter", "|", "--throughput", "-1", "--producer.config",
                str(tmp_path / "producer.properties"), "--print-metrics", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert FINAL.match(lines[0]) and lines[0].startswith("300 records sent")
    assert lines[1] == "" and re.match(r"^Metric Name +Value$", lines[2])
    assert len(lines) > 5 and all(re.match(r"^\S.*:\S+:\{.*\} +: (-?[\d.]+|nan|inf|-inf)$", line)
                                  for line in lines[3:]), lines[3:]
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()
    consumer = KafkaConsumer({"bootstrap.servers": broker.bootstrap})
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for _ in range(30):
        values += [r.value for rs in consumer.poll(1000).values() for r in rs]
        if len(values) >= 300:
            break
    consumer.close()
    assert set(values) == {b"alpha", b"beta", b"gamma"}


@pytest.mark.parametrize("argv, message", [
    (["--topic", "t", "--num-records", "1", "--throughput", "-1", "--producer-props", "bootstrap.servers=h:1"],
     "one of the arguments --record-size --payload-file is required"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "0",
      "--producer-props", "bootstrap.servers=h:1"], "--throughput must not be 0"),
    (["--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput", "-1",
      "--producer-props", "bootstrap.servers=h:1"], "--num-records must be positive"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"],
     "bootstrap.servers is not set"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
      "--producer-props", "bootstrap.servers=h:1", "acks=2"], "acks"),
    (["--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1", "--bogus"],
     "unrecognized arguments: --bogus"),
    (["--topic", "t", "--num-records", "1", "--payload-file", "/nonexistent", "--throughput", "-1",
      "--producer-props", "bootstrap.servers=h:1"], "cannot read --payload-file"),
])
def test_usage_errors_are_one_line_and_status_2(argv, message):
    done = perf(*argv)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stdout == ""


def test_unreachable_broker_fails_within_the_timeout():
    done = perf("--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1", "--timeout", "500",
                "--producer-props", "bootstrap.servers=127.0.0.1:1")
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["Error: 5 records failed, the first with: topic t not present in metadata "
                                        "after 500 ms"]


def test_help_lists_every_option_with_its_default():
    done = subprocess.run([str(KAFKA_EDU), "producer-perf-test", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for option in ("--topic", "--num-records", "--record-size", "--throughput", "--producer-props",
                   "--producer.config", "--payload-file", "--payload-delimiter", "--print-metrics",
                   "--reporting-interval", "--timeout", "--plot"):
        assert option in done.stdout
    assert "default 5000" in done.stdout and "default 60000" in done.stdout


def test_ctrl_c_reports_what_was_sent(broker):
    topic = new_topic(broker)
    proc = subprocess.Popen(interruptible([str(KAFKA_EDU), "producer-perf-test", "--topic", topic, "--num-records",
                                           "100000", "--record-size", "10", "--throughput", "500",
                                           "--reporting-interval", "500",
                                           "--producer-props", f"bootstrap.servers={broker.bootstrap}"]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline()           # a window line: it is sending
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    m = FINAL.match(out.splitlines()[-1])
    assert m and 0 < int(m.group(1)) < 100000
    assert end_offsets(broker, topic) == int(m.group(1))     # every record counted was acknowledged
