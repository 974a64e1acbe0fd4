"""Followers fetch from their leader: catching up, the HW rule, truncation and recovery (book 4.5.4)."""
from __future__ import annotations

import os
import time

from _broker_client import records, values_of
from _cluster import wait_until

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.log.offset_checkpoint import OffsetCheckpoint
from kafka_edu.server.replica.replica_fetcher_manager import fetcher_id_for
from kafka_edu.server.zk.zk_utils import LeaderAndIsr


def leo(cluster, broker_id, topic, partition=0):
    return cluster.partition(broker_id, topic, partition).local_replica.log_end_offset


def hw(cluster, broker_id, topic, partition=0):
    return cluster.partition(broker_id, topic, partition).high_watermark


def segment_bytes(cluster, broker_id, topic, partition=0) -> bytes:
    """The bytes of the partition's .log files on disk."""
    log = cluster.partition(broker_id, topic, partition).local_replica.log
    log.flush()
    data = b""
    for segment in log.segments:
        with open(segment.log.path, "rb") as f:
            data += f.read()
    return data


def test_follower_catches_up_with_the_leaders_bytes_and_joins_the_isr(make_cluster):
    cluster = make_cluster(2)
    with cluster.client(0) as client:
        for value in (b"a", b"b", b"c"):
            assert client.produce("r", 0, records(value), acks=1).error_code == 3   # not hosted yet
        cluster.create_partition("r", 0, [0, 1], isr=[0])
        for values in ((b"a", b"b"), (b"c",)):
            assert client.produce("r", 0, records(*values), acks=1).error_code == 0
    wait_until(lambda: cluster.isr_in_zk("r") == [0, 1], what="broker 1 to join the ISR")
    assert cluster.partition(0, "r").in_sync_replicas == {0, 1}
    assert cluster.brokers[0].replica_manager.isr_expands == 1
    wait_until(lambda: hw(cluster, 1, "r") == 3, what="the follower's HW")
    assert leo(cluster, 1, "r") == hw(cluster, 0, "r") == 3
    leader_bytes = segment_bytes(cluster, 0, "r")
    assert len(leader_bytes) > 100 and segment_bytes(cluster, 1, "r") == leader_bytes   # same offsets, same bytes
    manager = cluster.brokers[1].replica_manager.replica_fetcher_manager
    [(key, thread)] = manager.fetcher_thread_map.items()
    assert (key.broker.id, key.fetcher_id) == (0, fetcher_id_for("r", 0, 1))
    assert thread.name == "ReplicaFetcherThread-0-0" and thread.fetch_states()[("r", 0)].offset == 3


def test_num_replica_fetchers_spreads_a_leaders_partitions_over_that_many_threads(make_cluster):
    """num.replica.fetchers=3: the follower runs one fetcher per (leader, fetcher id), each partition on
    the thread its id names (Kafka's hash of topic and partition), and every thread replicates its own."""
    cluster = make_cluster(2, **{"num.replica.fetchers": 3})
    with cluster.client(0) as client:
        for partition in range(8):
            cluster.create_partition("spread", partition, [0, 1])
            assert client.produce("spread", partition, records(b"p%d" % partition), acks=1).error_code == 0
    wait_until(lambda: all(leo(cluster, 1, "spread", p) == 1 for p in range(8)), what="every partition copied")
    expected: dict[int, set] = {}
    for partition in range(8):
        expected.setdefault(fetcher_id_for("spread", partition, 3), set()).add(("spread", partition))
    manager = cluster.brokers[1].replica_manager.replica_fetcher_manager
    threads = {key.fetcher_id: thread for key, thread in manager.fetcher_thread_map.items() if key.broker.id == 0}
    assert len(expected) > 1 and set(threads) == set(expected)
    for fetcher_id, thread in threads.items():
        assert thread.name == f"ReplicaFetcherThread-{fetcher_id}-0" and thread.is_alive()
        assert set(thread.fetch_states()) == expected[fetcher_id]
        assert all(state.offset == 1 for state in thread.fetch_states().values())


