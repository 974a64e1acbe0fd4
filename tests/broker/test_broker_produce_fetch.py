"""Produce and Fetch over real sockets: every version, conversion both ways, sendfile, DelayedFetch."""
from __future__ import annotations

import os
import threading
import time

import pytest
from _broker_client import BrokerClient, records, values_of
from external import wait_for

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecords

PRODUCE_MAGIC = {0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2}
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1, **{v: 2 for v in range(4, 12)}}


@pytest.fixture(scope="module")
def versions_topic(broker):
    with BrokerClient(broker.bound_port()) as client:
        client.create_topic("versions")
        for version, magic in PRODUCE_MAGIC.items():
            response = client.produce("versions", 0, records(f"p{version}".encode(), magic=magic), version=version)
            assert response.error_code == 0, (version, response)
            assert response.base_offset == version
    return "versions"


@pytest.mark.parametrize("version", range(0, 12))
def test_every_fetch_version_reads_what_every_produce_version_wrote(client, versions_topic, version):
    data = client.fetch(versions_topic, 0, 0, version=version)
    assert data.error_code == 0 and data.high_watermark == 9
    assert values_of(data.records) == [f"p{v}".encode() for v in range(9)]
    assert {b.magic for b in MemoryRecords(data.records).batches()} == {FETCH_MAGIC[version]}
    assert [r.offset for r in MemoryRecords(data.records).records()] == list(range(9))


def test_old_producers_messages_are_stored_in_the_topic_format(broker, versions_topic):
    stored = broker.log_manager.get_log("versions", 0).segments[0].log.read_bytes()
    assert {b.magic for b in MemoryRecords(stored).batches()} == {2}


def test_produce_response_fields_per_version(client):
    client.create_topic("fields", **{"message_timestamp_type": "LogAppendTime"})
    response = client.produce("fields", 0, records(b"x"), version=8)
    assert response.error_code == 0 and response.base_offset == 0
    assert response.log_append_time_ms > 1_500_000_000_000 and response.log_start_offset == 0
    assert response.record_errors == [] and response.error_message is None


def test_fetch_payload_is_sent_with_sendfile_and_equals_the_log_file(broker, client, monkeypatch):
    client.create_topic("zero-copy")
    for i in range(3):
        client.produce("zero-copy", 0, records(*(f"value {i}-{j}".encode() for j in range(10)),
                                                compression=CompressionType.GZIP))
    calls = []
    real_sendfile = os.sendfile

    def spy(out_fd, in_fd, offset, count):
        call = {"offset": offset, "count": count, "sent": 0}
        calls.append(call)                  # before the syscall: the client may have the bytes before we return
        call["sent"] = real_sendfile(out_fd, in_fd, offset, count)
        return call["sent"]

    monkeypatch.setattr(os, "sendfile", spy)
    data = client.fetch("zero-copy", 0, 0)
    log_bytes = open(os.path.join(broker.log_manager.get_log("zero-copy", 0).dir, "00000000000000000000.log"),
                     "rb").read()
    assert data.records == log_bytes
    assert calls and calls[0]["offset"] == 0
    wait_for(lambda: sum(c["sent"] for c in calls) == len(log_bytes), what="sendfile to return")


def test_down_conversion_keeps_offsets_and_compression_when_the_format_can(client):
    client.create_topic("down")
    client.produce("down", 0, records(b"a", b"b", compression=CompressionType.SNAPPY))
    client.produce("down", 0, records(b"c", keys=[b"k"]))
    for version, magic in [(0, 0), (2, 1), (3, 1)]:
        data = client.fetch("down", 0, 1, version=version)
        batches = list(MemoryRecords(data.records).batches())
        assert {b.magic for b in batches} == {magic}
        got = [(r.offset, r.key, r.value) for r in MemoryRecords(data.records).records()]
        assert (1, None, b"b") in got and got[-1] == (2, b"k", b"c")


def test_zstd_cannot_be_down_converted_to_old_formats(client):
    client.create_topic("zstd")
    client.produce("zstd", 0, records(b"z", compression=CompressionType.ZSTD))
    assert client.fetch("zstd", 0, 0, version=3).error_code == Errors.UNSUPPORTED_COMPRESSION_TYPE.code
    assert values_of(client.fetch("zstd", 0, 0, version=10).records) == [b"z"]


def test_partition_errors(client):
    client.create_topic("errors")
    client.produce("errors", 0, records(b"only"))
    assert client.produce("errors", 7, records(b"x")).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert client.produce("errors", 0, records(b"x"), acks=2).error_code == Errors.INVALID_REQUIRED_ACKS.code
    assert client.produce("errors", 0, records(b"x", magic=1), version=3).error_code == Errors.CORRUPT_MESSAGE.code
    assert client.produce("errors", 0, records(b"x"), transactional_id="tx").error_code == Errors.INVALID_TXN_STATE.code
    assert client.fetch("errors", 0, 5).error_code == Errors.OFFSET_OUT_OF_RANGE.code
    assert client.fetch("errors", 3, 0).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert client.produce("__consumer_offsets", 0, records(b"x")).error_code in (
        Errors.INVALID_TOPIC_EXCEPTION.code, Errors.UNKNOWN_TOPIC_OR_PARTITION.code)
    assert values_of(client.fetch("errors", 0, 0).records) == [b"only"]


