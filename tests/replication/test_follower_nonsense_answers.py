"""A follower whose leader answers nonsense: Fetch, ListOffsets and OffsetsForLeaderEpoch answers drawn
from each response's schema (any error code, any offsets and watermarks, records that are random
bytes, partitions never asked for), every other one claiming success. The fetcher thread keeps
running, every failure it meets is one it names (no unexpected exception, no traceback), and the
follower's log stays readable. The answers are drawn the same way on every run."""
from __future__ import annotations

import collections
import itertools
import logging
import time

from _broker_client import records
from _cluster import wait_until
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from logged_errors import LoggedTracebacks
from protocol_strategies import strategy, without_errors
from scripted_broker import ScriptedBroker

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.replica.replica_fetcher_thread import BrokerEndPoint

ANSWERS = 8
APIS = (ApiKeys.FETCH, ApiKeys.LIST_OFFSETS, ApiKeys.OFFSET_FOR_LEADER_EPOCH)


# where each answer names its partitions: (the topics' array, a topic's name, a partition's index)
NAMES = {ApiKeys.FETCH: ("responses", "topic", "partition_index"),
         ApiKeys.LIST_OFFSETS: ("topics", "name", "partition_index"),
         ApiKeys.OFFSET_FOR_LEADER_EPOCH: ("topics", "topic", "partition")}


def partition_schema(api: ApiKeys, version: int):
    topics, _, _ = NAMES[api]
    topic = api.response_schema(version).field(topics).type.type
    return topic.field("partitions").type.type


def about_our_partition(api: ApiKeys, body: dict, partition: dict) -> dict:
    """The answer, now about f-0 alone (its values still random)."""
    topics, name, index = NAMES[api]
    return {**body, topics: [{name: "f", "partitions": [{**partition, index: 0}]}]}


def nonsense(data, api: ApiKeys, log_end_offset):
    """ANSWERS random bodies in turn: a claimed success, a random one, a claimed success about f-0, a
    random one (a random error code is almost never 0; random names are never ours). Every other Fetch
    answer about f-0 carries a well-formed batch that continues the follower's log (`log_end_offset()`
    when answered), so appending gets its turn; the others carry random bytes."""
    version = api.max_version
    drawn = data.draw(st.lists(strategy(api.response_schema(version)), min_size=ANSWERS, max_size=ANSWERS),
                      label=api.name)
    ours = data.draw(st.lists(strategy(partition_schema(api, version)), min_size=ANSWERS, max_size=ANSWERS),
                     label=f"{api.name} partitions")
    answers = [body if i % 2 else without_errors(about_our_partition(api, body, ours[i]) if i % 4 else body)
               for i, body in enumerate(drawn)]
    turn = itertools.count()

    def answer(header, body):
        i = next(turn) % ANSWERS
        if api is ApiKeys.FETCH and i % 8 == 2:
            (topic,) = answers[i]["responses"]
            (partition,) = topic["partitions"]
            batch = records(b"n", base_offset=log_end_offset())
            return {**answers[i], "responses": [{**topic, "partitions": [{**partition, "records": batch}]}]}
        return answers[i]
    return answer


def test_a_follower_survives_a_leader_that_answers_nonsense(make_cluster):
    cluster = make_cluster(2)
    cluster.create_partition("f", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("f", 0, records(b"a", b"b", b"c"), acks=1).error_code == 0
    wait_until(lambda: cluster.partition(1, "f").local_replica.log_end_offset == 3, what="the follower's copy")
    follower = cluster.brokers[1].replica_manager
    replica = follower.get_partition(("f", 0)).local_replica
    manager = follower.replica_fetcher_manager
    tracebacks = LoggedTracebacks()
    logging.getLogger("kafka_edu").addHandler(tracebacks)

    @settings(max_examples=3, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
    @given(data=st.data())
    def against(data):
        """The follower's fetcher moved to a scripted 'broker 0' for 1.5 s."""
        leader = ScriptedBroker({api: nonsense(data, api, lambda: replica.log_end_offset) for api in APIS},
                                node_id=0)
        host, port = leader.address
        try:
            manager.remove_fetcher_for_partitions([("f", 0)])
            manager.add_fetcher_for_partitions({("f", 0): (BrokerEndPoint(0, host, port), replica.log_end_offset)},
                                               truncate_first=True)
            start = time.monotonic()
            # it keeps fetching (its high watermark cannot wedge its truncation), and never spins: every
            # answer that names no partition it can use costs a replica.fetch.backoff.ms (100 ms here)
            wait_until(lambda: [a for a, _ in leader.apis_seen()].count("FETCH") >= 5, 15, "five fetches")
            time.sleep(max(0.0, 1.5 - (time.monotonic() - start)))
            elapsed = time.monotonic() - start
            assert [t.is_alive() for t in manager.fetcher_thread_map.values() if t.source_broker.port == port] == [True]
            asked = collections.Counter(api for api, _ in leader.apis_seen())
            assert asked["FETCH"] < 200 * elapsed, (asked, elapsed)
            replica.log.read(replica.log.log_start_offset, 1_000_000)    # its log still reads from the start
        finally:
            manager.remove_fetcher_for_partitions([("f", 0)])
            manager.shutdown_idle_fetcher_threads()
            leader.close()

    try:
        against()
        assert tracebacks.messages == []
        assert cluster.halted == []
    finally:
        logging.getLogger("kafka_edu").removeHandler(tracebacks)
