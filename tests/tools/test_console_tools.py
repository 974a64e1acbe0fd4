"""`kafka-edu console-producer` and `kafka-edu console-consumer` against a kafka-edu broker started
as its own process: a keyed round trip through the console scripts with every compression codec
(checked on disk), interop with kcat and kafka-python in both directions, the reader's and the
formatter's properties, --partition/--offset, a group resuming where it stopped, and the errors."""
from __future__ import annotations

import subprocess
import uuid
from collections import defaultdict

import pytest
from compat.broker_process import KAFKA_EDU, BrokerProcess

from kafka_edu.clients.admin import ClusterAdmin, NewTopic
from kafka_edu.tools.cli import build_parser, discover_tools, run_captured
from kafka_edu.tools.console_producer import producer_config

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
WAIT = ["--timeout-ms", "30000"]          # a safety net: every run below stops at --max-messages first


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("console"), {"offsets.topic.num.partitions": "2"}).start()
    yield proc
    assert proc.stop() == 0, proc.output()


def new_topic(broker, partitions=3) -> str:
    topic = f"console-{uuid.uuid4().hex[:8]}"
    with ClusterAdmin(broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}
    return topic


def produce(broker, topic, data: bytes, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "console-producer", "--broker-list", broker.bootstrap, "--topic", topic,
                           *extra], input=data, capture_output=True, timeout=120)


def consume(broker, topic, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(KAFKA_EDU), "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                           *extra], capture_output=True, timeout=120)


def run_tool(tool, *argv, stdin: bytes = b""):
    """A tool in this process: (status, stdout, stderr); stdout is a StringIO, the formatter decodes."""
    return run_captured([tool, *argv], stdin)


def codecs_on_disk(broker, topic, partitions) -> set[str]:
    found = set()
    for p in range(partitions):
        segment = broker.log_dir / f"{topic}-{p}" / "00000000000000000000.log"
        dump = subprocess.run([str(KAFKA_EDU), "dump-log-segments", "--files", str(segment)], capture_output=True,
                              text=True, timeout=60)
        assert dump.returncode == 0, dump.stderr
        found |= {word for line in dump.stdout.splitlines() if "compresscodec:" in line
                  for word in [line.split("compresscodec: ")[1].split()[0]]}
    return found


# --- usage ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, argv, message", [
    ("console-producer", ["--topic", "t"], "the following arguments are required: --broker-list/--bootstrap-server"),
    ("console-producer", ["--broker-list", "h:1"], "the following arguments are required: --topic"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--compression-codec", "brotli"], "invalid choice"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--property", "parse.key"], "expected KEY=VALUE"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--request-required-acks", "2"],
     "Invalid value '2' for configuration acks"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--producer-property", "linger.ms=soon"],
     "configuration linger.ms"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--property", "key.separator="],
     "key.separator must not be empty"),
    ("console-producer", ["--broker-list", "h:1", "--topic", "t", "--producer.config", "/nonexistent/p.properties"],
     "cannot read --producer.config"),
    ("console-producer", ["--broker-list", "nohost", "--topic", "t"], "Invalid url in bootstrap.servers"),
    ("console-consumer", ["--bootstrap-server", "h:1"], "one of the arguments --topic --whitelist is required"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--whitelist", "t"], "not allowed with"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--offset", "5"], "--offset needs --partition"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--whitelist", "t", "--partition", "0"],
     "--partition needs --topic"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--partition", "-1"], "must not be negative"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--partition", "0", "--group", "g"],
     "--group cannot be used with --partition"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--partition", "0", "--offset", "-3"],
     "expected earliest, latest or an offset"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--partition", "0", "--offset", "1",
                          "--from-beginning"], "--from-beginning cannot be used with --offset"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--timeout-ms", "0"], "must be positive"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--max-messages", "-1"],
     "must not be negative"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--whitelist", "a)"], "--whitelist 'a)' is not a valid"),
    ("console-consumer", ["--bootstrap-server", "h:1", "--topic", "t", "--consumer-property", "fetch.min.bytes=x"],
     "fetch.min.bytes"),
])
def test_usage_errors_are_one_line_with_status_2(tool, argv, message):
    status, out, err = run_tool(tool, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err and err.startswith(f"kafka-edu {tool}: error:"), err


def test_producer_config_precedence(tmp_path):
    props = tmp_path / "producer.properties"
    props.write_text("linger.ms=7\nacks=all\nretries=9\nclient.id=from-file\n")
    parser = build_parser(discover_tools())
    args = parser.parse_args(["console-producer", "--broker-list", "h:1", "--topic", "t", "--producer.config",
                              str(props), "--producer-property", "retries=5", "--producer-property",
                              "key.serializer=ignored", "--message-send-max-retries", "4", "--compression-codec"])
    config = producer_config(args)
    assert config["linger.ms"] == "7" and config["acks"] == "all" and config["client.id"] == "from-file"
    assert config["retries"] == "4"                     # the option given beats --producer-property and the file
    assert config["compression.type"] == "gzip"         # --compression-codec without a value
    assert config["key.serializer"].endswith("ByteArraySerializer") and config["bootstrap.servers"] == "h:1"
    defaults = producer_config(parser.parse_args(["console-producer", "--broker-list", "h:1", "--topic", "t"]))
    assert (defaults["acks"], defaults["linger.ms"], defaults["retries"], defaults["compression.type"],
            defaults["request.timeout.ms"], defaults["client.id"]) == ("1", "1000", "3", "none", "30000",
                                                                        "console-producer")


# --- round trips through the console scripts -------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_keyed_round_trip_with_every_codec(broker, codec):
    topic = new_topic(broker)
    sent = [f"k{i % 5}:{codec} value {i}" + " padding" * (i % 4) for i in range(40)]
    done = produce(broker, topic, "".join(line + "\n" for line in sent).encode(), "--property", "parse.key=true",
                   "--property", "key.separator=:", "--compression-codec", codec)
    assert (done.returncode, done.stderr) == (0, b"")
    got = consume(broker, topic, "--from-beginning", "--max-messages", "40", *WAIT, "--property", "print.key=true",
                  "--property", "key.separator=:")
    assert got.returncode == 0 and got.stderr == b"Processed a total of 40 messages\n", got.stderr
    lines = got.stdout.decode().splitlines()
    assert sorted(lines) == sorted(sent)
    by_key = defaultdict(list)                  # one key, one partition: the order typed is kept
    for line in lines:
        by_key[line.split(":")[0]].append(line)
    assert all(received == [s for s in sent if s.startswith(key + ":")] for key, received in by_key.items())
    assert codecs_on_disk(broker, topic, 3) == {codec.upper()}


def test_console_producer_records_read_by_kcat(broker, kcat):
    topic = new_topic(broker, partitions=2)
    sent = {f"key-{i}": f"value {i} é" for i in range(25)}
    done = produce(broker, topic, "".join(f"{k}\t{v}\n" for k, v in sent.items()).encode(), "--property",
                   "parse.key=true", "--compression-codec", "lz4", "--sync")
    assert (done.returncode, done.stderr) == (0, b"")
    read = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                           "-f", "%k=%s\n"], capture_output=True, timeout=60)
    assert read.returncode == 0, read.stderr
    got = dict(line.split("=", 1) for line in read.stdout.decode().splitlines())
    assert got == sent


