"""The embedded ZooKeeper's snapshot (Beyond 0.10): persistent znodes only, rewritten only after a change."""
import os

from kafka_edu.server.kafka_server import EMBEDDED_SNAPSHOT_FILE, EmbeddedZooKeeperSnapshot
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper


def test_save_skips_an_unchanged_tree_and_restore_rebuilds_it(tmp_path):
    client = EmbeddedZooKeeper().connect("writer")
    path = os.path.join(tmp_path, EMBEDDED_SNAPSHOT_FILE)
    try:
        client.create("/brokers/topics/clicks", b'{"partitions":{"0":[0]}}', makepath=True)
        client.create("/brokers/ids/0", b"{}", ephemeral=True, makepath=True)
        snapshot = EmbeddedZooKeeperSnapshot(client, path)
        assert snapshot.save() == 4                     # /brokers, /brokers/topics, .../clicks, /brokers/ids
        os.utime(path, ns=(0, 0))                       # a mark a rewrite would wipe out
        assert snapshot.save() == 4 and os.stat(path).st_mtime_ns == 0
        client.set("/brokers/topics/clicks", b'{"partitions":{"0":[0,1]}}')
        assert snapshot.save() == 4 and os.stat(path).st_mtime_ns != 0
    finally:
        client.close()
    fresh = EmbeddedZooKeeper().connect("reader")
    try:
        assert EmbeddedZooKeeperSnapshot(fresh, path).restore() == 4
        assert fresh.get("/brokers/topics/clicks")[0] == b'{"partitions":{"0":[0,1]}}'
        assert fresh.get_children("/brokers/ids") == []      # the ephemeral znode was not saved
    finally:
        fresh.close()
