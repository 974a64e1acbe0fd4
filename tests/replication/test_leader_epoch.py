"""Leader epochs (KIP-101, Beyond 0.10): the leader-epoch-checkpoint file, the cache's rules,
OffsetsForLeaderEpoch at epoch boundaries, and the inter.broker.protocol.version switch."""
from __future__ import annotations

import os

import pytest
from _broker_client import records
from _cluster import wait_until

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.server.epoch.leader_epoch_file_cache import (LEADER_EPOCH_CHECKPOINT_FILENAME, EpochEndOffset,
                                                            EpochEntry,
                                                            LeaderEpochCheckpointFile, LeaderEpochFileCache,
                                                            truncates_by_leader_epoch)
from kafka_edu.server.kafka_config import KafkaConfig


def _cache(tmp_path, log_end: dict) -> LeaderEpochFileCache:
    checkpoint = LeaderEpochCheckpointFile(str(tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME))
    return LeaderEpochFileCache("t-0", checkpoint, lambda: log_end["offset"])


def test_cache_rules_and_end_offsets_at_epoch_boundaries(tmp_path):
    log_end = {"offset": 50}
    cache = _cache(tmp_path, log_end)
    assert cache.end_offset_for(0) == (-1, -1) and cache.latest_epoch == -1           # empty: unknown
    assert cache.assign(1, 10) and not cache.assign(1, 12)                            # an epoch starts once
    assert cache.assign(3, 20) and not cache.assign(2, 30) and not cache.assign(4, 15)   # older epoch, earlier offset
    assert not cache.assign(-1, 40)                                                   # v0/v1 batches: no epoch
    assert cache.entries() == [EpochEntry(1, 10), EpochEntry(3, 20)]
    assert cache.end_offset_for(1) == (1, 20)              # ends where the next higher epoch starts
    assert cache.end_offset_for(2) == (1, 20)              # never led in 2: answered for epoch 1 (KIP-279)
    assert cache.end_offset_for(0) == (0, 10)              # older than all known: ends where the first starts
    assert cache.end_offset_for(3) == (3, 50)              # the latest epoch ends at the log end
    assert cache.end_offset_for(4) == (-1, -1)             # newer than all known
    assert cache.end_offset_for(-1) == (-1, -1)
    assert open(cache.checkpoint.path).read() == "0\n2\n1 10\n3 20\n"
    cache.truncate_from_start(15)
    assert cache.entries() == [EpochEntry(1, 15), EpochEntry(3, 20)]
    cache.truncate_from_start(25)
    assert cache.entries() == [EpochEntry(3, 25)]
    cache.truncate_from_end(25)
    assert cache.entries() == [] and open(cache.checkpoint.path).read() == "0\n0\n"
    assert not os.path.exists(cache.checkpoint.path + ".tmp")


def test_checkpoint_file_rejects_what_it_did_not_write(tmp_path):
    checkpoint = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    for text in ("1\n0\n", "0\n2\n0 0\n", "0\n1\nzero 0\n"):
        with open(checkpoint.path, "w") as f:
            f.write(text)
        with pytest.raises(ValueError):
            checkpoint.read()


@pytest.mark.parametrize("version, expected", [(None, True), ("0.10.0", False), ("0.10.2-IV0", False),
                                               ("0.11.0-IV2", True), ("2.8", True)])
def test_inter_broker_protocol_version_switch(version, expected):
    # the message format may not be newer than the protocol
    props = {"broker.id": 0} if version is None else {"broker.id": 0, "inter.broker.protocol.version": version,
                                                      "log.message.format.version": version}
    assert truncates_by_leader_epoch(KafkaConfig(props, warn_unknown=False)) is expected


def _entries(cluster, broker_id, topic="e"):
    return [(e.epoch, e.start_offset) for e in cluster.partition(broker_id, topic).local_replica.epochs.entries()]


def _checkpoint_text(cluster, broker_id, topic="e"):
    log = cluster.partition(broker_id, topic).local_replica.log
    with open(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILENAME)) as f:
        return f.read()


