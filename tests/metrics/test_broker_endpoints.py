"""T30 over the wire: broker processes (`kafka-edu server-start`) on a real ZooKeeper serve their metrics
at metrics.prometheus.listener (scraped and parsed with prometheus_client) and metrics.jmx.listener
(read by the installed `kafka-edu jmx`)."""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS / "broker"))     # _broker_client
sys.path.insert(0, str(TESTS / "compat"))     # broker_process

from _broker_client import BrokerClient, records  # noqa: E402
from broker_process import KAFKA_EDU, BrokerProcess  # noqa: E402
from external import free_port  # noqa: E402

from kafka_edu.clients.admin import ClusterAdmin, NewTopic  # noqa: E402
from kafka_edu.server.zk.zk_utils import ZkUtils, create_zk_client  # noqa: E402

pytestmark = pytest.mark.zookeeper

EXPECTED = [  # (family, labels that one of its samples carries)
    ("kafka_server_ReplicaManager_IsrShrinksPerSec_Count", {}),
    ("kafka_log_Log_NumLogSegments_Value", {"topic": "test", "partition": "0"}),
    ("kafka_network_RequestMetrics_RequestQueueTimeMs_Count", {"request": "FetchFollower"}),
    ("kafka_network_RequestMetrics_TotalTimeMs_99thPercentile", {"request": "Produce"}),
    ("kafka_controller_ControllerStats_LeaderElectionRateAndTimeMs_Count", {}),
    ("kafka_controller_KafkaController_ActiveControllerCount_Value", {}),
    ("kafka_server_BrokerTopicMetrics_MessagesInPerSec_Count", {"topic": "test"}),
    ("kafka_server_BrokerTopicMetrics_BytesOutPerSec_OneMinuteRate", {}),
    ("kafka_server_DelayedOperationPurgatory_PurgatorySize_Value", {"delayedOperation": "Fetch"}),
    ("kafka_controller_channel_metrics_connection_count", {"broker_id": "1"}),
    ("kafka_controller_channel_metrics_request_rate", {"broker_id": "1"}),
    ("kafka_controller_channel_metrics_io_wait_ratio", {"broker_id": "1"}),
]


@pytest.fixture
def brokers(zookeeper, tmp_path):
    connect = f"{zookeeper.connect}/metrics-endpoints-{time.monotonic_ns()}"
    started = []
    for broker_id in (0, 1):
        started.append(BrokerProcess(tmp_path / f"b{broker_id}", {
            "zookeeper.session.timeout.ms": "2000", "replica.fetch.wait.max.ms": "100",
            "offsets.topic.replication.factor": "1", "log.cleaner.enable": "false",
            "metrics.prometheus.listener": f"http://127.0.0.1:{free_port()}",
            "metrics.jmx.listener": f"http://127.0.0.1:{free_port()}"}, broker_id, connect).launch())
    for broker in started:
        broker.wait_started()
    zk = create_zk_client({"zookeeper.connect": connect}, name="metrics-endpoints-observer")
    yield started, ZkUtils(zk)
    for broker in started:
        broker.kill()
    zk.close()


def listener(broker: BrokerProcess, key: str) -> str:
    return next(line.split("=", 1)[1] for line in broker.config.read_text().splitlines() if line.startswith(key + "="))


def scrape(broker: BrokerProcess) -> set[tuple[str, frozenset]]:
    with urllib.request.urlopen(listener(broker, "metrics.prometheus.listener") + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items()))
            for family in text_string_to_metric_families(text) for sample in family.samples}


def has(samples, family: str, labels: dict) -> bool:
    return any(name == family and set(labels.items()) <= set(found) for name, found in samples)


def wait_for(condition, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout} s")
        time.sleep(0.1)
    return result


def test_prometheus_endpoints_of_broker_processes_carry_kafkas_names_and_the_jmx_tool_reads_them(brokers):
    (b0, b1), zk_utils = brokers
    wait_for(lambda: zk_utils.get_controller_id() is not None and len(zk_utils.get_all_broker_ids()) == 2,
             "two brokers and a controller")
    with ClusterAdmin(b0.bootstrap) as admin:
        assert admin.create_topics([NewTopic("test", replica_assignment={0: [1, 0]})]) == {"test": None}
    wait_for(lambda: (s := zk_utils.get_leader_and_isr("test", 0)) and len(s.leader_and_isr.isr) == 2, "a full ISR")
    with BrokerClient(b1.port) as client:
        for i in range(10):
            assert client.produce("test", 0, records(b"m%d" % i), acks=-1).error_code == 0
        assert client.fetch("test", 0, 0).error_code == 0

    def missing() -> list[str]:
        samples = scrape(b0) | scrape(b1)
        return [family for family, labels in EXPECTED if not has(samples, family, labels)]
    wait_for(lambda: not missing(), "every T30 name in the scrapes")
    samples = scrape(b1)
    assert has(samples, "kafka_server_BrokerTopicMetrics_MessagesInPerSec_Count", {"topic": "test"})

    jmx = listener(b1, "metrics.jmx.listener")
    shown = subprocess.run([str(KAFKA_EDU), "jmx", "--jmx-url", jmx, "--one-time", "--attributes", "Count",
                            "--object-name", "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=test",
                            "--object-name", "kafka.server:type=ReplicaManager,*"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    header, line = shown.stdout.splitlines()
    assert header == ('"time","kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=test:Count",'
                      '"kafka.server:type=ReplicaManager,name=IsrExpandsPerSec:Count",'
                      '"kafka.server:type=ReplicaManager,name=IsrShrinksPerSec:Count"')
    assert line.split(",")[1] == "10.0"
    assert int(line.split(",")[0]) > 1_600_000_000_000


def test_jmx_tool_exit_statuses():
    port = free_port()
    unreachable = subprocess.run([str(KAFKA_EDU), "jmx", "--jmx-url", f"http://127.0.0.1:{port}", "--one-time"],
                                 capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 1 and len(unreachable.stderr.splitlines()) == 1
    assert "cannot read the beans" in unreachable.stderr
    bad = subprocess.run([str(KAFKA_EDU), "jmx", "--reporting-interval", "x"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    helped = subprocess.run([str(KAFKA_EDU), "jmx", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "default 2000" in helped.stdout and "http://127.0.0.1:9999" in helped.stdout