def test_max_bytes_v3_returns_at_least_one_batch_v2_does_not(client):
    client.create_topic("big")
    client.produce("big", 0, records(b"x" * 5000))
    assert values_of(client.fetch("big", 0, 0, version=4, max_bytes=100, partition_max_bytes=100).records) == [b"x" * 5000]
    partial = client.fetch("big", 0, 0, version=2, partition_max_bytes=100).records
    assert len(partial) == 100 and values_of(partial) == []


def test_fetch_sessions_answer_only_what_changed(client):
    """KIP-227 on the wire: a full fetch opens a session, incremental ones answer only partitions with news."""
    client.create_topic("sessions", partitions=2)
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
            "session_epoch": 0, "forgotten_topics_data": [], "topics": [{"topic": "sessions", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in (0, 1)]}]}
    full = client.call(ApiKeys.FETCH, 11, body)
    assert full.error_code == 0 and full.session_id != 0
    assert sorted(p.partition_index for t in full.responses for p in t.partitions) == [0, 1]
    session = full.session_id
    client.produce("sessions", 1, records(b"a", b"b"))
    news = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session, "session_epoch": 1, "topics": []})
    assert news.session_id == session
    [(topic, [answer])] = [(t.topic, t.partitions) for t in news.responses]
    assert (topic, answer.partition_index, values_of(answer.records)) == ("sessions", 1, [b"a", b"b"])
    moved = {"topic": "sessions", "partitions": [{"partition": 1, "fetch_offset": 2, "partition_max_bytes": 1 << 20}]}
    quiet = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session, "session_epoch": 2, "topics": [moved]})
    assert quiet.error_code == 0 and quiet.responses == []
    replayed = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session, "session_epoch": 2, "topics": []})
    assert replayed.error_code == Errors.INVALID_FETCH_SESSION_EPOCH.code and replayed.responses == []
    unknown = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session + 1, "session_epoch": 1, "topics": []})
    assert unknown.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code
    sessionless = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session, "session_epoch": -1})
    assert sessionless.error_code == 0 and sessionless.session_id == 0
    closed = client.call(ApiKeys.FETCH, 11, {**body, "session_id": session, "session_epoch": 3, "topics": []})
    assert closed.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code


def _background_fetch(port, **kwargs):
    result = {}

    def run():
        with BrokerClient(port, timeout=60) as c:
            started = time.monotonic()
            result["data"] = c.fetch(**kwargs)
            result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_delayed_fetch_waits_max_wait_when_nothing_arrives(client):
    client.create_topic("idle")
    started = time.monotonic()
    data = client.fetch("idle", 0, 0, max_wait_ms=300, min_bytes=1000)
    assert data.error_code == 0 and data.records == b""
    assert time.monotonic() - started >= 0.3


def test_delayed_fetch_wakes_up_when_enough_bytes_arrive(broker, client):
    client.create_topic("wake")
    thread, result = _background_fetch(broker.bound_port(), topic="wake", partition=0, offset=0,
                                       max_wait_ms=30_000, min_bytes=1000)
    wait_for(lambda: broker.replica_manager.delayed_fetch_purgatory.watch_counts().get(("wake", 0)),
             what="a fetch waiting on wake-0")
    client.produce("wake", 0, records(b"small"))
    time.sleep(0.2)
    assert "data" not in result                     # 5 bytes of value are not 1000 bytes
    client.produce("wake", 0, records(b"y" * 1200))
    thread.join(20)
    assert values_of(result["data"].records) == [b"small", b"y" * 1200]
    assert result["elapsed"] < 20                   # answered by the append, not by the 30 s timeout


def test_delayed_fetch_returns_early_when_a_segment_rolls(broker, client):
    client.create_topic("rolling", segment_bytes=200)
    client.produce("rolling", 0, records(b"r" * 100))
    thread, result = _background_fetch(broker.bound_port(), topic="rolling", partition=0, offset=1,
                                       max_wait_ms=30_000, min_bytes=100_000)
    wait_for(lambda: broker.replica_manager.delayed_fetch_purgatory.watch_counts().get(("rolling", 0)),
             what="a fetch waiting on rolling-0")
    client.produce("rolling", 0, records(b"s" * 100))
    thread.join(20)
    assert len(broker.log_manager.get_log("rolling", 0).segments) == 2
    assert values_of(result["data"].records) == [b"s" * 100] and result["elapsed"] < 20


def test_delayed_fetch_completes_when_the_partition_goes_away(broker, client):
    client.create_topic("vanishing")
    thread, result = _background_fetch(broker.bound_port(), topic="vanishing", partition=0, offset=0,
                                       max_wait_ms=30_000, min_bytes=1000)
    wait_for(lambda: broker.replica_manager.delayed_fetch_purgatory.watch_counts().get(("vanishing", 0)),
             what="a fetch waiting on vanishing-0")
    client.call(ApiKeys.DELETE_TOPICS, 3, {"topic_names": ["vanishing"], "timeout_ms": 10_000})
    thread.join(20)
    assert result["data"].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code and result["elapsed"] < 20


def test_a_partition_error_is_not_the_responses_error(client):
    """v7+ responses have a top-level error for the session; one partition's error stays with it."""
    response = client.call(ApiKeys.FETCH, 11, client.fetch_body("no-such-topic", 0, 0))
    assert response.error_code == 0 and response.session_id == 0
    assert response.responses[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
