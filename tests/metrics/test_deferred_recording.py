"""Sensors defer their values and fold them in batches: what is read must equal Kafka's one-by-one recording."""
import math
import random
import threading

import pytest

from kafka_edu.common.metrics import metrics as metrics_module
from kafka_edu.common.metrics.metrics import Metrics, QuotaViolationError
from kafka_edu.common.metrics.metrics_group import CumulativeCount, MeanRate
from kafka_edu.common.metrics.stats import (
    Avg, Count, Max, MetricConfig, Min, Percentile, Percentiles, Quota, Rate, SampledTotal, Total, Value)
from kafka_edu.common.utils.time import MockTime


def stats_under_test():
    return {"n": Count(), "total": SampledTotal(), "avg": Avg(), "max": Max(), "min": Min(),
            "rate": Rate(), "event-rate": Rate(stat=Count()), "sum": Total(), "last": Value(),
            "ever": CumulativeCount(), "mean-rate": MeanRate(0),
            "hist": Percentiles(400, 100.0, "linear", percentiles=(Percentile("p50", 50), Percentile("p99", 99)))}


def add_all(metrics, sensor, stats):
    for name, stat in stats.items():
        if name == "hist":
            sensor.add(Percentiles(400, 100.0, "linear", percentiles=(
                Percentile(metrics.metric_name("p50", "g"), 50), Percentile(metrics.metric_name("p99", "g"), 99))))
        else:
            sensor.add(stat, metrics.metric_name(name, "g"))


def reference_values(events, read_ms, config):
    """Kafka's way: every stat records every value at once."""
    stats = stats_under_test()
    for value, now_ms in events:
        for stat in stats.values():
            stat.record(config, value, now_ms)
    hist = stats.pop("hist")
    found = {name: stat.measure(config, read_ms) for name, stat in stats.items()}
    found.update({m.name: m.stat.measure(config, read_ms) for m in hist.stats()})
    return found


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("seed", range(6))
def test_deferred_values_read_as_if_recorded_one_by_one(seed):
    rng = random.Random(seed)
    config = MetricConfig(samples=3, time_window_ms=1000, event_window=rng.choice([7, 1_000_000]))
    clock = MockTime(auto_tick_ms=0)
    metrics = Metrics(config, time=clock)
    sensor = metrics.sensor("s")
    add_all(metrics, sensor, stats_under_test())
    events, now, reads = [], 0, []
    for _ in range(2000):
        now += rng.choice([0, 0, 1, 3, 40, 700])
        jitter = rng.choice([0, 0, 0, -2])             # threads stamp times a little out of order
        value = rng.choice([0, 1, 2, 5, 17.5, 99, 250])
        events.append((value, now + jitter))
        sensor.record(value, now + jitter)
        if rng.random() < 0.01:                        # a reader now and then, in the middle of a batch
            clock.sleep(now - clock.milliseconds())
            reads.append((len(events), now, {n.name: m.value() for n, m in metrics.metrics().items() if n.group == "g"}))
    clock.sleep(now + 500 - clock.milliseconds())
    reads.append((len(events), now + 500, {n.name: m.value() for n, m in metrics.metrics().items() if n.group == "g"}))
    for count, read_ms, found in reads:
        expected = reference_values(events[:count], read_ms, config)
        for name, value in expected.items():
            assert same(found[name], value), (count, name, found[name], value)


def test_parents_quotas_late_stats_and_the_fold_bound():
    clock = MockTime(auto_tick_ms=0)
    metrics = Metrics(MetricConfig(samples=2, time_window_ms=1000), time=clock)
    parent = metrics.sensor("parent")
    parent.add(Total(), metrics.metric_name("parent-total", "g"))
    child = metrics.sensor("child", parents=[parent])
    child.add(Total(), metrics.metric_name("child-total", "g"))
    for _ in range(metrics_module.FOLD_AT + 3):
        child.record(2)
    assert len(child._pending) < metrics_module.FOLD_AT          # memory stays bounded between reads
    assert metrics.metric(metrics.metric_name("parent-total", "g")).value() == 2 * (metrics_module.FOLD_AT + 3)
    child.add(Count(), metrics.metric_name("child-count", "g"))  # a late stat does not see earlier values
    child.record(1)
    assert metrics.metric(metrics.metric_name("child-count", "g")).value() == 1
    # a quota on the parent: the child's very record raises, and the value counts all the same
    parent.add(Rate(), metrics.metric_name("parent-rate", "g"),
               MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(1)))
    with pytest.raises(QuotaViolationError):
        child.record(5)
    assert metrics.metric(metrics.metric_name("parent-rate", "g")).value() == 5 / 1.0
    assert metrics.metric(metrics.metric_name("child-total", "g")).value() == 2 * (metrics_module.FOLD_AT + 3) + 6


