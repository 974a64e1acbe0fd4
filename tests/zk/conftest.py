"""Fixtures for the coordination suite: every behaviour test runs on both ZkClient backends.

`zk_cluster` yields a factory of client sessions sharing one tree: an EmbeddedZooKeeper, or
the real ZooKeeper of the session-wide `zookeeper` fixture (kazoo), where each test works
under its own chroot so tests cannot see each other's znodes.
"""
from __future__ import annotations

import itertools

import pytest
from _zktest_util import ZkCluster

_chroots = itertools.count()


@pytest.fixture(params=["embedded", "kazoo"])
def zk_cluster(request):
    if request.param == "embedded":
        cluster = ZkCluster("embedded")
    else:
        zookeeper = request.getfixturevalue("zookeeper")
        cluster = ZkCluster("kazoo", f"{zookeeper.connect}/test{next(_chroots)}")
    yield cluster
    cluster.close()
