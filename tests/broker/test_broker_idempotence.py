"""Idempotent producers on a live broker: InitProducerId, duplicates, gaps, fencing, restarts;
and ListOffsets (earliest, latest, by timestamp, v0's offset lists, leader epochs)."""
from __future__ import annotations

import pytest
from _broker_client import BrokerClient, records, start_broker, values_of

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper


def init_producer_id(client, transactional_id=None, version=1):
    return client.call(ApiKeys.INIT_PRODUCER_ID, version, {"transactional_id": transactional_id,
                                                           "transaction_timeout_ms": 60_000})


def idempotent(pid, epoch, seq, *values):
    return records(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_producer_ids_are_unique_and_transactions_are_refused(client):
    ids = [init_producer_id(client, version=v) for v in (0, 1, 1)]
    assert all(r.error_code == 0 and r.producer_epoch == 0 for r in ids)
    assert len({r.producer_id for r in ids}) == 3
    refused = init_producer_id(client, transactional_id="tx-1")
    assert refused.error_code == Errors.INVALID_REQUEST.code and refused.producer_id == -1


def test_duplicate_is_answered_with_the_original_offset_without_appending(client):
    client.create_topic("dedupe")
    pid = init_producer_id(client).producer_id
    client.produce("dedupe", 0, records(b"someone else"))
    first = client.produce("dedupe", 0, idempotent(pid, 0, 0, b"a", b"b"), acks=-1)
    retry = client.produce("dedupe", 0, idempotent(pid, 0, 0, b"a", b"b"), acks=-1)
    assert (first.error_code, first.base_offset) == (0, 1)
    assert (retry.error_code, retry.base_offset) == (0, 1)
    assert client.list_offset("dedupe", 0, -1).offset == 3
    nxt = client.produce("dedupe", 0, idempotent(pid, 0, 2, b"c"))
    assert (nxt.error_code, nxt.base_offset) == (0, 3)
    assert values_of(client.fetch("dedupe", 0, 0).records) == [b"someone else", b"a", b"b", b"c"]


def test_an_older_retained_batch_is_still_recognised(client):
    client.create_topic("window")
    pid = init_producer_id(client).producer_id
    for seq in range(5):
        assert client.produce("window", 0, idempotent(pid, 0, seq, f"v{seq}".encode())).error_code == 0
    assert client.produce("window", 0, idempotent(pid, 0, 1, b"v1")).base_offset == 1     # 4 batches ago
    assert client.list_offset("window", 0, -1).offset == 5


def test_sequence_gap_and_stale_epoch_are_refused(client):
    client.create_topic("order")
    pid = init_producer_id(client).producer_id
    assert client.produce("order", 0, idempotent(pid, 0, 0, b"0")).error_code == 0
    gap = client.produce("order", 0, idempotent(pid, 0, 2, b"2"))
    assert gap.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER.code
    assert client.produce("order", 0, idempotent(pid, 1, 0, b"new epoch")).error_code == 0
    stale = client.produce("order", 0, idempotent(pid, 0, 1, b"zombie"))
    assert stale.error_code == Errors.INVALID_PRODUCER_EPOCH.code
    bad_new_epoch = client.produce("order", 0, idempotent(pid, 2, 5, b"x"))
    assert bad_new_epoch.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER.code
    assert values_of(client.fetch("order", 0, 0).records) == [b"0", b"new epoch"]


def test_producer_state_and_ids_survive_a_restart(tmp_path):
    zookeeper = EmbeddedZooKeeper()
    server = start_broker(tmp_path, zookeeper)
    try:
        with BrokerClient(server.bound_port()) as client:
            client.create_topic("durable")
            pid = init_producer_id(client).producer_id
            assert client.produce("durable", 0, idempotent(pid, 0, 0, b"once")).base_offset == 0
    finally:
        server.shutdown()
    server = start_broker(tmp_path, EmbeddedZooKeeper())       # a fresh tree: restored from the snapshot
    try:
        with BrokerClient(server.bound_port()) as client:
            retry = client.produce("durable", 0, idempotent(pid, 0, 0, b"once"))
            assert (retry.error_code, retry.base_offset) == (0, 0)
            assert client.list_offset("durable", 0, -1).offset == 1
            assert init_producer_id(client).producer_id > pid
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def timed(broker):
    """Three batches with timestamps 1000, 2000, 3000 at offsets 0, 1, 2."""
    with BrokerClient(broker.bound_port()) as client:
        client.create_topic("timed")
        for i, ts in enumerate((1000, 2000, 3000)):
            assert client.produce("timed", 0, records(f"t{i}".encode(), timestamp=ts)).base_offset == i
    return "timed"


@pytest.mark.parametrize("version", range(1, 6))
def test_list_offsets_earliest_latest_and_by_timestamp(client, timed, version):
    assert (client.list_offset(timed, 0, -2, version).offset, client.list_offset(timed, 0, -1, version).offset) == (0, 3)
    found = client.list_offset(timed, 0, 1500, version)
    assert (found.error_code, found.timestamp, found.offset) == (0, 2000, 1)
    assert (client.list_offset(timed, 0, 3000, version).offset, client.list_offset(timed, 0, 3001, version).offset) == (2, -1)


def test_list_offsets_v0_returns_offset_lists(client, timed):
    latest = client.list_offset(timed, 0, -1, version=0, max_num_offsets=10)
    assert latest.error_code == 0 and latest.old_style_offsets == [3, 0]
    assert client.list_offset(timed, 0, -2, version=0, max_num_offsets=10).old_style_offsets == [0]
    assert client.list_offset(timed, 0, -1, version=0, max_num_offsets=1).old_style_offsets == [3]


def test_list_offsets_errors_and_leader_epochs(client, timed):
    assert client.list_offset("no-such-topic-here", 0, -1).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert client.list_offset(timed, 0, -1, version=4, current_leader_epoch=0).error_code == 0
    assert client.list_offset(timed, 0, -1, version=4, current_leader_epoch=5).error_code == \
        Errors.UNKNOWN_LEADER_EPOCH.code
    assert client.fetch(timed, 0, 0, version=9).error_code == 0
