"""Deleting consumer groups on a kafka-edu broker process (Beyond 0.10: DeleteGroups, Kafka 1.1).

- `kafka-edu consumer-groups --delete`, run as the installed command, against a group of a real
  kafka-python consumer: refused while the consumer is in the group, done once it closed; then
  `--describe` and `--list` no longer know the group, OffsetFetch answers -1, and a broker restart
  (a reload of `__consumer_offsets`) does not bring the offsets back.
- kafka-python's own `KafkaAdminClient.delete_groups` (the method is called `delete_groups` in
  kafka-python 3; `delete_consumer_groups` in Kafka's Java AdminClient): one DeleteGroups for three
  groups, answered per group.
"""
from __future__ import annotations

import subprocess

import pytest

from broker_process import KAFKA_EDU, BrokerProcess
from external import wait_for
from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys

TOPIC = "orders"
BROKER_SETTINGS = {"offsets.topic.num.partitions": "3"}


def registered_admin(broker: BrokerProcess) -> ClusterAdmin:
    """An admin client of the broker, with topic `orders`. The broker listens before it registers and
    elects itself controller; the admin's calls retry through that (Metadata without brokers, no controller)."""
    admin = ClusterAdmin(broker.bootstrap, request_timeout_ms=20_000)
    if TOPIC not in admin.describe_cluster().topics:
        assert admin.create_topics([NewTopic(TOPIC, 2, 1)]) == {TOPIC: None}
    return admin


@pytest.fixture
def cluster(tmp_path):
    broker = BrokerProcess(tmp_path, BROKER_SETTINGS).start()
    admin = registered_admin(broker)
    yield broker, admin
    admin.close()
    broker.stop()


def cli(broker: BrokerProcess, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "consumer-groups", "--bootstrap-server", broker.bootstrap, *argv],
                          capture_output=True, text=True, timeout=60)


def committed_offsets(admin: ClusterAdmin, group: str) -> dict[int, int] | None:
    """OffsetFetch for both partitions as the coordinator answers it (-1: nothing committed); None while
    the coordinator answers with an error (it is still loading after a restart)."""
    response = admin.call(admin.find_coordinator(group), ApiKeys.OFFSET_FETCH,
                          {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]})
    if response.error_code != 0:
        return None
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def subscribed_consumer(bootstrap: str, group: str):
    """A kafka-python consumer that joined `group` and owns both partitions."""
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=f"{group}-1",
                             enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=500)
    consumer.subscribe([TOPIC])
    wait_for(lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == 2, 30,
             "the consumer's assignment")
    return consumer


def commit(consumer, offsets: dict[int, int]) -> None:
    from kafka import OffsetAndMetadata, TopicPartition
    consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})


def test_cli_deletes_a_group_once_its_consumer_left_and_a_restart_keeps_it_deleted(tmp_path):
    broker = BrokerProcess(tmp_path, BROKER_SETTINGS).start()
    admin = registered_admin(broker)
    try:
        check_cli_deletion(broker, admin)
        admin.commit_group_offsets("kept", {TopicPartition(TOPIC, 0): 9})     # in the same log: proof of a load
        admin.close()
        assert broker.stop() == 0, broker.output()
        broker.start()                                   # same directory: __consumer_offsets is loaded again
        admin = registered_admin(broker)
        wait_for(lambda: committed_offsets(admin, "kept") == {0: 9, 1: -1}, 30, "the coordinator to load")
        assert wait_for(lambda: committed_offsets(admin, "doomed"), 30, "doomed's partition to load") == {0: -1, 1: -1}
    finally:
        admin.close()
        broker.stop()


def check_cli_deletion(broker: BrokerProcess, admin: ClusterAdmin) -> None:
    consumer = subscribed_consumer(broker.bootstrap, "doomed")
    commit(consumer, {0: 7, 1: 3})
    try:
        refused = cli(broker, "--delete", "--group", "doomed")
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == ("Error: Deletion of some consumer groups failed:\n"
                                  "* Group 'doomed' could not be deleted due to: "
                                  "NON_EMPTY_GROUP (68): The group still has members.\n")
        assert committed_offsets(admin, "doomed") == {0: 7, 1: 3}
    finally:
        consumer.close()                                 # LeaveGroup: under 0.10's rules the group dies
    described = cli(broker, "--describe", "--group", "doomed")
    assert described.returncode == 0 and described.stdout.startswith("Consumer group `doomed` has no active members.")
    assert [line.split()[3] for line in described.stdout.splitlines()[2:]] == ["7", "3"]   # the offsets remain

    deleted = cli(broker, "--delete", "--group", "doomed")
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (
        0, "Deletion of requested consumer groups ('doomed') was successful.\n", "")
    described = cli(broker, "--describe", "--group", "doomed")
    assert (described.returncode, described.stdout) == (0, "Consumer group `doomed` does not exist or is rebalancing.\n")
    listed = cli(broker, "--list")
    assert listed.returncode == 0 and "doomed" not in listed.stdout.split()
    assert committed_offsets(admin, "doomed") == {0: -1, 1: -1}
    again = cli(broker, "--delete", "--group", "doomed")
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND (69)" in again.stderr



def test_delete_without_group_is_a_usage_error(cluster):
    broker, _ = cluster
    usage = cli(broker, "--delete")
    assert (usage.returncode, usage.stdout) == (2, "")
    assert usage.stderr == "kafka-edu consumer-groups: error: --delete needs --group (see --help)\n"


def test_kafka_python_admin_client_deletes_groups(cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import GroupIdNotFoundError, NonEmptyGroupError

    broker, admin = cluster
    idle = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="idle", enable_auto_commit=False)
    idle.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    commit(idle, {0: 4, 1: 6})                           # offsets without membership (generation -1)
    idle.close()
    live = subscribed_consumer(broker.bootstrap, "live")
    commit(live, {0: 1})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answers = client.delete_groups(["idle", "live", "missing"])
        assert answers == {"idle": "OK", "live": NonEmptyGroupError.__name__, "missing": GroupIdNotFoundError.__name__}
        assert committed_offsets(admin, "idle") == {0: -1, 1: -1}
        assert committed_offsets(admin, "live") == {0: 1, 1: -1}
        assert admin.describe_group("live").state == "Stable"
    finally:
        client.close()
        live.close()
