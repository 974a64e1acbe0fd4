"""JMX-style beans (T30 names) and the Prometheus endpoint, scraped over HTTP and parsed by prometheus_client."""
import json
import logging
import socket
import struct
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafka_edu.common.metrics.jmx_http import bean_values
from kafka_edu.common.metrics.jmx_reporter import (
    JmxReporter, MBeanServer, bean_name, load_reporter, metrics_from_config, quote_jmx)
from kafka_edu.common.metrics.metrics import Gauge, Metrics, MetricsReporter
from kafka_edu.common.metrics.metrics_group import KafkaMetricsGroup
from kafka_edu.common.metrics.prometheus import KafkaMetricsCollector, prometheus_name, serve_prometheus
from kafka_edu.common.metrics.stats import Avg, Max, MetricConfig, Rate
from kafka_edu.common.network.network_send import NetworkSend
from kafka_edu.common.network.selector import KSelector
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.cluster import InProcessCluster
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.network.request_channel import Response
from kafka_edu.server.network.socket_server import SocketServer


class RecordingReporter(MetricsReporter):
    """A reporter that remembers what it was told (for metric.reporters)."""

    def __init__(self):
        self.events = []

    def init(self, metrics):
        self.events += [("init", m.metric_name.name) for m in metrics]

    def metric_change(self, metric):
        self.events.append(("change", metric.metric_name.name))

    def metric_removal(self, metric):
        self.events.append(("removal", metric.metric_name.name))

    def close(self):
        self.events.append(("close", None))


def test_bean_names_and_quoting():
    metrics = Metrics()
    assert bean_name("kafka.producer", metrics.metric_name("x", "producer-metrics", tags={"client-id": "p-1"})) \
        == "kafka.producer:type=producer-metrics,client-id=p-1"
    assert quote_jmx("a,b=c") == '"a,b=c"' and quote_jmx('q"*?\n') == '"q\\"\\*\\?\\n"'
    assert quote_jmx("plain.name-1 %") == "plain.name-1 %"
    yammer = KafkaMetricsGroup(metrics, "kafka.log", "Log").metric_name("Value", "NumLogSegments",
                                                                         {"topic": "t", "partition": "0"})
    assert bean_name("ignored", yammer) == "kafka.log:type=Log,name=NumLogSegments,topic=t,partition=0"


def test_jmx_reporter_follows_additions_and_removals():
    jmx = MBeanServer()
    metrics = Metrics(time=MockTime(), reporters=[JmxReporter("kafka.consumer", jmx)])
    sensor = metrics.sensor("fetch-size")
    sensor.add(Avg(), metrics.metric_name("fetch-size-avg", "consumer-fetch-manager-metrics", tags={"client-id": "c"}))
    sensor.add(Max(), metrics.metric_name("fetch-size-max", "consumer-fetch-manager-metrics", tags={"client-id": "c"}))
    sensor.record(10)
    sensor.record(30)
    bean = "kafka.consumer:type=consumer-fetch-manager-metrics,client-id=c"
    assert jmx.query_names("kafka.consumer:type=consumer-*") == [bean]
    assert jmx.get_attributes(bean) == {"fetch-size-avg": 20, "fetch-size-max": 30}
    assert "fetch-size-max = 30" in jmx.dump(bean)
    metrics.remove_sensor("fetch-size")
    assert not jmx.is_registered(bean)
    metrics.close()
    assert jmx.query_names() == []                       # close() unregistered the count bean too


def test_metrics_from_config_loads_reporters():
    config = {"metrics.num.samples": 4, "metrics.sample.window.ms": 5000,
              "metric.reporters": [f"{__name__}.RecordingReporter"]}
    jmx = MBeanServer()
    metrics = metrics_from_config(config, "kafka.server", MockTime(), jmx, tags={"broker": "1"})
    try:
        assert (metrics.config.samples, metrics.config.time_window_ms) == (4, 5000)
        assert jmx.query_names() == ["kafka.server:type=kafka-metrics-count,broker=1"]
        recording = metrics._reporters[0]
        assert recording.events == [("change", "count")]
    finally:
        metrics.close()
    with pytest.raises(ValueError):
        load_reporter("NoModule")
    with pytest.raises(ValueError):
        load_reporter("collections.OrderedDict")