def test_kafka_python_records_read_by_console_consumer(broker):
    from kafka import KafkaProducer
    topic = new_topic(broker, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    expected = set()
    for i in range(30):
        key = None if i % 10 == 9 else f"kp-{i}".encode()
        value = None if i == 15 else f"from kafka-python {i}".encode()
        producer.send(topic, value=value, key=key, partition=i % 2, timestamp_ms=1_700_000_000_000 + i)
        expected.add(f"CreateTime:{1_700_000_000_000 + i}|{(key or b'null').decode()}|{(value or b'null').decode()}")
    producer.flush()
    producer.close()
    got = consume(broker, topic, "--from-beginning", "--max-messages", "30", *WAIT, "--property", "print.key=true",
                  "--property", "print.timestamp=true", "--property", "key.separator=|")
    assert got.returncode == 0 and got.stderr == b"Processed a total of 30 messages\n", got.stderr
    assert set(got.stdout.decode().splitlines()) == expected and len(got.stdout.splitlines()) == 30


# --- the console consumer's ways in and out ------------------------------------------------------

def test_partition_offsets_groups_and_timeouts(broker):
    topic = new_topic(broker, partitions=1)
    status, _, err = run_tool("console-producer", "--broker-list", broker.bootstrap, "--topic", topic,
                              stdin=b"".join(b"r%d\n" % i for i in range(6)))
    assert (status, err) == (0, "")
    b = ["--bootstrap-server", broker.bootstrap, "--topic", topic]

    assert run_tool("console-consumer", *b, "--partition", "0", "--offset", "2", "--max-messages", "3", *WAIT) == (
        0, "r2\nr3\nr4\n", "Processed a total of 3 messages\n")
    assert run_tool("console-consumer", *b, "--partition", "0", "--offset", "earliest", "--max-messages", "1",
                    *WAIT)[1] == "r0\n"
    assert run_tool("console-consumer", *b, "--partition", "0", "--from-beginning", "--max-messages", "2",
                    *WAIT)[1] == "r0\nr1\n"
    # from the end (the default) nothing comes, and --timeout-ms ends the wait
    assert run_tool("console-consumer", *b, "--partition", "0", "--timeout-ms", "1000") == (
        0, "", "Processed a total of 0 messages\n")
    assert run_tool("console-consumer", *b, "--partition", "0", "--offset", "latest", "--timeout-ms", "1000") == (
        0, "", "Processed a total of 0 messages\n")
    assert run_tool("console-consumer", *b, "--timeout-ms", "1000") == (0, "", "Processed a total of 0 messages\n")

    group = f"g-{uuid.uuid4().hex[:6]}"
    seen = []
    for _ in range(3):
        status, out, err = run_tool("console-consumer", *b, "--group", group, "--from-beginning", "--max-messages",
                                    "2", *WAIT)
        assert (status, err) == (0, "Processed a total of 2 messages\n")
        seen += out.splitlines()
    assert seen == [f"r{i}" for i in range(6)]           # each run starts at the first record not yet printed
    with ClusterAdmin(broker.bootstrap) as admin:
        assert [o.offset for o in admin.list_group_offsets(group).values()] == [6]
    assert run_tool("console-consumer", *b, "--group", group, "--from-beginning", "--timeout-ms", "1000")[1] == ""


def test_whitelist_and_formatter_properties(broker):
    stem = f"wl-{uuid.uuid4().hex[:6]}"
    for suffix in ("a", "b"):
        topic = f"{stem}-{suffix}"
        with ClusterAdmin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, 1)])
        assert run_tool("console-producer", "--broker-list", broker.bootstrap, "--topic", topic, "--property",
                        "parse.key=true", "--property", "key.separator=,", stdin=f"k{suffix},v{suffix}\n".encode())[0] == 0
    status, out, err = run_tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--whitelist",
                                f"{stem}-a,{stem}-b", "--from-beginning", "--max-messages", "2", *WAIT,
                                "--property", "print.key=true", "--property", "print.value=false",
                                "--property", "line.separator=;")
    assert (status, err) == (0, "Processed a total of 2 messages\n")
    assert sorted(out.split(";")) == ["", "ka", "kb"]


