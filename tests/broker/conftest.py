"""Fixtures for the broker suite: one in-process broker per test module, clients per test."""
from __future__ import annotations

import logging

import pytest
from _broker_client import BrokerClient, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    server = start_broker(tmp_path_factory.mktemp("broker"), **{"delete.topic.enable": "true"})
    yield server
    server.shutdown()


@pytest.fixture
def client(broker):
    with BrokerClient(broker.bound_port()) as c:
        yield c
