"""Two topic names that differ only in '.' and '_' would share their metric names, so the second is
refused (INVALID_TOPIC_EXCEPTION), as Kafka 0.10 refuses it: checked against the topics that exist when
it is written, so the same CreateTopics request or an auto-creation cannot slip past."""
import logging

import pytest
from _broker_client import BrokerClient, start_broker

from kafka_edu.common.protocol.errors import Errors


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    logging.getLogger("kafka_edu").setLevel(logging.WARNING)
    server = start_broker(tmp_path_factory.mktemp("broker"))
    yield server
    server.shutdown()


def topic(name):
    return {"name": name, "num_partitions": 1, "replication_factor": 1, "configs": []}


def test_two_colliding_topics_in_one_create_topics_request(broker):
    with BrokerClient(broker.bound_port()) as c:
        results = c.create_topics([topic("metrics.a"), topic("metrics_a")])
    codes = {n: Errors.for_code(r.error_code) for n, r in results.items()}
    topics = sorted(broker.zk_utils.get_all_topics())
    assert codes["metrics_a"] is Errors.INVALID_TOPIC_EXCEPTION, (codes, topics)


def test_auto_creation_refuses_a_colliding_name(broker):
    with BrokerClient(broker.bound_port()) as c:
        assert c.create_topics([topic("auto.x")])["auto.x"].error_code == 0
        response = c.metadata(["auto_x"])
    error = Errors.for_code(response.topics[0].error_code)
    topics = sorted(broker.zk_utils.get_all_topics())
    assert error is Errors.INVALID_TOPIC_EXCEPTION and "auto_x" not in topics, (error, topics)