def test_concurrent_records_are_all_counted():
    metrics = Metrics()
    sensor = metrics.sensor("busy")
    sensor.add(Total(), metrics.metric_name("total", "g"))
    sensor.add(Count(), metrics.metric_name("count", "g"))

    def work():
        for _ in range(20_000):
            sensor.record(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    reads = [metrics.metric(metrics.metric_name("total", "g")).value() for _ in range(50)]
    for thread in threads:
        thread.join()
    assert reads == sorted(reads)
    assert metrics.metric(metrics.metric_name("total", "g")).value() == 80_000
    assert metrics.metric(metrics.metric_name("count", "g")).value() == 80_000


def test_joint_recorder_reads_as_separate_records_and_keeps_expiry():
    clock = MockTime(auto_tick_ms=0)
    metrics = Metrics(MetricConfig(samples=2, time_window_ms=1000), time=clock)
    joint_sensors = [metrics.sensor(f"joint-{i}", inactive_expiration_s=10) for i in range(3)]
    plain_sensors = [metrics.sensor(f"plain-{i}") for i in range(3)]
    for i, (a, b) in enumerate(zip(joint_sensors, plain_sensors, strict=True)):
        for sensor, group in ((a, "joint"), (b, "plain")):
            sensor.add(Avg(), metrics.metric_name(f"avg-{i}", group))
            sensor.add(Rate(), metrics.metric_name(f"rate-{i}", group))
    joint = metrics_module.JointRecorder(joint_sensors)
    rng = random.Random(7)
    for _ in range(3 * metrics_module.FOLD_AT):
        clock.sleep(rng.choice([0, 1, 9, 400]))
        values = tuple(rng.choice([0, 1, 3.5, 40]) for _ in range(3))
        joint.record(values, clock.milliseconds())
        for sensor, value in zip(plain_sensors, values, strict=True):
            sensor.record(value)
        assert len(joint._pending) < metrics_module.FOLD_AT
    for i in range(3):
        for stat in ("avg", "rate"):
            assert metrics.metric(metrics.metric_name(f"{stat}-{i}", "joint")).value() == \
                metrics.metric(metrics.metric_name(f"{stat}-{i}", "plain")).value()
    clock.sleep(10_000)
    assert metrics.expire_sensors() == []                        # the joint queue's last record counts
    clock.sleep(1)
    assert sorted(metrics.expire_sensors()) == ["joint-0", "joint-1", "joint-2"]
    with pytest.raises(ValueError):
        metrics_module.JointRecorder([metrics.sensor("child", parents=[plain_sensors[0]])])


def test_reading_one_joint_sensor_keeps_its_siblings_bounded():
    """A monitor polls RequestsPerSec only: the stage histograms sharing its joint queue are never read,
    yet their queues stay below FOLD_AT (one entry per request otherwise)."""
    from kafka_edu.common.metrics.jmx_reporter import JmxReporter, MBeanServer
    from kafka_edu.server.network.request_metrics import STAGES, RequestMetrics
    requests_per_sec = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce"
    clock, jmx = MockTime(), MBeanServer()
    request_metrics = RequestMetrics(Metrics(time=clock, reporters=[JmxReporter("kafka.server", jmx)]))
    _, histograms = request_metrics.sensors("Produce")
    joint = request_metrics._recorders["Produce"]
    for i in range(20 * metrics_module.FOLD_AT):
        clock.sleep(1)
        joint.record((1, 0, 1, 2, 0, 1, 4), clock.milliseconds())
        if i % 50 == 0:                                   # a monitor polls the request rate
            jmx.get_attribute(requests_per_sec, "Count")
        assert max(len(histograms[stage]._pending) for stage in STAGES) < metrics_module.FOLD_AT
    assert histograms["TotalTimeMs"].metrics[0].value() == 20 * metrics_module.FOLD_AT     # its Count


def test_a_refused_value_is_logged_and_dropped_alone(caplog):
    """-5 ms in a linear histogram: Kafka refuses it to the recorder; deferred, it reaches the stats in
    the reader's fold, which must still answer, with every other value counted, in every stat."""
    config = MetricConfig(samples=2, time_window_ms=1000)
    clock = MockTime()
    metrics = Metrics(config, time=clock)
    sensor = metrics.sensor("durations")
    add_all(metrics, sensor, stats_under_test())
    good = [(10, 0), (20, 10), (30, 20), (40, 1500)]
    # a batch folded in one step, then one folded value by value (its last value starts a window)
    for batch in (good[:2] + [(-5, 15)] + good[2:3], [(-5, 1400)] + good[3:]):
        for value, now_ms in batch:
            sensor.record(value, now_ms)
        clock.sleep(batch[-1][1] - clock.milliseconds())
        with caplog.at_level("WARNING", logger="kafka_edu.common.metrics.stats"):
            found = {n.name: m.value() for n, m in metrics.metrics().items() if n.group == "g"}
    assert len([r for r in caplog.records if "refused the value -5" in r.getMessage()]) == 2
    hist = stats_under_test()["hist"]
    for value, now_ms in good:
        hist.record(config, value, now_ms)
    assert (found["p50"], found["p99"]) == (hist.stats()[0].stat.measure(config, 1500),
                                            hist.stats()[1].stat.measure(config, 1500))
    assert found["n"] == 6 and found["min"] == -5        # the other stats take -5, as Kafka's would


def test_a_rate_over_one_sample_reads_without_dividing_by_zero():
    """metrics.num.samples=1 pads no window: a sample that starts now covers 0 ms, read as 1 ms."""
    clock = MockTime()
    metrics = Metrics(MetricConfig(samples=1, time_window_ms=1000), time=clock)
    sensor = metrics.sensor("s")
    sensor.add(Rate(), metrics.metric_name("rate", "g"))
    rate = metrics.metric(metrics.metric_name("rate", "g"))
    assert rate.value() == 0                                # nothing recorded yet
    sensor.record(10)
    clock.sleep(500)
    assert rate.value() == 10 / 0.5
    clock.sleep(5000)                                       # idle: the sample is purged, reset to now
    assert rate.value() == 0
