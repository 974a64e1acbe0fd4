"""Option parsing, offset ranges and the rate limit: Spark's Kafka rules, checked without Spark."""
from __future__ import annotations

import pytest

from kafka_edu.common.cluster import TopicPartition
from kafka_edu.spark.kafka_offset_reader import OffsetRange, offset_ranges
from kafka_edu.spark.options import (KafkaOptionError, KafkaSinkOptions, KafkaSourceOptions, OffsetSpec,
                                     offsets_json, parse_partition_offsets)

pytestmark = pytest.mark.spark
BASE = {"kafka.bootstrap.servers": "h:9092"}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def parse(streaming=False, **options):
    return KafkaSourceOptions.parse({**BASE, **options}, streaming)


def test_defaults_and_case_insensitive_keys():
    o = KafkaSourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "a, b", "FAILONDATALOSS": "False"})
    assert (o.bootstrap_servers, o.strategy, o.topics) == ("h:1", "subscribe", ("a", "b"))
    assert o.starting == OffsetSpec("earliest") and o.ending == OffsetSpec("latest") and not o.fail_on_data_loss
    assert parse(True, subscribe="a").starting == OffsetSpec("latest")       # streaming starts at latest


def test_fetch_offset_retries():
    o = parse(True, subscribe="a")
    assert (o.fetch_offset_attempts, o.fetch_offset_interval_ms) == (3, 1000)
    o = parse(True, subscribe="a", **{"fetchOffset.numRetries": "5", "FETCHOFFSET.RETRYINTERVALMS": "10"})
    assert (o.fetch_offset_attempts, o.fetch_offset_interval_ms) == (5, 10)
    assert parse(True, subscribe="a", **{"fetchOffset.retryIntervalMs": "0"}).fetch_offset_interval_ms == 0
    with pytest.raises(KafkaOptionError, match="'fetchOffset.numRetries' must be a positive integer, got '0'"):
        parse(True, subscribe="a", **{"fetchOffset.numRetries": "0"})
    with pytest.raises(KafkaOptionError, match="'fetchOffset.retryIntervalMs' must be a non-negative integer, got 'x'"):
        parse(True, subscribe="a", **{"fetchOffset.retryIntervalMs": "x"})


def test_assign_pattern_offsets_and_kafka_params():
    o = parse(assign='{"a":[1,0],"b":[0]}', startingOffsets='{"a":{"0":5,"1":-2}}', endingOffsets='{"a":{"0":-1}}',
              **{"kafka.fetch.max.wait.ms": "50", "minPartitions": "3", "maxOffsetsPerTrigger": "10",
                 "includeHeaders": "true"})
    assert o.partitions == (A0, A1, B0)
    assert o.starting.as_dict() == {A0: 5, A1: -2} and o.ending.as_dict() == {A0: -1}
    assert o.params == {"fetch.max.wait.ms": "50"} and o.min_partitions == 3 and o.max_offsets_per_trigger == 10
    assert o.include_headers
    assert parse(subscribePattern="cl.*").pattern == "cl.*"
    assert parse(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":1000}}').starting == \
        OffsetSpec("timestamps", ((A0, 1000),))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"),
    ({**BASE}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern"),
    ({**BASE, "subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
    ({**BASE, "subscribe": "a", "subscribePattern": "a.*"}, "Only one of the following options can be specified"),
    ({**BASE, "subscribe": " , "}, "No topics to subscribe to"),
    ({**BASE, "subscribePattern": " "}, "Pattern to subscribe is empty"),
    ({**BASE, "subscribePattern": "cl(icks"}, "Pattern to subscribe is invalid as specified value for option "
                                              "'subscribePattern' is 'cl(icks': missing ), unterminated subpattern"),
    ({**BASE, "assign": "[0]"}, 'Expected e.g. {"topicA":[0,1],"topicB":[2,4]}, got [0]'),
    ({**BASE, "subscribe": "a", "startingOffsets": "first"}, 'Expected e.g. {"topicA":{"0":23,"1":-1}'),
    ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, "Option 'failOnDataLoss' must be true or false"),
    ({**BASE, "subscribe": "a", "minPartitions": "0"}, "Option 'minPartitions' must be a positive integer"),
    ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "x"}, "'maxOffsetsPerTrigger' must be a positive integer"),
    ({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not"),
    ({**BASE, "subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not"),
])
def test_invalid_options_name_the_problem(options, message):
    with pytest.raises(KafkaOptionError, match=None) as e:
        KafkaSourceOptions.parse(options)
    assert message in str(e.value)


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest for batch queries"),
    ({"endingOffsets": '{"a":{"0":-2}}'}, "endingOffsets for a-0 can't be earliest for batch queries"),
])
def test_batch_only_rules(options, message):
    options = parse(subscribe="a", **options)
    with pytest.raises(KafkaOptionError) as e:
        options.for_batch()
    assert message in str(e.value)


def test_streaming_refuses_ending_offsets():
    with pytest.raises(KafkaOptionError, match="Ending offset not valid in streaming queries"):
        parse(True, subscribe="a", endingOffsets="latest")


def test_sink_options():
    assert KafkaSinkOptions.parse({**BASE, "topic": "t", "kafka.linger.ms": "3"}) == \
        KafkaSinkOptions("h:9092", "t", {"linger.ms": "3"})
    with pytest.raises(KafkaOptionError, match="configuring Kafka producer"):
        KafkaSinkOptions.parse({"topic": "t"})


def test_offsets_json_round_trip_is_sorted():
    offsets = parse_partition_offsets('{"b":{"0":7},"a":{"1":3,"0":2}}')
    assert offsets_json(offsets) == {"a": {"0": 2, "1": 3}, "b": {"0": 7}}
    assert list(offsets_json(offsets)) == ["a", "b"]


def test_offset_ranges_one_per_partition_and_split_by_min_partitions():
    start, end = {A0: 0, A1: 5, B0: 3}, {A0: 10, A1: 1005, B0: 3}
    assert offset_ranges(start, end) == [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 1005)]
    sliced = offset_ranges(start, end, min_partitions=5)
    assert sliced[0] == OffsetRange("a", 0, 0, 10)
    assert [(r.from_offset, r.until_offset) for r in sliced[1:]] == [(5, 205), (205, 405), (405, 605), (605, 805), (805, 1005)]
    assert offset_ranges(start, end, min_partitions=2) == offset_ranges(start, end)   # already enough


def test_kafka_params_are_checked_as_client_settings():
    from kafka_edu.common.config import ConfigException
    with pytest.raises(ConfigException, match="fetch.max.wait.ms"):
        parse(subscribe="a", **{"kafka.fetch.max.wait.ms": "soon"})
    with pytest.raises(ConfigException, match="linger.ms"):
        KafkaSinkOptions.parse({**BASE, "kafka.linger.ms": "later"})
    configs = KafkaSinkOptions.parse({**BASE, "kafka.linger.ms": "0"}).producer_configs()
    assert configs["enable.idempotence"] is True and configs["linger.ms"] == "0"