# --- the console producer's properties and errors ------------------------------------------------

def test_producer_reader_properties_and_errors(broker):
    topic = new_topic(broker, partitions=1)
    p = ["--broker-list", broker.bootstrap, "--topic", topic]
    status, _, err = run_tool("console-producer", *p, "--property", "parse.key=true", "--property", "key.separator=:",
                              stdin=b"a:1\nno key\nb:never\n")
    assert (status, err) == (1, "Error: No key found on line 2: no key\n")
    status, _, err = run_tool("console-producer", *p, "--property", "parse.key=true", "--property", "ignore.error=true",
                              "--property", "key.separator=:", "--sync", stdin=b"whole line\r\nc:3\n")
    assert (status, err) == (0, "")
    status, _, err = run_tool("console-producer", *p, "--producer-property", "max.request.size=300",
                              stdin=b"small\n" + b"x" * 400 + b"\nsmall again\n")
    assert status == 1 and err.count("\n") == 1 and err.startswith(
        f"ERROR Error when sending message to topic {topic} with key: null, value: 400 bytes with error: "
        "MESSAGE_TOO_LARGE (10)")
    status, out, _ = run_tool("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                              "--partition", "0", "--offset", "0", "--max-messages", "5", *WAIT,
                              "--property", "print.key=true", "--property", "key.separator=:")
    assert (status, out) == (0, "a:1\nnull:whole line\nc:3\nnull:small\nnull:small again\n")


def test_a_closed_stdout_ends_the_consumer_quietly(broker):
    topic = new_topic(broker, partitions=1)
    assert produce(broker, topic, b"".join(b"line %d\n" % i for i in range(2000))).returncode == 0
    pipeline = subprocess.run(f"'{KAFKA_EDU}' console-consumer --bootstrap-server {broker.bootstrap} --topic {topic} "
                              f"--from-beginning --timeout-ms 30000 | head -n 3", shell=True, capture_output=True,
                              timeout=120)
    assert pipeline.stdout == b"line 0\nline 1\nline 2\n"
    assert b"Traceback" not in pipeline.stderr