def fetch_frame(correlation_id: int, replica_id: int) -> bytes:
    client_id = b"broker-1-fetcher"
    payload = struct.pack(">hhih", ApiKeys.FETCH, 11, correlation_id, len(client_id)) + client_id \
        + struct.pack(">i", replica_id) + bytes(20)
    return struct.pack(">i", len(payload)) + payload


def test_t30_observable_names():
    """The T30 bean names: request metrics from a live SocketServer, the others as their owners create them."""
    jmx = MBeanServer()
    metrics = Metrics(MetricConfig(), reporters=[JmxReporter("kafka.server", jmx)])
    server = SocketServer(KafkaConfig({"broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused",
                                       "num.network.threads": 1}), metrics=metrics)
    server.startup()
    stop = threading.Event()

    def answer():
        while not stop.is_set():
            request = server.request_channel.receive_request(timeout_ms=20)
            if request is not None:
                server.request_channel.send_response(Response(request, NetworkSend(request.connection_id, b"x")))

    handler = threading.Thread(target=answer, daemon=True)
    handler.start()
    try:
        with socket.create_connection(("127.0.0.1", server.bound_port())) as conn:
            for correlation_id, replica_id in enumerate((1, 1, -1)):
                conn.sendall(fetch_frame(correlation_id, replica_id))
                assert conn.recv(5, socket.MSG_WAITALL) == b"\x00\x00\x00\x01x"
        follower = "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=FetchFollower"
        count = lambda name: jmx.get_attribute(name, "Count")       # noqa: E731
        last = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Fetch"   # the last one updated
        for _ in range(500):                    # the third send completes just after the client read it
            if jmx.is_registered(last) and count(last) == 3:
                break
            threading.Event().wait(0.01)
        assert count(follower) == 2
        assert count(follower.replace("FetchFollower", "FetchConsumer")) == 1
        assert count(follower.replace("FetchFollower", "Fetch")) == 3
        assert jmx.get_attribute("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch", "Count") == 3
        assert jmx.get_attribute("kafka.network:type=RequestChannel,name=RequestQueueSize", "Value") == 0
        assert jmx.is_registered("kafka.network:type=RequestChannel,name=ResponseQueueSize,processor=0")
    finally:
        stop.set()
        handler.join()
        server.shutdown()

    # as ReplicaManager, Log, the controller and its channel create theirs (wiring listed in the report)
    isr_shrinks = KafkaMetricsGroup(metrics, "kafka.server", "ReplicaManager").new_meter("IsrShrinksPerSec")
    isr_shrinks.record()
    KafkaMetricsGroup(metrics, "kafka.log", "Log").new_gauge("NumLogSegments", lambda: 1,
                                                             {"topic": "test", "partition": "0"})
    KafkaMetricsGroup(metrics, "kafka.controller", "ControllerStats").new_timer("LeaderElectionRateAndTimeMs")
    channel = KSelector(metrics=metrics, metric_group_prefix="controller-channel", metric_tags={"broker-id": "1"})
    try:
        assert jmx.get_attribute("kafka.server:type=ReplicaManager,name=IsrShrinksPerSec", "Count") == 1
        assert jmx.get_attribute("kafka.log:type=Log,name=NumLogSegments,topic=test,partition=0", "Value") == 1
        assert "99thPercentile" in jmx.get_attributes(
            "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs")
        attributes = jmx.get_attributes("kafka.server:type=controller-channel-metrics,broker-id=1")
        assert {"connection-count", "request-rate", "io-wait-ratio", "io-ratio"} <= set(attributes)
        with pytest.raises(ValueError):
            KafkaMetricsGroup(metrics, "kafka.server", "ReplicaManager").new_meter("IsrShrinksPerSec")
    finally:
        channel.close()
        metrics.close()


