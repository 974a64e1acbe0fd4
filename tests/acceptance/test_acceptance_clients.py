"""After a failover, unmodified clients (kafka-python, kcat) read the same brokers, leaders and ISRs
from every live broker as ZooKeeper holds: the controller's UpdateMetadata reached every cache."""
from __future__ import annotations

import json
import subprocess

from _acceptance import create_topic, state
from external import require

ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}


def expected_view(cluster, topic: str) -> dict:
    """Brokers and (partition, leader, replicas, ISR) as the state znodes have them."""
    return {"brokers": cluster.live_brokers,
            "partitions": sorted((p, (s := state(cluster, topic, p))[0], sorted(ASSIGNMENT[p]), sorted(s[2]))
                                 for p in ASSIGNMENT)}


def kafka_python_view(port: int, node_id: int, topic: str) -> dict:
    """Metadata as kafka-python decodes it, asked of broker `node_id` itself (not the least loaded one)."""
    from kafka import KafkaAdminClient
    from kafka.protocol.metadata import MetadataRequest

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=10_000)
    try:
        async def ask():
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                      allow_auto_topic_creation=False)
            return (await admin._manager.send(request, node_id=node_id)).to_dict()
        metadata = admin._manager.run(ask)
    finally:
        admin.close()
    [described] = metadata["topics"]
    return {"brokers": sorted(b["node_id"] for b in metadata["brokers"]),
            "partitions": sorted((p["partition_index"], p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
                                 for p in described["partitions"])}


def kcat_view(kcat: str, port: int, topic: str) -> dict:
    """`kcat -L` with this broker as its only bootstrap server."""
    out = subprocess.run([kcat, "-b", f"127.0.0.1:{port}", "-L", "-J", "-t", topic, "-m", "10"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    m = json.loads(out)
    return {"brokers": sorted(b["id"] for b in m["brokers"]),
            "partitions": sorted((p["partition"], p["leader"], sorted(r["id"] for r in p["replicas"]),
                                  sorted(r["id"] for r in p["isrs"])) for t in m["topics"] for p in t["partitions"])}


def test_kafka_python_and_kcat_agree_with_zookeeper_on_every_broker_after_a_failover(make_cluster, kcat):
    try:
        import kafka  # noqa: F401
    except ImportError:
        require(False, "kafka-python is not installed (pip install -e '.[dev]')")
    cluster = make_cluster(3, **{"auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "meta", ASSIGNMENT)
    cluster.kill(1)
    cluster.wait_until(lambda: all(1 not in state(cluster, "meta", p)[2] and state(cluster, "meta", p)[0] != 1
                                   for p in ASSIGNMENT), what="broker 1 out of every leader and ISR")
    expected = expected_view(cluster, "meta")
    assert expected["brokers"] == [0, 2] and [p[1] for p in expected["partitions"]] == [0, 2, 2]
    for broker_id in cluster.live_brokers:
        port = cluster.ports[broker_id]
        cluster.wait_until(lambda b=broker_id, p=port: kafka_python_view(p, b, "meta") == expected,
                           what=f"kafka-python's view from broker {broker_id}")
        assert kcat_view(kcat, port, "meta") == expected
