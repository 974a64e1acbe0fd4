"""The broker's half of a controlled shutdown (4.6.9), against a scripted controller.

The controller is a ScriptedBroker registered as broker 9 and written into /controller before the
real broker starts, so the real broker never becomes controller itself and sends its
ControlledShutdown requests over the wire to the script.
"""
from __future__ import annotations

import logging

import pytest
from _broker_client import start_broker
from scripted_broker import ScriptedBroker, metadata_answer

from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import ZkUtils, controller_json

FAST_RETRIES = {"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 10}


def remaining(*answers):
    """A ControlledShutdown handler answering with these partition lists in turn (the last repeats)."""
    answers = list(answers)

    def answer(header, body):
        partitions = answers.pop(0) if len(answers) > 1 else answers[0]
        return {"error_code": 0, "remaining_partitions": [{"topic_name": t, "partition_index": p}
                                                          for t, p in partitions]}
    return answer


@pytest.fixture
def setting(tmp_path):
    """(zookeeper, scripted controller 9, start(**props) -> broker 0) with the script holding /controller."""
    logging.getLogger("kafka_edu").setLevel(logging.ERROR)
    zookeeper = EmbeddedZooKeeper()
    controller = ScriptedBroker(node_id=9)
    controller.handlers[ApiKeys.METADATA] = metadata_answer([controller], {}, controller_id=9)
    session = zookeeper.connect("scripted-controller")
    zk_utils = ZkUtils(session)
    host, port = controller.address
    zk_utils.register_broker(9, host, port, [f"PLAINTEXT://{host}:{port}"])
    session.create("/controller", controller_json(9, 0), ephemeral=True)
    brokers = []

    def start(**props):
        broker = start_broker(tmp_path / "broker0", zookeeper, **{**FAST_RETRIES, **props})
        brokers.append(broker)
        return broker

    yield zookeeper, controller, start
    for broker in brokers:
        broker.shutdown(controlled=False)
    controller.close()
    session.close()


def shutdown_requests(controller):
    return [body for api, _, body in controller.requests if api is ApiKeys.CONTROLLED_SHUTDOWN]


def test_retries_while_partitions_remain_then_succeeds(setting):
    zookeeper, controller, start = setting
    controller.handlers[ApiKeys.CONTROLLED_SHUTDOWN] = remaining([("t", 0), ("t", 1)], [("t", 1)], [])
    broker = start()
    assert broker.controlled_shutdown() is True
    assert [r["broker_id"] for r in shutdown_requests(controller)] == [0, 0, 0]
    assert "PENDING_CONTROLLED_SHUTDOWN" in [s.name for s in broker.broker_state.history]


def test_gives_up_after_max_retries_and_shuts_down_anyway(setting):
    zookeeper, controller, start = setting
    controller.handlers[ApiKeys.CONTROLLED_SHUTDOWN] = remaining([("t", 0)])
    broker = start(**{"controlled.shutdown.max.retries": 2})
    broker.shutdown()
    assert len(shutdown_requests(controller)) == 2
    assert broker.broker_state.current_state.name == "NOT_RUNNING"
    assert zookeeper.connect().get_children("/brokers/ids") == ["9"]


def test_a_controller_without_the_api_is_asked_once(setting):
    zookeeper, controller, start = setting
    ranges = [r for r in ApiKeys.version_ranges() if r["api_key"] != ApiKeys.CONTROLLED_SHUTDOWN]
    controller.handlers[ApiKeys.API_VERSIONS] = lambda header, body: {"error_code": 0, "api_keys": ranges}
    broker = start()
    assert broker.controlled_shutdown() is False
    assert shutdown_requests(controller) == []
    assert controller.accepted == 1     # one attempt: one connection


def test_disabled_or_alone_sends_nothing(setting, tmp_path):
    zookeeper, controller, start = setting
    controller.handlers[ApiKeys.CONTROLLED_SHUTDOWN] = remaining([])
    start(**{"controlled.shutdown.enable": "false"}).shutdown()
    assert shutdown_requests(controller) == []
    alone = start_broker(tmp_path / "alone", EmbeddedZooKeeper(), **FAST_RETRIES)
    assert alone.controlled_shutdown() is True
    alone.shutdown()
    assert "PENDING_CONTROLLED_SHUTDOWN" not in [s.name for s in alone.broker_state.history]
