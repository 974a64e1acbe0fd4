"""`kafka-edu consumer-perf-test` against a kafka-edu broker process: 0.10's header and row
(acceptance test 18), the detailed rows, a short topic, --from-latest, --plot, the join timeout
and the usage errors."""
from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess
from external import interruptible

from kafka_edu.clients.admin import ClusterAdmin, NewTopic

SUMMARY_HEADER = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
DETAILED_HEADER = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
ROW = re.compile(rf"^({DATE}), ({DATE}), (\d+\.\d{{4}}), (\d+\.\d{{4}}), (\d+), (\d+\.\d{{4}})$")
DETAILED_ROW = re.compile(rf"^({DATE}), 0, (\d+\.\d{{4}}), (\d+\.\d{{4}}), (\d+), (\d+\.\d{{4}})$")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A broker and a topic of 2 partitions holding 10000 unkeyed records of 100 bytes."""
    proc = BrokerProcess(tmp_path_factory.mktemp("cperf"), {"offsets.topic.num.partitions": "2"}).start()
    with ClusterAdmin(proc.bootstrap) as admin:
        assert admin.create_topics([NewTopic("loaded", 2, 1)]) == {"loaded": None}
    filled = subprocess.run([str(KAFKA_EDU), "producer-perf-test", "--topic", "loaded", "--num-records", "10000",
                             "--record-size", "100", "--throughput", "-1", "--producer-props",
                             f"bootstrap.servers={proc.bootstrap}"], capture_output=True, text=True, timeout=120)
    assert filled.returncode == 0, filled.stderr
    yield proc
    assert proc.stop() == 0, proc.output()


def perf(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "consumer-perf-test", *argv], capture_output=True, text=True, timeout=120)


def test_summary_header_and_row(loaded, tmp_path):
    plot = tmp_path / "read.svg"
    done = perf("--broker-list", loaded.bootstrap, "--topic", "loaded", "--messages", "10000", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header == SUMMARY_HEADER
    m = ROW.match(row)
    assert m, row
    assert m.group(1) <= m.group(2)
    assert m.group(3) == "0.9537" and m.group(5) == "10000"
    assert done.stderr == ""
    assert "<svg" in plot.read_text()


def test_fewer_records_than_asked_for_ends_with_a_warning(loaded):
    done = perf("--bootstrap-server", loaded.bootstrap, "--topic", "loaded", "--messages", "20000", "--hide-header",
                "--date-format", "yyyy")
    assert done.returncode == 0, done.stderr
    (row,) = done.stdout.splitlines()
    fields = row.split(", ")
    assert re.fullmatch(r"\d{4}", fields[0]) and re.fullmatch(r"\d{4}", fields[1])
    assert fields[2] == "0.9537" and fields[4] == "10000"
    assert done.stderr.startswith("WARNING: Exiting before consuming the expected number of messages")


def test_detailed_stats(loaded):
    done = perf("--broker-list", loaded.bootstrap, "--topic", "loaded", "--messages", "10000",
                "--show-detailed-stats", "--reporting-interval", "1", "--group", "detailed")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header == DETAILED_HEADER
    assert rows and all(DETAILED_ROW.match(r) for r in rows), rows
    counts = [int(DETAILED_ROW.match(r).group(4)) for r in rows]
    assert counts == sorted(counts) and counts[-1] <= 10000


def test_from_latest_reads_nothing_new(loaded):
    done = perf("--broker-list", loaded.bootstrap, "--topic", "loaded", "--messages", "10", "--from-latest")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split(", ")[4] == "0"
    assert "WARNING" in done.stderr


def test_join_timeout():
    done = perf("--broker-list", "127.0.0.1:1", "--topic", "t", "--messages", "10", "--timeout", "1000")
    assert done.returncode == 1
    assert done.stderr == "Timed out waiting for initial group join.\n"
    assert done.stdout == SUMMARY_HEADER + "\n"


def test_ctrl_c_ends_with_a_summary():
    proc = subprocess.Popen(interruptible([str(KAFKA_EDU), "consumer-perf-test", "--broker-list", "127.0.0.1:1",
                                           "--topic", "t", "--messages", "10", "--timeout", "60000"]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == SUMMARY_HEADER + "\n"        # waiting for the join
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert ROW.match(out.strip()).group(5) == "0"


@pytest.mark.parametrize("argv, message", [
    (["--broker-list", "h:1", "--topic", "t"], "the following arguments are required: --messages"),
    (["--broker-list", "h:1", "--topic", "t", "--messages", "0"], "must be positive"),
    (["--broker-list", "h:1", "--topic", "t", "--messages", "1", "--date-format", "EEE"], "not supported"),
    (["--broker-list", "h:1", "--topic", "t", "--messages", "1", "--threads", "3"], "unrecognized arguments"),
    (["--broker-list", "nohost", "--topic", "t", "--messages", "1"], "bootstrap.servers"),
])
def test_usage_errors(argv, message):
    done = perf(*argv)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_help_lists_every_option_with_its_default():
    done = subprocess.run([str(KAFKA_EDU), "consumer-perf-test", "--help"], capture_output=True, text=True)
    for option, default in (("--fetch-size", "1048576"), ("--socket-buffer-size", "2097152"),
                            ("--reporting-interval", "5000"), ("--timeout", "10000"),
                            ("--date-format", "yyyy-MM-")):
        text = " ".join(done.stdout.split())          # argparse wraps the help
        assert option in text and f"default {default}" in text
