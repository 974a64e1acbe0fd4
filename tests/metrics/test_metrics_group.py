"""Yammer-style broker metrics (KafkaMetricsGroup) and the per-request stage histograms, on a mock clock."""
import struct

import pytest

from kafka_edu.common.metrics.jmx_reporter import JmxReporter, MBeanServer
from kafka_edu.common.metrics.metrics import Metrics
from kafka_edu.common.metrics.metrics_group import KafkaMetricsGroup
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.network.request_channel import ANONYMOUS, Request, Session
from kafka_edu.server.network.request_metrics import RequestMetrics, fetch_replica_id, request_name, stage_times


def registry():
    clock, jmx = MockTime(), MBeanServer()
    return clock, jmx, Metrics(time=clock, reporters=[JmxReporter("kafka.server", jmx)])


def test_meter_attributes():
    clock, jmx, metrics = registry()
    meter = KafkaMetricsGroup(metrics, "kafka.server", "BrokerTopicMetrics").new_meter("MessagesInPerSec",
                                                                                        {"topic": "t"})
    for _ in range(4):
        clock.sleep(5_000)
        meter.record(10)                                   # mark(10)
    attributes = jmx.get_attributes("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t")
    assert attributes["Count"] == 40
    assert attributes["MeanRate"] == pytest.approx(40 / 20)
    assert attributes["OneMinuteRate"] == pytest.approx(40 / (15 + 40))    # 6 × 10 s samples, young window
    assert attributes["FiveMinuteRate"] == pytest.approx(40 / (15 + 300))
    clock.sleep(200_000)
    assert jmx.get_attribute("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t",
                             "OneMinuteRate") == 0                        # windows forget, Count does not
    assert jmx.get_attribute("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t", "Count") == 40


def test_histogram_timer_and_gauge():
    clock, jmx, metrics = registry()
    group = KafkaMetricsGroup(metrics, "kafka.controller", "ControllerStats")
    timer = group.new_timer("LeaderElectionRateAndTimeMs")
    for ms in range(1, 101):                               # 1..100 ms
        timer.record(ms)
    attributes = jmx.get_attributes("kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs")
    assert (attributes["Count"], attributes["Min"], attributes["Max"], attributes["Mean"]) == (100, 1, 100, 50.5)
    assert attributes["50thPercentile"] == pytest.approx(50, abs=3)          # as precise as the linear bins
    assert attributes["99thPercentile"] == pytest.approx(99, abs=3)
    assert {"OneMinuteRate", "MeanRate", "999thPercentile"} <= set(attributes)
    size = [3]
    KafkaMetricsGroup(metrics, "kafka.log", "Log").new_gauge("Size", lambda: size[0], {"topic": "t", "partition": "0"})
    size[0] = 7
    assert jmx.get_attribute("kafka.log:type=Log,name=Size,topic=t,partition=0", "Value") == 7
    group.remove_metric("LeaderElectionRateAndTimeMs")
    KafkaMetricsGroup(metrics, "kafka.log", "Log").remove_metric("Size", {"topic": "t", "partition": "0"})
    assert jmx.query_names("kafka.controller:*") == [] and jmx.query_names("kafka.log:*") == []


def frame(api_key: int, body: bytes = b"", client_id: bytes | None = b"c") -> bytes:
    length = -1 if client_id is None else len(client_id)
    return struct.pack(">hhih", api_key, 0, 7, length) + (client_id or b"") + body


def request(api_key, body=b"", stamps=(0, 1, 2, 3, 4, 5, 6), client_id=b"c"):
    r = Request(0, "conn", Session(ANONYMOUS, "127.0.0.1"), frame(api_key, body, client_id), stamps[0])
    (r.request_dequeue_time_ms, r.api_local_complete_time_ms, r.api_remote_complete_time_ms,
     r.response_complete_time_ms, r.response_dequeue_time_ms, r.send_complete_time_ms) = stamps[1:]
    return r


