"""Every tool reaches a SASL_PLAINTEXT/PLAIN broker as Kafka's do: admin tools through --command-config,
console tools through --producer.config / --consumer.config; a wrong password is one line and exit 1."""
from __future__ import annotations

import time

import pytest

from kafka_edu.clients.consumer.kafka_consumer import KafkaConsumer
from kafka_edu.common.config import load_properties
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.kafka_server import KafkaServer
from kafka_edu.tools.cli import run_captured

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    config = KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path_factory.mktemp("logs")), "num.network.threads": 1, "num.io.threads": 2,
        "num.partitions": 1, "log.cleaner.enable": "false", "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    server = KafkaServer(config)        # on this process's embedded ZooKeeper: `--zookeeper embedded`
    server.startup()
    yield f"127.0.0.1:{server.bound_port('SASL_PLAINTEXT')}"
    server.shutdown()


def client_file(tmp_path, password: str):
    path = tmp_path / f"client-{password}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="bob" password="{password}";\n')
    return str(path)


def test_admin_and_console_tools_log_in_with_their_config_files(bootstrap, tmp_path):
    good = client_file(tmp_path, "bob-secret")
    status, out, err = run_captured(["topics", "--bootstrap-server", bootstrap, "--command-config", good,
                                     "--create", "--topic", "secured", "--partitions", "1",
                                     "--replication-factor", "1"])
    assert (status, out) == (0, 'Created topic "secured".\n'), err
    status, out, err = run_captured(["topics", "--bootstrap-server", bootstrap, "--command-config", good, "--list"])
    assert status == 0 and "secured" in out.splitlines(), err
    status, _, err = run_captured(["console-producer", "--broker-list", bootstrap, "--topic", "secured",
                                   "--producer.config", good], b"hello\nworld\n")
    assert status == 0, err
    status, out, err = run_captured(["console-consumer", "--bootstrap-server", bootstrap, "--topic", "secured",
                                     "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000",
                                     "--group", "secured-readers", "--consumer.config", good])
    assert (status, out.splitlines()) == (0, ["hello", "world"]), err
    # a group is listed while it has members (0.10 removes a group when its last member leaves)
    member = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": "secured-readers", **load_properties(good)})
    try:
        member.subscribe(["secured"])
        deadline = time.monotonic() + 20
        while not member.assignment():
            assert time.monotonic() < deadline, "the group did not form"
            member.poll(100)
        status, out, err = run_captured(["consumer-groups", "--bootstrap-server", bootstrap,
                                         "--command-config", good, "--list"])
    finally:
        member.close()
    assert (status, out) == (0, "secured-readers\n"), err
    status, out, err = run_captured(["get-offsets", "--broker-list", bootstrap, "--command-config", good,
                                     "--topic", "secured", "--time", "-1"])
    assert (status, out) == (0, "secured:0:2\n"), err


@pytest.mark.parametrize("argv", [
    ["topics", "--bootstrap-server", "{b}", "--command-config", "{f}", "--list"],
    ["consumer-groups", "--bootstrap-server", "{b}", "--command-config", "{f}", "--list"],
    ["configs", "--bootstrap-server", "{b}", "--command-config", "{f}", "--entity-type", "topics", "--describe"],
    ["console-producer", "--broker-list", "{b}", "--topic", "secured", "--producer.config", "{f}"],
    ["console-consumer", "--bootstrap-server", "{b}", "--topic", "secured", "--timeout-ms", "20000",
     "--consumer.config", "{f}"],
], ids=lambda argv: argv[0])
def test_a_wrong_password_is_one_line_and_exit_1(bootstrap, tmp_path, argv):
    bad = client_file(tmp_path, "wrong")
    status, _, err = run_captured([a.format(b=bootstrap, f=bad) for a in argv], b"lost\n")
    lines = [line for line in err.splitlines() if not line.startswith("Processed a total of")]
    assert status == 1, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "Authentication failed" in lines[0] or "Invalid username or password" in lines[0], err


def test_configs_creates_a_scram_user_the_broker_accepts(bootstrap, tmp_path):
    status, out, err = run_captured(["configs", "--zookeeper", "embedded", "--entity-type", "users",
                                     "--entity-name", "carol", "--alter",
                                     "--add-config", "SCRAM-SHA-256=[iterations=4096,password=carol-secret]"])
    assert (status, out) == (0, 'Updated config for user-principal: "carol".\n'), err
    for password, expected in (("carol-secret", 0), ("not-carols", 1)):
        scram = tmp_path / f"scram-{password}.properties"
        scram.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                         f"sasl.username=carol\nsasl.password={password}\n")
        status, out, err = run_captured(["topics", "--bootstrap-server", bootstrap, "--command-config", str(scram),
                                         "--list", "--timeout", "10000"])
        assert status == expected, err
