"""The follower's fetch session (KIP-227): the client-side handler, alone and in a replicating cluster."""
from __future__ import annotations

from _broker_client import records, values_of
from _cluster import wait_until
from test_replica_fetcher import segment_bytes

from kafka_edu.clients.fetch_session_handler import (INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionHandler,
                                                     PartitionRequest)
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import decode_response, encode_response
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.fetch_session import FetchSessionCache
from kafka_edu.server.replica.replica_manager import FetchPartitionData, FetchPartitionInfo

VERSION = ApiKeys.FETCH.max_version


class _Empty(bytes):
    def size_in_bytes(self):
        return len(self)


def exchange(cache, data, high_watermark=100, privileged=True, version=VERSION):
    """The broker's Fetch handler in memory: context, read (nothing new), filtered answer, real encoding."""
    to_fetch = {tp: FetchPartitionInfo(w.fetch_offset, w.max_bytes, w.leader_epoch) for tp, w in data.to_send.items()}
    context = cache.new_context(version, data.session_id, data.epoch, to_fetch, data.forgotten, privileged)
    session_id, results = context.respond([(tp, FetchPartitionData(Errors.NONE, high_watermark, high_watermark, 0,
                                                                   _Empty())) for tp in sorted(context.partitions)])
    topics = {}
    for (topic, partition), r in results:
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": 0, "high_watermark":
                                             r.high_watermark, "aborted_transactions": None, "records": b""})
    frame = encode_response(1, ApiKeys.FETCH, version, {"throttle_time_ms": 0, "error_code": context.error.code,
                                                        "session_id": session_id,
                                                        "responses": [{"topic": t, "partitions": ps}
                                                                      for t, ps in topics.items()]})
    return decode_response(frame[4:], ApiKeys.FETCH, version)[1]


def wanted_of(n, offset=0):
    return {("t", p): PartitionRequest(offset, 1 << 20, 0) for p in range(n)}


def answered(response):
    return sorted((t.topic, p.partition_index) for t in response.responses for p in t.partitions)


def test_a_session_opens_then_idle_requests_carry_nothing():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    first = handler.build_next(wanted_of(5))
    assert first.is_full and len(first.to_send) == 5 and first.session_id == INVALID_SESSION_ID
    assert handler.handle_response(exchange(cache, first))
    [session] = cache.sessions.values()
    assert (handler.session_id, handler.epoch) == (session.id, 1) and session.privileged
    for epoch in (1, 2, 3):
        data = handler.build_next(wanted_of(5))
        assert (data.epoch, data.to_send, data.forgotten) == (epoch, {}, [])
        response = exchange(cache, data)
        assert answered(response) == [] and handler.handle_response(response)     # omitted: no news
    assert (handler.full_answered, handler.incremental_answered, session.epoch) == (1, 3, 4)