def test_high_watermark_moves_only_after_the_followers_fetched(make_cluster):
    """T6: with the followers paused the leader's LEO moves and its HW does not."""
    cluster = make_cluster(3)
    cluster.create_partition("t6", 0, [0, 1, 2])
    for broker_id in (1, 2):
        assert cluster.brokers[broker_id].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    with cluster.client(0) as client:
        assert client.produce("t6", 0, records(b"x", b"y"), acks=1).error_code == 0
        assert (leo(cluster, 0, "t6"), hw(cluster, 0, "t6")) == (2, 0)
        as_consumer = client.fetch("t6", 0, 0)
        assert as_consumer.error_code == 0 and as_consumer.high_watermark == 0 and not as_consumer.records
        as_follower = client.fetch("t6", 0, 0, replica_id=1)
        assert values_of(as_follower.records) == [b"x", b"y"]
        assert hw(cluster, 0, "t6") == 0                       # broker 2 has not fetched: the HW stays
        assert (leo(cluster, 1, "t6"), leo(cluster, 2, "t6")) == (0, 0)
        for broker_id in (1, 2):
            cluster.brokers[broker_id].replica_manager.replica_fetcher_manager.resume()
        wait_until(lambda: hw(cluster, 0, "t6") == 2, what="the leader's HW")
        assert values_of(client.fetch("t6", 0, 0).records) == [b"x", b"y"]


def test_follower_behind_the_leaders_log_start_starts_over_there(make_cluster):
    """T13: the follower was away while the leader deleted segments."""
    cluster = make_cluster(2)
    cluster.create_partition("t13", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("t13", 0, records(b"0", b"1", b"2"), acks=-1).error_code == 0
        wait_until(lambda: hw(cluster, 1, "t13") == 3, what="the follower's HW")
        cluster.stop(1)
        for i in range(3, 10):
            assert client.produce("t13", 0, records(str(i).encode()), acks=1).error_code == 0
        leader_log = cluster.partition(0, "t13").local_replica.log
        leader_log.delete_old_segments(lambda segment: True)
        assert leader_log.log_start_offset == 10
        assert client.produce("t13", 0, records(b"10", b"11"), acks=1).error_code == 0
    cluster.start(1)
    cluster.publish("t13", 0, to=[1])
    wait_until(lambda: leo(cluster, 1, "t13") == 12, what="the follower to catch up")
    follower_log = cluster.partition(1, "t13").local_replica.log
    assert follower_log.log_start_offset == 10
    assert cluster.isr_in_zk("t13") == [0, 1]
    # Beyond 0.10: both epoch caches start at the log start, the leader's trimmed by the checkpoint task,
    # the follower's cleared when it threw its log away and refilled from the batches it copied
    for broker_id in (0, 1):
        epochs = cluster.partition(broker_id, "t13").local_replica.epochs
        wait_until(lambda e=epochs: [(x.epoch, x.start_offset) for x in e.entries()] == [(0, 10)],
                   what=f"broker {broker_id}'s epoch cache to start at 10")


def _diverged(cluster, topic, unclean: bool):
    """Broker 0 led alone and holds 3 records; broker 1 (empty) becomes leader by an unclean election."""
    cluster.create_partition(topic, 0, [0, 1], isr=[0],
                             config={"unclean.leader.election.enable": str(unclean).lower()})
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)
    with cluster.client(0) as client:
        assert client.produce(topic, 0, records(b"a", b"b", b"c"), acks=1).error_code == 0
    assert (leo(cluster, 0, topic), hw(cluster, 0, topic), leo(cluster, 1, topic)) == (3, 3, 0)
    cluster.elect(topic, 0, leader=1, isr=[1])


