"""Fixtures for the cluster suite: in-process clusters, and broker processes on a real ZooKeeper."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS / "broker"))    # _broker_client
sys.path.insert(0, str(TESTS / "compat"))    # broker_process

from kafka_edu.server.cluster import InProcessCluster  # noqa: E402


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster(size, protocol=..., **overrides) -> a started InProcessCluster, shut down after the test."""
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    clusters = []

    def make(size: int = 3, broker_overrides=None, protocol: str = "PLAINTEXT", **overrides) -> InProcessCluster:
        cluster = InProcessCluster(size, overrides, broker_overrides, data_dir=str(tmp_path / f"c{len(clusters)}"),
                                   protocol=protocol)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.shutdown()