def test_changed_added_and_removed_partitions_are_all_that_is_sent():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    handler.handle_response(exchange(cache, handler.build_next(wanted_of(4))))
    wanted = wanted_of(4)
    wanted[("t", 1)] = PartitionRequest(7, 1 << 20, 0)      # fetched records: new offset
    wanted[("t", 2)] = PartitionRequest(0, 1 << 20, 1)      # new leader epoch
    del wanted[("t", 3)]                                    # moved to another fetcher
    wanted[("u", 0)] = PartitionRequest(0, 1 << 20, 0)      # added by a LeaderAndIsr
    data = handler.build_next(wanted)
    assert sorted(data.to_send) == [("t", 1), ("t", 2), ("u", 0)] and data.forgotten == [("t", 3)]
    response = exchange(cache, data)
    assert answered(response) == [("u", 0)]                 # only the new partition has offsets to report
    assert handler.handle_response(response)
    [session] = cache.sessions.values()
    assert sorted(session.partitions) == [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    assert session.partitions[("t", 1)].info.fetch_offset == 7 and handler.session_partitions == wanted


def test_a_lost_session_costs_one_empty_answer_then_a_full_request():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    handler.handle_response(exchange(cache, handler.build_next(wanted_of(3))))
    cache.sessions.clear()                                  # a leader restart
    response = exchange(cache, handler.build_next(wanted_of(3)))
    assert response.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND.code and answered(response) == []
    assert not handler.handle_response(response)
    data = handler.build_next(wanted_of(3))
    assert data.is_full and data.session_id == INVALID_SESSION_ID and len(data.to_send) == 3
    assert handler.handle_response(exchange(cache, data)) and handler.epoch == 1 and len(cache.sessions) == 1


def test_a_replayed_epoch_or_a_lost_response_closes_the_session_and_opens_another():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    handler.handle_response(exchange(cache, handler.build_next(wanted_of(3))))
    old_id = handler.session_id
    data = handler.build_next(wanted_of(3))
    exchange(cache, data)                                   # the broker moved the epoch on ...
    handler.handle_error(ConnectionError("connection lost"))   # ... but the answer never came
    data = handler.build_next(wanted_of(3))
    assert data.is_full and (data.session_id, data.epoch) == (old_id, INITIAL_EPOCH)
    assert handler.handle_response(exchange(cache, data))
    assert list(cache.sessions) == [handler.session_id] and handler.session_id != old_id
    replayed = handler.build_next(wanted_of(3))
    assert handler.handle_response(exchange(cache, replayed))
    handler._pending = replayed                             # the same request sent twice
    response = exchange(cache, replayed)
    assert response.error_code == Errors.INVALID_FETCH_SESSION_EPOCH.code and not handler.handle_response(response)
    assert handler.build_next(wanted_of(3)).is_full


def test_a_broker_without_a_free_slot_gets_full_requests_that_keep_asking():
    cache = FetchSessionCache(max_slots=1, time=MockTime())
    FetchSessionHandler(1).handle_response(exchange(cache, FetchSessionHandler(1).build_next(wanted_of(1))))
    other = FetchSessionHandler(1)
    other.handle_response(exchange(cache, other.build_next(wanted_of(1))))   # holds the only slot
    handler = FetchSessionHandler(0)
    for _ in range(3):
        data = handler.build_next(wanted_of(2))
        assert data.is_full and len(data.to_send) == 2 and data.epoch == INITIAL_EPOCH
        assert handler.handle_response(exchange(cache, data)) and handler.session_id == INVALID_SESSION_ID
    assert (handler.full_answered, handler.incremental_answered) == (3, 0)


def test_a_leader_below_fetch_v7_gets_full_requests():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    for _ in range(2):
        data = handler.build_next(wanted_of(2))
        assert data.is_full and len(data.to_send) == 2
        response = exchange(cache, data, version=6)        # no session fields on the wire
        assert answered(response) == [("t", 0), ("t", 1)] and handler.handle_response(response)
    assert handler.session_id == INVALID_SESSION_ID and not cache.sessions


def test_a_request_built_but_never_sent_is_not_taken_as_known_to_the_broker():
    cache, handler = FetchSessionCache(time=MockTime()), FetchSessionHandler(0)
    handler.handle_response(exchange(cache, handler.build_next(wanted_of(2))))
    more = wanted_of(3)
    assert list(handler.build_next(more).to_send) == [("t", 2)]       # built; the fetchers were paused
    data = handler.build_next(more)
    assert list(data.to_send) == [("t", 2)]
    assert handler.handle_response(exchange(cache, data))
    assert sorted(next(iter(cache.sessions.values())).partitions) == sorted(more)


# --- a follower of 50 partitions --------------------------------------------------------------------
TOPIC, PARTITIONS = "many", 50


def _fetcher(cluster, broker_id=1):
    [thread] = cluster.brokers[broker_id].replica_manager.replica_fetcher_manager.fetcher_thread_map.values()
    return thread


def _follower_session(cluster):
    sessions = cluster.brokers[0].apis.fetch_sessions.sessions.values()
    return next((s for s in list(sessions) if s.privileged and len(s.partitions) == PARTITIONS), None)


def _produce_and_replicate(cluster, round_):
    with cluster.client(0) as client:
        for p in range(PARTITIONS):
            assert client.produce(TOPIC, p, records(f"{round_}-{p}".encode()), acks=1).error_code == 0
    leader, follower = cluster.brokers[0].replica_manager, cluster.brokers[1].replica_manager

    def replicated():
        return all(follower.get_partition((TOPIC, p)).local_replica.log_end_offset ==
                   leader.get_partition((TOPIC, p)).local_replica.log_end_offset for p in range(PARTITIONS))
    wait_until(replicated, timeout_s=20, what="the follower to copy every partition")


def _make(make_cluster):
    cluster = make_cluster(2)
    for p in range(PARTITIONS):
        cluster.create_partition(TOPIC, p, [0, 1])
    return cluster


def test_a_follower_of_50_partitions_replicates_through_one_incremental_session(make_cluster):
    cluster = _make(make_cluster)
    _produce_and_replicate(cluster, 0)
    _produce_and_replicate(cluster, 1)
    session = wait_until(lambda: _follower_session(cluster), what="the follower's session on the leader")
    handler = _fetcher(cluster).fetch_session
    assert handler.session_id == session.id and sorted(handler.session_partitions) == sorted(session.partitions)
    wait_until(lambda: handler.incremental_answered >= 20, what="incremental fetches")
    assert handler.incremental_answered >= 4 * handler.full_answered
    assert session.epoch >= 20
    for p in range(PARTITIONS):
        assert segment_bytes(cluster, 1, TOPIC, p) == segment_bytes(cluster, 0, TOPIC, p)
        assert values_of(segment_bytes(cluster, 1, TOPIC, p)) == [f"0-{p}".encode(), f"1-{p}".encode()]


def test_the_follower_survives_a_lost_session_and_a_leader_restart(make_cluster):
    cluster = _make(make_cluster)
    _produce_and_replicate(cluster, 0)
    first = wait_until(lambda: _follower_session(cluster), what="the follower's session")
    thread = _fetcher(cluster)
    full_before = thread.fetch_session.full_answered
    with cluster.brokers[0].apis.fetch_sessions._lock:
        cluster.brokers[0].apis.fetch_sessions.sessions.clear()     # evicted: the next request is refused
    _produce_and_replicate(cluster, 1)
    second = wait_until(lambda: _follower_session(cluster), what="a new session")
    assert second.id != first.id and thread.fetch_session.full_answered > full_before

    port = cluster.brokers[0].bound_port()
    cluster.stop(0)
    cluster.props = {**cluster.props, "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    cluster.start(0)
    for p in range(PARTITIONS):
        cluster.publish(TOPIC, p, to=[0])                   # the restarted leader leads again, same epoch
    _produce_and_replicate(cluster, 2)
    assert _fetcher(cluster) is thread                      # the same fetcher, with a new session
    wait_until(lambda: _follower_session(cluster), what="a session on the restarted leader")
    for p in range(PARTITIONS):
        assert values_of(segment_bytes(cluster, 1, TOPIC, p)) == [f"{r}-{p}".encode() for r in range(3)]
        assert segment_bytes(cluster, 1, TOPIC, p) == segment_bytes(cluster, 0, TOPIC, p)
