"""Acceptance test T29 (metrics math on a mock clock) and the stats, sensors and registry around it."""
import math

import pytest

from kafka_edu.common.metrics.metrics import Gauge, Metrics, MetricName, QuotaViolationError
from kafka_edu.common.metrics.stats import (
    Avg, ConstantBinScheme, Count, LinearBinScheme, Max, MetricConfig, Min, Percentile, Percentiles, Quota, Rate,
    SampledTotal, Total)
from kafka_edu.common.utils.time import MockTime

T29 = MetricConfig(samples=2, time_window_ms=30_000)


def test_t29_young_rate_is_compensated_and_idle_samples_are_purged():
    rate = Rate()
    for i in range(60):                                   # 60 events within the first 10 s
        rate.record(T29, 1, i * 10_000 // 60)
    assert rate.measure(T29, 10_000) == pytest.approx(60 / (10 + 30))   # 1.5/s, not 6/s
    assert rate.measure(T29, 10_000 + 61_000) == 0.0      # 61 s idle: the sample is purged


def test_rate_window_after_full_windows_is_not_padded():
    rate = Rate(stat=Count())
    for t in range(0, 90_000, 1_000):                     # one event a second for 90 s
        rate.record(T29, 123, t)
    # kept: the windows begun at 30 s and 60 s (the one of 0 s was reused), 30 events each
    assert sorted(s.last_window_ms for s in rate.stat.samples) == [30_000, 60_000]
    assert rate.measure(T29, 89_000) == pytest.approx(60 / 59)


def test_rate_units_for_ratios():
    ratio = Rate("nanoseconds")
    ratio.record(T29, 15_000_000_000, 0)                  # 15 s of waiting, in ns
    assert ratio.measure(T29, 10_000) == pytest.approx(15 / 40)     # young: padded to one full window
    assert ratio.measure(T29, 30_000) == pytest.approx(15 / 30)
    with pytest.raises(ValueError):
        Rate("fortnights")


def test_avg_max_min_over_two_windows_then_one():
    avg, biggest, smallest = Avg(), Max(), Min()
    for t, v in [(0, 10), (5_000, 30), (31_000, 2), (40_000, 4)]:
        for stat in (avg, biggest, smallest):
            stat.record(T29, v, t)
    assert (avg.measure(T29, 45_000), biggest.measure(T29, 45_000), smallest.measure(T29, 45_000)) == (11.5, 30, 2)
    assert (avg.measure(T29, 61_000), biggest.measure(T29, 61_000), smallest.measure(T29, 61_000)) == (3.0, 4, 2)
    assert math.isnan(Avg().measure(T29, 0)) and Max().measure(T29, 0) == -math.inf


def test_ring_reuses_slots_and_event_window_completes_samples():
    config = MetricConfig(samples=3, time_window_ms=1_000, event_window=2)
    total = SampledTotal()
    for t in range(7):                                    # 2 events per sample by count, long before 1 s
        total.record(config, 1, t)
    assert len(total.samples) == 3
    assert sorted(s.event_count for s in total.samples) == [1, 2, 2]   # the 7th event started a reused slot
    assert total.measure(config, 6) == 5


def test_total_never_forgets():
    total = Total()
    total.record(T29, 5, 0)
    total.record(T29, 7, 1_000_000)
    assert total.measure(T29, 10_000_000) == 12


def test_bin_schemes():
    constant = ConstantBinScheme(12, 0, 100)              # underflow, 10 bins of 10, overflow
    assert [constant.to_bin(x) for x in (-1, 0, 9.9, 10, 100, 101)] == [0, 1, 1, 2, 11, 11]
    assert constant.from_bin(0) == -math.inf and constant.from_bin(3) == 20 and constant.from_bin(11) == math.inf
    linear = LinearBinScheme(10, 45)
    assert [linear.from_bin(b) for b in (0, 1, 2, 3, 9)] == [0, 1, 3, 6, 45]
    assert [linear.to_bin(x) for x in (0, 0.9, 1, 2.9, 3, 44, 46)] == [0, 0, 1, 1, 2, 8, 9]


def test_percentiles_follow_the_bins():
    p = Percentiles(4 * 102, max=1000, percentiles=(Percentile("p50", 50), Percentile("p99", 99),
                                                    Percentile("p100", 100)))
    for t in range(1000):
        p.record(T29, t % 100 + (900 if t % 100 == 99 else 0), t)
    values = {m.name: m.stat.measure(T29, 1000) for m in p.stats()}
    assert values["p50"] == 50 and values["p99"] == 990 and values["p100"] == math.inf


def t29_registry():
    clock = MockTime()
    metrics = Metrics(T29, time=clock)
    return clock, metrics


def test_t29_child_records_into_parent():
    clock, metrics = t29_registry()
    both = metrics.sensor("bytes-sent-received")
    both.add(Rate(stat=Count()), metrics.metric_name("network-io-rate", "g"))
    sent = metrics.sensor("bytes-sent", parents=[both])
    sent.add(Rate(), metrics.metric_name("outgoing-byte-rate", "g"))
    for _ in range(30):
        sent.record(100)
    clock.sleep(10_000)
    assert metrics.metric(metrics.metric_name("network-io-rate", "g")).value() == pytest.approx(30 / 40)
    assert metrics.metric(metrics.metric_name("outgoing-byte-rate", "g")).value() == pytest.approx(3000 / 40)
    assert metrics.children(both) == [sent]


def test_t29_quota_violation_raises_after_recording():
    clock, metrics = t29_registry()
    parent = metrics.sensor("all-clients")
    parent.add(Total(), metrics.metric_name("total", "q"))
    sensor = metrics.sensor("client-a", parents=[parent])
    name = metrics.metric_name("byte-rate", "q", tags={"client-id": "a"})
    sensor.add(Rate(), name, MetricConfig(samples=2, time_window_ms=1_000, quota=Quota.upper_bound(100)))
    sensor.record(50)                                     # 50 / 1 s: fine
    with pytest.raises(QuotaViolationError) as raised:
        sensor.record(100)                                # 150 / 1 s
    assert raised.value.metric_name == name and raised.value.value == pytest.approx(150)
    assert metrics.metric(name).value() == pytest.approx(150)    # recorded all the same
    assert metrics.metric(metrics.metric_name("total", "q")).value() == 50   # parents not reached
    assert Quota.lower_bound(5).acceptable(5) and not Quota.lower_bound(5).acceptable(4)


def test_t29_duplicate_metric_name_raises():
    _, metrics = t29_registry()
    sensor = metrics.sensor("s")
    sensor.add(Max(), metrics.metric_name("m", "g", tags={"a": "1", "b": "2"}))
    with pytest.raises(ValueError):
        metrics.sensor("other").add(Avg(), MetricName("m", "g", "another description", {"b": "2", "a": "1"}))
    metrics.add_metric(metrics.metric_name("m", "g", tags={"a": "1"}), Gauge(lambda: 1))   # other tags: fine


def test_sensor_is_get_or_create_and_refuses_cycles():
    _, metrics = t29_registry()
    a = metrics.sensor("a")
    assert metrics.sensor("a") is a
    b = metrics.sensor("b", parents=[a])
    a.parents = (b,)                                      # forced cycle: a new child of b must notice it
    with pytest.raises(ValueError):
        metrics.sensor("c", parents=[b])


def test_t29_idle_sensor_removed_by_expiry_task_with_children():
    clock, metrics = t29_registry()
    count_name = metrics.metric_name("count", "kafka-metrics-count")
    idle = metrics.sensor("client-b", inactive_expiration_s=60)
    idle.add(Rate(), metrics.metric_name("byte-rate", "q", tags={"client-id": "b"}))
    child = metrics.sensor("client-b-child", parents=[idle])
    child.add(Max(), metrics.metric_name("max", "q", tags={"client-id": "b"}))
    forever = metrics.sensor("forever")
    forever.add(Max(), metrics.metric_name("forever-max", "q"))
    assert metrics.metric(count_name).value() == 4
    idle.record(1)
    clock.sleep(60_000)
    assert metrics.expire_sensors() == []                 # exactly the limit: not yet
    clock.sleep(1)
    assert metrics.expire_sensors() == ["client-b"]
    assert metrics.get_sensor("client-b") is None and metrics.get_sensor("client-b-child") is None
    assert set(n.name for n in metrics.metrics()) == {"count", "forever-max"}
    assert metrics.metric(count_name).value() == 2


def test_expiry_thread_runs_and_stops(monkeypatch):
    from kafka_edu.common.metrics import metrics as module
    monkeypatch.setattr(module, "EXPIRE_SENSOR_PERIOD_S", 0.01)
    clock = MockTime()
    metrics = Metrics(T29, time=clock, enable_expiration=True)
    metrics.sensor("idle", inactive_expiration_s=1).record(1)
    clock.sleep(2_000)
    import time
    deadline = time.monotonic() + 10
    while metrics.get_sensor("idle") is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    metrics.close()
    assert metrics.get_sensor("idle") is None