def test_prometheus_names():
    metrics = Metrics()
    name, labels = prometheus_name(metrics.metric_name("record-send-rate", "producer-metrics",
                                                       tags={"client-id": "p.1"}))
    assert (name, labels) == ("kafka_producer_metrics_record_send_rate", {"client_id": "p.1"})
    group = KafkaMetricsGroup(metrics, "kafka.network", "RequestMetrics")
    name, labels = prometheus_name(group.metric_name("99thPercentile", "TotalTimeMs", {"request": "Produce"}))
    assert (name, labels) == ("kafka_network_RequestMetrics_TotalTimeMs_99thPercentile", {"request": "Produce"})


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = reply.read().decode()
    return {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
            for f in text_string_to_metric_families(text)}


def test_prometheus_endpoint_scraped_over_http():
    clock = MockTime()
    metrics = Metrics(MetricConfig(samples=2, time_window_ms=30_000), time=clock)
    sends = metrics.sensor("record-send")
    sends.add(Rate(), metrics.metric_name("record-send-rate", "producer-metrics", "Records sent per second.",
                                          {"client-id": "p1"}))
    for _ in range(40):
        sends.record(1)
    clock.sleep(10_000)
    KafkaMetricsGroup(metrics, "kafka.server", "ReplicaManager").new_meter("IsrExpandsPerSec").record(2)
    endpoint = serve_prometheus(metrics, "http://127.0.0.1:0")
    try:
        families = scrape(endpoint.url)
        assert families["kafka_producer_metrics_record_send_rate"] == {(("client_id", "p1"),): 1.0}   # 40 / 40 s
        assert families["kafka_server_ReplicaManager_IsrExpandsPerSec_Count"] == {(): 2.0}
        assert families["kafka_kafka_metrics_count_count"] == {(): float(len(metrics.metrics()))}
        sends.record(40)                                   # read at scrape time, never cached
        assert scrape(endpoint.url)["kafka_producer_metrics_record_send_rate"] == {(("client_id", "p1"),): 2.0}
    finally:
        endpoint.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(endpoint.url, timeout=2)
    with pytest.raises(ValueError):
        serve_prometheus(metrics, "https://127.0.0.1:0")
    with pytest.raises(ValueError):
        serve_prometheus(metrics, "127.0.0.1:9404")


def test_readers_leave_out_a_metric_that_raises(caplog):
    """As Kafka's KafkaMbean.getAttributes: one metric that fails to read is logged and left out, and
    the bean (the JMX endpoint's answer, the Prometheus scrape) still shows the others."""
    jmx = MBeanServer()
    metrics = Metrics(reporters=[JmxReporter("kafka.server", jmx)])
    metrics.add_metric(metrics.metric_name("broken", "g"), Gauge(lambda: 1 / 0))
    metrics.add_metric(metrics.metric_name("fine", "g"), Gauge(lambda: 7))
    with caplog.at_level("WARNING"):
        assert jmx.get_attributes("kafka.server:type=g") == {"fine": 7}
        assert bean_values(jmx, "kafka.server:type=g") == {"kafka.server:type=g": {"fine": 7}}
        families = {f.name: f for f in KafkaMetricsCollector(metrics).collect()}
    assert "kafka_g_fine" in families and "kafka_g_broken" not in families
    assert sum("broken" in r.getMessage() for r in caplog.records) == 3
    with pytest.raises(ZeroDivisionError):
        jmx.get_attribute("kafka.server:type=g", "broken")     # asked for by name, it fails, as in JMX


@pytest.fixture
def one_sample_broker(tmp_path):
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    cluster = InProcessCluster(1, {"metrics.num.samples": 1, "metrics.jmx.listener": "http://127.0.0.1:0"},
                               data_dir=str(tmp_path)).start()
    yield cluster.broker(0)
    cluster.shutdown()


def test_a_broker_with_one_sample_answers_its_readers(one_sample_broker):
    """metrics.num.samples=1 is valid (at least 1): every rate of the broker reads, over HTTP too."""
    pattern = "kafka.server:type=socket-server-metrics,*"
    with urllib.request.urlopen(one_sample_broker.jmx_endpoint.url + "/beans?pattern=" + pattern,
                                timeout=10) as reply:
        beans = json.load(reply)["beans"]
    assert beans and all("connection-close-rate" in attributes for attributes in beans.values())
    for metric in one_sample_broker.metrics.metrics().values():
        metric.value()                                      # raises if any fails
