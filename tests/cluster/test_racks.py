"""broker.rack: the registration carries it, Metadata v1+ reports it, and `kafka-edu topics --create`
places a topic's replicas across racks on an in-process cluster of 4 brokers on 2 racks."""
from __future__ import annotations

import json

from _broker_client import BrokerClient

from kafka_edu.tools.cli import run_captured

RACKS = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}


def wait_for_racks(cluster, racks: dict[int, str | None]) -> None:
    """Until every broker's MetadataCache (fed by the controller's UpdateMetadata) knows every broker's rack."""
    cluster.wait_until(lambda: all({b.id: b.rack for b in cluster.broker(i).metadata_cache.get_alive_brokers()}
                                   == racks for i in racks), what="UpdateMetadata with the racks")


def test_registration_and_metadata_carry_the_rack(make_cluster):
    cluster = make_cluster(2, broker_overrides={0: {"broker.rack": "r1"}})
    registration = json.loads(cluster.zk.get("/brokers/ids/0")[0])
    assert registration["rack"] == "r1" and registration["version"] == 3
    assert "rack" not in json.loads(cluster.zk.get("/brokers/ids/1")[0])       # unset: no field, as 0.10
    wait_for_racks(cluster, {0: "r1", 1: None})
    with BrokerClient(cluster.ports[1]) as client:
        for version in (1, 5):
            brokers = {b.node_id: b.rack for b in client.metadata([], version=version).brokers}
            assert brokers == {0: "r1", 1: None}
        assert not hasattr(client.metadata([], version=0).brokers[0], "rack")    # v0 has no rack field


def test_topics_create_places_replicas_across_racks(make_cluster):
    cluster = make_cluster(4, broker_overrides={b: {"broker.rack": r} for b, r in RACKS.items()})
    wait_for_racks(cluster, RACKS)
    status, out, err = run_captured(["topics", "--bootstrap-server", cluster.bootstrap_servers, "--create",
                                     "--topic", "racked", "--partitions", "8", "--replication-factor", "2"])
    assert status == 0, err
    assignment = cluster.zk_utils.get_replica_assignment_for_topics(["racked"])
    replicas = {p: r for (_, p), r in assignment.items()}
    assert sorted(replicas) == list(range(8))
    for partition, brokers in replicas.items():
        assert {RACKS[b] for b in brokers} == {"r1", "r2"}, (partition, brokers)
    leaders = [brokers[0] for brokers in replicas.values()]
    assert sorted(set(leaders)) == [0, 1, 2, 3]                   # leaders spread over every broker too
    cluster.wait_until(lambda: all(cluster.partition_state("racked", p) for p in range(8)), what="leaders")