def _two_epochs(cluster):
    """e-0 on brokers 0 and 1: two records in epoch 0 (leader 0), one in epoch 1 (leader 1)."""
    cluster.create_partition("e", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("e", 0, records(b"a", b"b"), acks=-1).error_code == 0
    cluster.elect("e", 0, leader=1, isr=[0, 1])
    with cluster.client(1) as client:
        assert client.produce("e", 0, records(b"c"), acks=-1).error_code == 0


def test_checkpoint_file_follows_appends_truncation_and_restart(make_cluster):
    cluster = make_cluster(2)
    _two_epochs(cluster)
    wait_until(lambda: _entries(cluster, 0) == [(0, 0), (1, 2)], what="the follower to copy epoch 1")
    for broker_id in (0, 1):                                   # the leader assigned, the follower copied
        assert _checkpoint_text(cluster, broker_id) == "0\n2\n0 0\n1 2\n"
    cluster.stop(1)
    cluster.start(1)
    cluster.publish("e", 0, to=[1])
    assert _entries(cluster, 1) == [(0, 0), (1, 2)]            # reloaded from the file
    cluster.partition(1, "e").truncate_to(1)
    assert _checkpoint_text(cluster, 1) == "0\n1\n0 0\n"
    cluster.partition(1, "e").truncate_fully_and_start_at(7)
    assert _checkpoint_text(cluster, 1) == "0\n0\n"


def _ask(client, version, asks):
    """One request per (topic, partition, current epoch, epoch): a request names a partition once."""
    answers = []
    for topic, partition, current, epoch in asks:
        body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]}
        [t] = client.call(ApiKeys.OFFSET_FOR_LEADER_EPOCH, version, body).topics
        answers += [(Errors.for_code(p.error_code), p.get("leader_epoch", None), p.end_offset) for p in t.partitions]
    return answers


def test_offsets_for_leader_epoch_at_epoch_boundaries(make_cluster):
    cluster = make_cluster(2)
    _two_epochs(cluster)
    wait_until(lambda: cluster.partition(1, "e").high_watermark == 3, what="the new leader's HW")
    with cluster.client(1) as client:
        assert _ask(client, 3, [("e", 0, 1, 0), ("e", 0, 1, 1), ("e", 0, -1, 2), ("e", 0, 0, 1), ("e", 0, 2, 1),
                                ("nowhere", 0, -1, 0)]) == [
            (Errors.NONE, 0, 2),                               # epoch 0 ends where epoch 1 starts
            (Errors.NONE, 1, 3),                               # the latest epoch ends at the LEO
            (Errors.NONE, -1, -1),                             # an epoch the leader never saw
            (Errors.FENCED_LEADER_EPOCH, -1, -1),              # the caller's current epoch is older
            (Errors.UNKNOWN_LEADER_EPOCH, -1, -1),             # ... or newer than the leader's
            (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
        assert _ask(client, 0, [("e", 0, -1, 0)]) == [(Errors.NONE, None, 2)]     # v0 has no epoch in the answer
    with cluster.client(0) as client:
        assert _ask(client, 2, [("e", 0, -1, 0)]) == [(Errors.NOT_LEADER_OR_FOLLOWER, -1, -1)]


def test_follower_truncation_rule(make_cluster):
    """The fetcher's cut: the leader's end of our epoch, our own end of an older epoch the leader names
    instead (it never led in ours, KIP-279), the HW without an answer; an error leaves the log alone."""
    cluster = make_cluster(2)
    cluster.create_partition("e", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("e", 0, records(*[b"%d" % i for i in range(8)]), acks=-1).error_code == 0
    wait_until(lambda: cluster.partition(1, "e").high_watermark == 8, what="the follower's HW")
    manager = cluster.brokers[1].replica_manager.replica_fetcher_manager
    assert manager.pause(timeout_s=5)
    [fetcher] = manager.fetcher_thread_map.values()
    replica = cluster.partition(1, "e").local_replica
    replica.epochs.assign(2, 5)                         # as if epoch 2 had started at 5 here: [(0, 0), (2, 5)]
    with pytest.raises(KafkaError):
        fetcher.truncate(("e", 0), EpochEndOffset(Errors.NOT_LEADER_OR_FOLLOWER))
    assert replica.log_end_offset == 8
    assert fetcher.truncate(("e", 0), EpochEndOffset(Errors.NONE, 2, 9)) == 8       # the leader has more: keep all
    assert fetcher.truncate(("e", 0), EpochEndOffset(Errors.NONE, 1, 7)) == 5       # leader's epoch 1 ends at 7,
    assert replica.epochs.entries() == [EpochEntry(0, 0)]                            # ours (epoch 0) at 5
    replica.high_watermark_metadata = type(replica.high_watermark_metadata)(3)
    assert fetcher.truncate(("e", 0), None) == 3                                     # no answer: the HW
    assert [(t.offset, t.reason) for t in fetcher.truncations] == [
        (0, "the high watermark (no leader epochs to compare)"),                     # when it started: empty log
        (8, "the end of epoch 2"), (5, "the end of epoch 1"), (3, "the high watermark (no leader epochs to compare)")]


def test_every_broker_serves_and_advertises_offsets_for_leader_epoch(make_cluster):
    """KafkaServer registers API key 23 itself; ApiVersions advertises it with our full range."""
    cluster = make_cluster(2)
    for broker_id in (0, 1):
        with cluster.client(broker_id) as client:
            ranges = {k.api_key: (k.min_version, k.max_version)
                      for k in client.call(ApiKeys.API_VERSIONS, 2, {}).api_keys}
        key = ApiKeys.OFFSET_FOR_LEADER_EPOCH
        assert ranges[key.value] == (key.min_version, key.max_version)
