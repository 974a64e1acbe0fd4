"""Incremental fetch sessions (KIP-227, Beyond 0.10): the cache's rules on a mock clock."""
from __future__ import annotations

import time

import pytest
from _broker_client import records

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.fetch_session import (FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache,
                                            FullFetchContext, IncrementalFetchContext, SessionlessFetchContext,
                                            next_epoch)
from kafka_edu.server.replica.replica_manager import FetchPartitionData, FetchPartitionInfo


class Slice:
    def __init__(self, size):
        self.size = size

    def size_in_bytes(self):
        return self.size


def info(offset=0):
    return FetchPartitionInfo(offset, 1 << 20)


def data(hw=10, size=0, error=Errors.NONE, log_start=0):
    return FetchPartitionData(error, hw, hw, log_start, Slice(size))


def full_session(cache, partitions=("t", 0), privileged=False):
    context = cache.new_context(11, INVALID_SESSION_ID, INITIAL_EPOCH, {partitions: info()}, [], privileged)
    assert isinstance(context, FullFetchContext)
    return context.respond([(partitions, data())])[0]


def test_old_versions_and_final_epoch_are_sessionless():
    cache = FetchSessionCache(time=MockTime())
    assert isinstance(cache.new_context(6, 0, INITIAL_EPOCH, {("t", 0): info()}, [], False), SessionlessFetchContext)
    context = cache.new_context(11, 0, FINAL_EPOCH, {("t", 0): info()}, [], False)
    assert isinstance(context, SessionlessFetchContext)
    answer = [(("t", 0), data())]
    assert context.respond(answer) == (INVALID_SESSION_ID, answer)
    assert not cache.sessions


def test_incremental_answers_only_news_and_the_epoch_must_follow():
    cache = FetchSessionCache(time=MockTime())
    sid = full_session(cache)
    assert sid != INVALID_SESSION_ID
    quiet = cache.new_context(11, sid, 1, {}, [], False)
    assert isinstance(quiet, IncrementalFetchContext) and list(quiet.partitions) == [("t", 0)]
    assert quiet.respond([(("t", 0), data())]) == (sid, [])
    for news in (data(hw=11), data(size=100), data(error=Errors.NOT_LEADER_OR_FOLLOWER), data(log_start=5)):
        context = cache.new_context(11, sid, cache.sessions[sid].epoch, {}, [], False)
        assert context.respond([(("t", 0), news)])[1] == [(("t", 0), news)]
    assert cache.new_context(11, sid, 1, {}, [], False).error is Errors.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(11, sid + 1, 1, {}, [], False).error is Errors.FETCH_SESSION_ID_NOT_FOUND


def test_updates_and_forgotten_partitions_and_closing():
    cache = FetchSessionCache(time=MockTime())
    sid = full_session(cache)
    context = cache.new_context(11, sid, 1, {("t", 1): info(7), ("t", 0): info(3)}, [], False)
    assert {tp: i.fetch_offset for tp, i in context.partitions.items()} == {("t", 0): 3, ("t", 1): 7}
    context = cache.new_context(11, sid, 2, {}, [("t", 0)], False)
    assert list(context.partitions) == [("t", 1)]
    assert isinstance(cache.new_context(11, sid, FINAL_EPOCH, {}, [], False), SessionlessFetchContext)
    assert sid not in cache.sessions


def test_a_full_request_naming_its_session_replaces_it():
    cache = FetchSessionCache(time=MockTime())
    sid = full_session(cache)
    context = cache.new_context(11, sid, INITIAL_EPOCH, {("u", 0): info()}, [], False)
    new_sid, _ = context.respond([(("u", 0), data())])
    assert sid not in cache.sessions and list(cache.sessions[new_sid].partitions) == [("u", 0)]


@pytest.mark.parametrize("epoch, expected", [(1, 2), (2**31 - 1, 1)])
def test_epochs_wrap_past_zero_and_minus_one(epoch, expected):
    assert next_epoch(epoch) == expected


def test_eviction_idle_first_and_followers_over_consumers():
    clock = MockTime()
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000, time=clock)
    first, second = full_session(cache), full_session(cache)
    assert full_session(cache) == INVALID_SESSION_ID                  # full of recent sessions
    cache.new_context(11, first, 1, {}, [], False)                    # first is now the most recent
    follower = full_session(cache, privileged=True)
    assert follower and second not in cache.sessions and first in cache.sessions
    assert full_session(cache, privileged=True) and follower in cache.sessions and first not in cache.sessions
    assert full_session(cache) == INVALID_SESSION_ID                  # followers are not evicted for consumers...
    clock.sleep(1000)
    assert full_session(cache) != INVALID_SESSION_ID                  # ...unless idle for eviction_ms
    assert cache.evictions == 3


def test_kafka_python_consumes_through_incremental_sessions(broker, client):
    """kafka-python 3 opens a session as soon as the broker serves Fetch v7: every record arrives, in
    order, while its requests after the first are incremental ones."""
    from kafka import KafkaConsumer, TopicPartition
    client.create_topic("kp-sessions", partitions=3)
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.bound_port()}", enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    try:
        partitions = [TopicPartition("kp-sessions", p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for round_ in range(4):
            for p in range(3):
                client.produce("kp-sessions", p, records(*(f"{round_}-{p}-{i}".encode() for i in range(5))))
            deadline = time.monotonic() + 20
            while sum(map(len, got.values())) < 15 * (round_ + 1):
                assert time.monotonic() < deadline, f"kafka-python stalled with {got}"
                for tp, messages in consumer.poll(timeout_ms=200).items():
                    got[tp.partition] += [m.value for m in messages]
        assert got == {p: [f"{r}-{p}-{i}".encode() for r in range(4) for i in range(5)] for p in range(3)}
        sessions = [s for s in broker.apis.fetch_sessions.sessions.values() if ("kp-sessions", 0) in s.partitions]
        assert len(sessions) == 1 and len(sessions[0].partitions) == 3
        assert sessions[0].epoch > 2                         # incremental requests followed the full one
    finally:
        consumer.close()
