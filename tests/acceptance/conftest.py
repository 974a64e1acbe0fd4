"""Fixtures for the acceptance suite: started InProcessClusters, shut down after each test."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))   # _broker_client

from kafka_edu.server.cluster import InProcessCluster  # noqa: E402


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster(size, broker_overrides=None, **overrides) -> a started InProcessCluster."""
    logging.getLogger("kafka_edu").setLevel(logging.CRITICAL)
    clusters = []

    def make(size: int = 3, broker_overrides=None, **overrides) -> InProcessCluster:
        cluster = InProcessCluster(size, overrides, broker_overrides, data_dir=str(tmp_path / f"c{len(clusters)}"))
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.shutdown()