def test_returning_leader_truncates_to_the_new_leaders_end_after_an_unclean_election(make_cluster):
    cluster = make_cluster(2)
    _diverged(cluster, "unclean", unclean=True)
    wait_until(lambda: leo(cluster, 0, "unclean") == 0, what="broker 0 to truncate")
    with cluster.client(1) as client:
        assert client.produce("unclean", 0, records(b"new"), acks=1).error_code == 0
    wait_until(lambda: leo(cluster, 0, "unclean") == 1, what="broker 0 to follow")
    assert cluster.halted == []


def test_follower_halts_rather_than_truncate_when_unclean_election_is_disabled(make_cluster):
    cluster = make_cluster(2)
    _diverged(cluster, "clean", unclean=False)
    wait_until(lambda: cluster.halted, what="the halt hook")
    [(broker_id, reason)] = cluster.halted[:1]
    assert broker_id == 0 and "unclean leader election is disabled" in reason
    assert leo(cluster, 0, "clean") == 3                          # nothing was thrown away


def test_high_watermark_checkpoint_and_restart(make_cluster):
    """T14: replication-offset-checkpoint holds every local replica, even one whose leader is dead."""
    cluster = make_cluster(2)
    cluster.create_partition("hw", 0, [0, 1])
    with cluster.client(0) as client:
        assert client.produce("hw", 0, records(b"a", b"b", b"c"), acks=-1).error_code == 0
    wait_until(lambda: hw(cluster, 1, "hw") == 3, what="the follower's HW")
    cluster.replicas[("orphan", 0)] = (5, 1)                    # broker 5 does not exist: KAFKA-1647
    cluster.zk_utils.create_leader_and_isr("orphan", 0, LeaderAndIsr(5, 0, (5, 1)), cluster.zk_utils.get_controller_epoch()[0])
    cluster.publish("orphan", 0, to=[1])
    path = os.path.join(cluster.brokers[1].config.log_dirs[0], "replication-offset-checkpoint")
    expected = "0\n2\nhw 0 3\norphan 0 0\n"
    wait_until(lambda: os.path.exists(path) and _sorted_lines(open(path).read()) == _sorted_lines(expected),
               what="the checkpoint file")
    assert cluster.brokers[1].replica_manager.replica_fetcher_manager.fetcher_thread_map.keys() != set()
    cluster.stop(1)
    OffsetCheckpoint(path).write({("hw", 0): 100})
    cluster.start(1)
    restarted = cluster.brokers[1].replica_manager.get_or_create_partition(("hw", 0))
    assert restarted.get_or_create_replica(1).high_watermark == 3            # min(checkpoint, LEO)
    cluster.stop(1)
    OffsetCheckpoint(path).write({("hw", 0): 2})
    cluster.start(1)
    restarted = cluster.brokers[1].replica_manager.get_or_create_partition(("hw", 0))
    assert restarted.get_or_create_replica(1).high_watermark == 2


def _sorted_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[:2] + sorted(lines[2:])


def test_stop_replica_deletes_a_log_that_no_leader_and_isr_reached(make_cluster):
    """StopReplica with delete_partitions removes a log the broker loaded from disk at start-up even
    when no LeaderAndIsr has made a partition of it since (no `Partition` object exists)."""
    cluster = make_cluster(1)
    cluster.create_partition("gone", 0, [0])
    with cluster.client(0) as client:
        assert client.produce("gone", 0, records(b"a", b"b")).error_code == 0
    cluster.stop(0)
    server = cluster.start(0)
    assert server.replica_manager.get_partition(("gone", 0)) is None
    log_dir = os.path.join(server.config.log_dirs[0], "gone-0")
    assert os.path.isdir(log_dir) and server.log_manager.get_log("gone", 0) is not None
    with cluster.client(0) as client:
        answer = client.call(ApiKeys.STOP_REPLICA, 0, {
            "controller_id": 0, "controller_epoch": server.replica_manager.controller_epoch,
            "delete_partitions": True, "ungrouped_partitions": [{"topic_name": "gone", "partition_index": 0}]})
    assert answer.error_code == 0
    assert server.log_manager.get_log("gone", 0) is None
    wait_until(lambda: not os.path.exists(log_dir), what="the log directory deleted")


