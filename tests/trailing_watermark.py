"""A partition whose new leader has every record but a high watermark that trails them: what a reader
sees for a moment after a leader change (shared by the broker's ListOffsets tests and the Spark tests)."""
from __future__ import annotations

import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.clients.producer.kafka_producer import KafkaProducer

BYTES = "kafka_edu.clients.producer.serializers.ByteArraySerializer"


@contextlib.contextmanager
def trailing_high_watermark(data_dir: Path, topic: str = "trailing", records: int = 100):
    """Three in-process brokers; broker 1 has taken `topic`-0 over from broker 0 (killed) with all
    `records` records but a high watermark of 0, which stays there while the other member of the ISR,
    broker 2, has its fetchers paused: what a reader sees for a moment after a leader change. Yields
    the cluster and the records' values; `cluster.resume_fetchers(2)` lets the watermark move."""
    from kafka_edu.server.cluster import InProcessCluster
    logging.getLogger("kafka_edu").setLevel(logging.CRITICAL)
    cluster = InProcessCluster(3, {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": 60_000},
                               data_dir=str(data_dir)).start()
    try:
        with ClusterAdmin(cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(topic, replica_assignment={0: [0, 1, 2]})])
        cluster.wait_until(lambda: (s := cluster.partition_state(topic, 0)) is not None
                           and sorted(s.leader_and_isr.isr) == [0, 1, 2], what="a full ISR")
        assert cluster.pause_fetchers(1) and cluster.pause_fetchers(2)
        values = [str(i).encode() for i in range(records)]
        with KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1",
                            "key.serializer": BYTES, "value.serializer": BYTES}) as producer:
            for value in values:
                producer.send(topic, value, partition=0)
        cluster.resume_fetchers(1)                     # broker 1 copies them all; broker 2 holds the watermark at 0
        follower = cluster.broker(1).replica_manager.get_partition((topic, 0))
        cluster.wait_until(lambda: follower.local_replica.log_end_offset == records, what="broker 1 level")
        cluster.kill(0)
        cluster.wait_until(lambda: follower.is_leader, what="broker 1 leading")   # its LeaderAndIsr landed, not only ZooKeeper's
        assert follower.local_replica.high_watermark == 0
        yield cluster, values
    finally:
        cluster.shutdown()


def answered_once_caught_up(cluster, call, pause_s: float = 1.5, timeout_s: float = 20):
    """Run `call` on a thread while the watermark trails, check that it is still waiting after `pause_s`,
    then let broker 2 fetch and return what `call` returns (its exception, if it raised one)."""
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call)
        time.sleep(pause_s)
        waiting = not pending.done()
        cluster.resume_fetchers(2)
        assert waiting, f"answered before the watermark moved: {pending.exception() or pending.result()}"
        return pending.result(timeout_s)
