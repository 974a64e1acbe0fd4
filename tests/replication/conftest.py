"""Fixtures for the replication suite: clusters of in-process brokers (see _cluster.py)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))   # _broker_client

from _cluster import Cluster  # noqa: E402


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster(size, **broker_props) -> a started Cluster, shut down after the test."""
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    clusters = []

    def make(size: int, **props) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster{len(clusters)}", size, **props)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.shutdown()
