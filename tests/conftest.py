"""Shared fixtures: a free port, a real ZooKeeper server, librdkafka's mock cluster and kcat.

The machinery lives in external.py (importable by tests and benchmarks); these are its fixtures.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from external import ZOOKEEPER_JARS, MockCluster, ZooKeeperServer, free_port, require


# modules that one worker runs one after the other: one Spark driver at a time, and the fixed ports
# of `make cluster` and of the packaged ZooKeeper default (2181, 9092-9094) held by one test at a time
SCOPES = {"tests/spark/": "spark", "tests/cluster/test_make_cluster.py": "fixed-ports",
          "tests/cluster/test_process_commands.py": "fixed-ports"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With pytest-xdist (`make unit` runs two workers) a module runs whole and in order on one worker,
    so its module fixtures start once, and SCOPES go together. (xdist's own `loadgroup` no longer
    marks groups with pytest 9.2's node ids.) Another --dist than the default keeps its own scheduler."""
    if config.getoption("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return next((scope for prefix, scope in SCOPES.items() if module.startswith(prefix)), module)

    return ModuleScheduling(config, log)


@pytest.fixture(autouse=True, scope="module")
def _module_keeps_its_log_level_to_itself():
    """Modules quiet kafka_edu's logs for their brokers; the next module starts with the old level,
    so a test that expects a warning (through caplog) sees it whatever ran before."""
    logger = logging.getLogger("kafka_edu")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A running ZooKeeper for the session; yields the server (use `.connect`)."""
    require(shutil.which("java") is not None, "no Java runtime (apt: openjdk-17-jre-headless)")
    require(all(Path(j).exists() for j in ZOOKEEPER_JARS), "Debian's zookeeper package is not installed")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mock_cluster():
    """A 3-broker librdkafka mock cluster for the session; yields it (use `.bootstrap`)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        require(False, "confluent-kafka is not installed (pip install -e '.[dev]')")
    cluster = MockCluster(3)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat")
    require(path is not None, "kcat is not installed (apt: kcat)")
    return path