LONG_WAIT = {"replica.fetch.wait.max.ms": 30_000, "replica.lag.time.max.ms": 120_000}


def _values(cluster, broker_id, topic):
    log = cluster.partition(broker_id, topic).local_replica.log
    return values_of(log.read(0, 1 << 20, None, True).records.read_bytes())


def _thread_from(cluster, broker_id, source_id):
    manager = cluster.brokers[broker_id].replica_manager.replica_fetcher_manager
    [thread] = [t for k, t in manager.fetcher_thread_map.items() if k.broker.id == source_id]
    return thread


def test_an_answer_from_before_a_move_away_and_back_is_dropped(make_cluster):
    """A fetch answer that left the old leader before two LeaderAndIsr requests moved the partition
    away and back again is stale, although its offset matches: the partition was re-added to be
    truncated first (Beyond 0.10, OffsetsForLeaderEpoch), and applying the answer would skip that and
    keep a record the new leader never had."""
    cluster = make_cluster(2, **LONG_WAIT)                 # brokers 0 (L) and 1 (F): long parked fetches
    cluster.props["replica.fetch.wait.max.ms"] = 100
    cluster.start(2)                                      # broker 2 (M): short fetch waits
    cluster.create_partition("t", 0, [0, 1, 2])
    cluster.create_partition("u", 0, [0, 1])              # keeps F's fetcher thread for broker 0 busy (not idle)
    with cluster.client(0) as client:
        assert client.produce("t", 0, records(b"a"), acks=-1).error_code == 0
    wait_until(lambda: all(cluster.partition(b, "t").local_replica.log_end_offset == 1 for b in (0, 1, 2)))
    assert cluster.brokers[2].replica_manager.replica_fetcher_manager.pause(timeout_s=5)   # M stays at [a]

    f_thread = _thread_from(cluster, 1, 0)
    wait_until(lambda: f_thread.fetch_states()[("t", 0)].offset == 1)
    time.sleep(0.3)                                       # F's fetch at offset 1 is parked at L
    f_thread.partition_map_cond.acquire()                 # hold F's answer from L between receive and processing
    try:
        with cluster.client(0) as client:                 # L appends x (never committed: M does not fetch)
            assert client.produce("t", 0, records(b"x"), acks=1).error_code == 0
        time.sleep(1.0)                                   # the parked fetch is answered with x and received
        assert cluster.brokers[1].replica_manager.replica_fetcher_manager.pause(timeout_s=5)

        cluster.elect("t", 0, leader=2, isr=[1, 2])       # epoch 1: M leads; L follows M and truncates x
        cluster.brokers[2].replica_manager.replica_fetcher_manager.resume()
        with cluster.client(2) as client:
            assert client.produce("t", 0, records(b"y"), acks=1).error_code == 0
        wait_until(lambda: _values(cluster, 0, "t") == [b"a", b"y"], what="L to follow M")

        cluster.elect("t", 0, leader=0, isr=[0, 1, 2])    # epoch 2: L leads again; F re-adds t to its L thread
        state = f_thread.fetch_states()[("t", 0)]
        assert state.truncating and state.offset == 1     # re-added, to be settled by OffsetsForLeaderEpoch
    finally:
        f_thread.partition_map_cond.release()             # now the answer from epoch 0 is processed
    cluster.brokers[1].replica_manager.replica_fetcher_manager.resume()
    time.sleep(1.0)
    leader_values = _values(cluster, 0, "t")
    follower_values = _values(cluster, 1, "t")
    assert leader_values == [b"a", b"y"]
    assert follower_values == leader_values, f"follower {follower_values} diverged from leader {leader_values}"
