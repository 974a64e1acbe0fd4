"""Smoke tests: each external component the suite relies on starts, answers and stops cleanly."""
import socket
import subprocess

from kazoo.client import KazooClient

from external import MockCluster, ZooKeeperServer, four_letter, require


def test_zookeeper_starts_answers_and_stops(tmp_path):
    import shutil
    from pathlib import Path

    from external import ZOOKEEPER_JARS
    require(shutil.which("java") is not None and all(Path(j).exists() for j in ZOOKEEPER_JARS),
            "Debian's zookeeper package and a Java runtime are needed")
    server = ZooKeeperServer(tmp_path).start()
    try:
        assert four_letter(server.port, b"ruok") == b"imok"
        zk = KazooClient(hosts=server.connect, timeout=10)
        zk.start(timeout=30)
        zk.create("/brokers/ids/0", b'{"host":"127.0.0.1"}', ephemeral=True, makepath=True)
        assert zk.get_children("/brokers/ids") == ["0"]
        zk.stop()
        zk.close()
    finally:
        server.stop()
    assert server.proc.poll() is not None
    assert four_letter(server.port, b"ruok") == b""


def test_session_zookeeper_fixture(zookeeper):
    assert four_letter(zookeeper.port, b"ruok") == b"imok"


def test_mock_cluster_starts_and_stops():
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        require(False, "confluent-kafka is not installed")
    cluster = MockCluster(3)
    try:
        assert len(cluster.addresses) == 3
        for host, port in cluster.addresses:
            socket.create_connection((host, port), timeout=5).close()
    finally:
        cluster.stop()
    assert cluster.proc.poll() is not None


def test_mock_cluster_round_trip(mock_cluster):
    from confluent_kafka import Consumer, Producer
    producer = Producer({"bootstrap.servers": mock_cluster.bootstrap})
    producer.produce("fixture-smoke", key=b"k", value=b"v", partition=0)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": mock_cluster.bootstrap, "group.id": "smoke",
                         "auto.offset.reset": "earliest"})
    from confluent_kafka import TopicPartition
    consumer.assign([TopicPartition("fixture-smoke", 0, 0)])
    msg = None
    for _ in range(50):
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            break
    consumer.close()
    assert msg is not None and (msg.key(), msg.value()) == (b"k", b"v")


def test_kcat_lists_the_mock_cluster(kcat, mock_cluster):
    out = subprocess.run([kcat, "-b", mock_cluster.bootstrap, "-L", "-m", "5"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "3 brokers" in out.stdout
