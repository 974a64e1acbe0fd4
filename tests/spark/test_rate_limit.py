"""maxOffsetsPerTrigger as Spark's Kafka source shares it: in proportion to each partition's backlog."""
from __future__ import annotations

import pytest

from kafka_edu.common.cluster import TopicPartition

pytestmark = pytest.mark.spark
A, B, C = (TopicPartition("t", p) for p in range(3))


def test_rate_limit_shares_by_backlog():
    from _spark_helpers import require_spark
    require_spark()
    from kafka_edu.spark.streaming import rate_limit
    assert rate_limit(500, {A: 100, B: 0}, {A: 1000, B: 100}) == {A: 550, B: 50}
    assert rate_limit(5000, {A: 100, B: 0}, {A: 1000, B: 100}) == {A: 1000, B: 100}   # all of it fits
    assert rate_limit(2, {A: 0, B: 0, C: 5}, {A: 1000, B: 1, C: 5}) == {A: 1, B: 1, C: 5}  # < 1 rounds up