def test_stage_times_clamp_and_fill_skipped_stages():
    assert stage_times(request(ApiKeys.PRODUCE, stamps=(100, 103, 110, 400, 400, 402, 405))) == {
        "RequestQueueTimeMs": 3, "LocalTimeMs": 7, "RemoteTimeMs": 290, "ResponseQueueTimeMs": 2,
        "ResponseSendTimeMs": 3, "TotalTimeMs": 305}
    skipped = stage_times(request(ApiKeys.METADATA, stamps=(100, 101, -1, -1, 104, 103, 106)))
    assert skipped["LocalTimeMs"] == 3 and skipped["RemoteTimeMs"] == 0      # no purgatory: remote 0
    assert skipped["ResponseQueueTimeMs"] == 0                              # a clock step: clamped


def test_request_names_and_fetch_replica_id():
    assert request_name(ApiKeys.FIND_COORDINATOR) == "FindCoordinator" and request_name(ApiKeys.PRODUCE) == "Produce"
    assert request_name(999) == "Unknown999"
    assert fetch_replica_id(frame(ApiKeys.FETCH, struct.pack(">i", 3))) == 3
    assert fetch_replica_id(frame(ApiKeys.FETCH, struct.pack(">i", -1), client_id=None)) == -1
    assert fetch_replica_id(frame(ApiKeys.FETCH)) is None                   # too short: a consumer fetch


def test_request_metrics_per_name():
    clock, jmx, metrics = registry()
    request_metrics = RequestMetrics(metrics)
    request_metrics.update(request(ApiKeys.FETCH, struct.pack(">i", 1), (0, 2, 3, 503, 503, 504, 505)))
    request_metrics.update(request(ApiKeys.FETCH, struct.pack(">i", -1), (0, 1, 2, 2, 2, 3, 4)))
    request_metrics.update(request(ApiKeys.PRODUCE))
    name = "kafka.network:type=RequestMetrics,name={},request={}".format
    assert jmx.get_attribute(name("RemoteTimeMs", "FetchFollower"), "Max") == 500
    assert jmx.get_attribute(name("RemoteTimeMs", "FetchConsumer"), "Max") == 0
    assert jmx.get_attribute(name("TotalTimeMs", "Fetch"), "Count") == 2
    assert jmx.get_attribute(name("RequestsPerSec", "Produce"), "Count") == 1
    assert not jmx.is_registered(name("TotalTimeMs", "Metadata"))          # created on first use


ELECTIONS = "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"


def test_timer_rates_count_events_not_their_durations():
    """A Yammer Timer's update(duration) is one mark() of its meter, whatever the duration."""
    clock, jmx, metrics = registry()
    timer = KafkaMetricsGroup(metrics, "kafka.controller", "ControllerStats").new_timer(
        "LeaderElectionRateAndTimeMs")
    meter = KafkaMetricsGroup(metrics, "kafka.test", "Reference").new_meter("EventsPerSec")
    for duration_ms in (0, 40, 300):                       # three elections, a second apart; one takes 0 ms
        clock.sleep(1000)
        timer.record(duration_ms)
        meter.record(1)
    timed = jmx.get_attributes(ELECTIONS)
    events = jmx.get_attributes("kafka.test:type=Reference,name=EventsPerSec")
    assert timed["Count"] == 3 and timed["Mean"] == pytest.approx(340 / 3)
    assert timed["MeanRate"] == pytest.approx(3 / 3.0)                  # 3 elections in 3 s
    for rate in ("MeanRate", "OneMinuteRate", "FiveMinuteRate", "FifteenMinuteRate"):
        assert timed[rate] == pytest.approx(events[rate]), rate


def test_an_election_is_timed_on_the_monotonic_clock():
    """The wall clock steps back an hour during an election: the election still took 7 ms."""
    from kafka_edu.server.controller.kafka_controller import KafkaController
    clock, jmx, metrics = registry()
    clock.set_milliseconds(3_600_000)

    class Controller:                                       # what on_broker_failure uses of its controller
        time = clock
        leader_election_timer = KafkaMetricsGroup(metrics, "kafka.controller", "ControllerStats").new_timer(
            "LeaderElectionRateAndTimeMs")

        def _move_off_dead_brokers(self, dead):
            clock.set_milliseconds(0)
            clock.sleep(7)

    KafkaController.on_broker_failure(Controller(), [1])
    attributes = jmx.get_attributes(ELECTIONS)
    assert (attributes["Count"], attributes["Min"], attributes["Max"]) == (1, 7, 7)
