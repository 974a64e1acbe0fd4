"""Beyond 0.10 (KIP-207): a new leader whose high watermark has not reached the log end at which its
leadership began refuses a client's ListOffsets for the latest offset, or for a time past the high
watermark, with OFFSET_NOT_AVAILABLE; clients ask again until it has caught up."""
from __future__ import annotations


from _broker_client import BrokerClient
from trailing_watermark import answered_once_caught_up, trailing_high_watermark

from kafka_edu.clients.admin import ClusterAdmin
from kafka_edu.common.cluster import TopicPartition
from kafka_edu.common.protocol.api_keys import ApiKeys
from kafka_edu.common.protocol.errors import Errors

FAR_FUTURE_MS = 4_000_000_000_000


def answer(client: BrokerClient, timestamp: int, replica_id: int = -1):
    body = {"replica_id": replica_id, "isolation_level": 0, "topics": [
        {"name": "trailing", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}
    p = client.call(ApiKeys.LIST_OFFSETS, 5, body).topics[0].partitions[0]
    return Errors.for_code(p.error_code), p.offset


def test_a_new_leader_tells_clients_the_latest_offset_only_once_its_watermark_caught_up(tmp_path):
    with trailing_high_watermark(tmp_path / "cluster") as (cluster, values):
        with BrokerClient(cluster.broker(1).bound_port()) as client:
            assert answer(client, -1)[0] is Errors.OFFSET_NOT_AVAILABLE
            assert answer(client, FAR_FUTURE_MS)[0] is Errors.OFFSET_NOT_AVAILABLE
            assert answer(client, -2) == (Errors.NONE, 0)                  # the earliest offset is known
            assert answer(client, -1, replica_id=2) == (Errors.NONE, len(values))   # a replica reads to the LEO
        admin = ClusterAdmin(cluster.bootstrap_servers, request_timeout_ms=20_000, retry_backoff_ms=50)
        try:
            found = answered_once_caught_up(cluster, lambda: admin.list_offsets({TopicPartition("trailing", 0): -1}),
                                            pause_s=1.0)                  # the admin client asks again meanwhile
            assert found[TopicPartition("trailing", 0)].offset == len(values)
        finally:
            admin.close()
        with BrokerClient(cluster.broker(1).bound_port()) as client:
            assert answer(client, -1) == (Errors.NONE, len(values))
            assert answer(client, FAR_FUTURE_MS) == (Errors.NONE, -1)      # no record that late: none, no error
