"""The 4.7-4.9 trace figures read live objects: a coordinator, two SASL channels, a broker's MBeanServer."""
import itertools
import selectors
import socket

from kafka_edu.common.metrics.jmx_reporter import JmxReporter, MBeanServer
from kafka_edu.common.metrics.metrics import Metrics
from kafka_edu.common.metrics.metrics_group import KafkaMetricsGroup
from kafka_edu.common.network.channel_builders import SaslClientChannelBuilder, SaslServerChannelBuilder
from kafka_edu.common.security.plain import PlainSaslClient, PlainSaslServer
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from kafka_edu.server.coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig
from kafka_edu.server.coordinator.offsets_store import LogOffsetsStore
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.purgatory.delayed_operation import DelayedOperationPurgatory
from kafka_edu.server.utils.scheduler import MockScheduler
from kafka_edu.viz.broker_metrics import mbean_tree_figure, object_name_keys
from kafka_edu.viz.coordinator import CoordinatorTrace, coordinator_trace_figure
from kafka_edu.viz.sasl import SaslSequence, channel_figure, sasl_sequence_figure


def _coordinator(tmp_path):
    clock = MockTime(start_ms=0)
    log = Log(str(tmp_path / "__consumer_offsets-0"), LogConfig(cleanup_policy="compact"), time=clock)
    scheduler = MockScheduler(clock)
    manager = GroupMetadataManager(0, OffsetConfig(offsets_topic_num_partitions=1), LogOffsetsStore(lambda p: log),
                                   scheduler, time=clock)
    numbers = itertools.count(1)
    coordinator = GroupCoordinator(0, GroupConfig(), manager,
                                   *[DelayedOperationPurgatory(n, 0, reaper_enabled=False, time=clock)
                                     for n in ("Heartbeat", "Rebalance")],
                                   time=clock, new_member_id=lambda client: f"{client}-{next(numbers)}")
    coordinator.startup()
    coordinator.handle_group_immigration(0)
    scheduler.tick()
    return coordinator, log


def test_coordinator_trace_parks_a_join_and_restores_what_was_there(tmp_path):
    coordinator, log = _coordinator(tmp_path)
    earlier = coordinator.handle_heartbeat          # another observer's wrapper, put back by stop()
    coordinator.handle_heartbeat = lambda *args: earlier(*args)
    previous = coordinator.handle_heartbeat
    trace = CoordinatorTrace(coordinator)
    protocols = [("range", b"t")]
    joined = {}

    def join(client, member=""):
        coordinator.handle_join_group("g", member, client, "/h", 10_000, 10_000, "consumer", protocols,
                                      lambda result: joined.__setitem__(client, result.member_id))

    trace.scene("alone")
    join("alice")
    trace.scene("bob")
    join("bob")
    coordinator.handle_heartbeat("g", joined["alice"], 1, lambda error: None)
    join("alice", joined["alice"])
    trace.stop()
    labels = [step.text() for scene, step in trace.steps if scene == "bob"]
    assert "bob's JoinGroup is parked" in labels
    assert labels.index("JoinGroup (rejoin)") < labels.index(
        "JoinGroup answer: generation 2, leader alice, no member list")
    assert "Heartbeat answer: REBALANCE_IN_PROGRESS" in labels
    assert vars(coordinator)["handle_heartbeat"] is previous and "handle_join_group" not in vars(coordinator)
    assert "append" not in vars(coordinator.group_manager.storage)
    source = coordinator_trace_figure(trace, ["bob"]).source
    assert "join purgatory" in source and "check_and_complete(g) -&gt; 1 completed" in source
    coordinator.shutdown()
    log.close()


def _login(password: str, handshake_version: int):
    users = {"user_alice": "alice-secret"}
    server_builder = SaslServerChannelBuilder(["PLAIN"], {"PLAIN": lambda: PlainSaslServer(users)})
    client_builder = SaslClientChannelBuilder(lambda: PlainSaslClient("alice", password), "t", handshake_version)
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    server = server_builder.build_channel("s", left, 1 << 20)
    client = client_builder.build_channel("c", right, 1 << 20)
    sequence = SaslSequence()
    sequence.watch(server, "broker")
    sequence.watch(client, "client")
    with selectors.DefaultSelector() as sel:
        sel.register(left, selectors.EVENT_READ | selectors.EVENT_WRITE, server)
        sel.register(right, selectors.EVENT_READ | selectors.EVENT_WRITE, client)
        try:
            while not (server.ready() and client.ready()):
                for key, _ in sel.select(1):
                    if not key.data.ready():
                        key.data.prepare()
        except Exception:
            pass
    left.close()
    right.close()
    return sequence, {"broker": (server_builder, server), "client": (client_builder, client)}


def test_sasl_sequence_decodes_each_frame_and_masks_the_password():
    sequence, sides = _login("alice-secret", 1)
    labels = [step.label for step in sequence.steps]
    assert labels[1] == "SaslHandshake v1 request: mechanism PLAIN"
    assert "SaslAuthenticate v1 response: NONE, token of 0 bytes" in labels
    assert sequence.lanes == {"client": ["PlainSaslClient", "SaslClientAuthenticator"],
                              "broker": ["SaslServerAuthenticator", "PlainSaslServer"]}
    assert "alice-secret" not in sasl_sequence_figure(sequence).source
    assert "principal User:alice" in channel_figure(sides).source
    client_auth = sides["client"][1].authenticator
    assert "_queue" in vars(client_auth) and "initial_response" in vars(client_auth._client)
    sequence.stop()             # what watch() wrapped is put back: the instances' own values, the class's methods
    assert "_queue" not in vars(client_auth) and "initial_response" not in vars(client_auth._client)
    raw, _ = _login("wrong", 0)
    assert [s.label for s in raw.steps][-3:] == ["raw token frame: \\0alice\\0******",
                                                "evaluate_response(12 bytes) raises SaslAuthenticationError",
                                                "failed: Authentication failed: Invalid username or password"]


def test_mbean_tree_opens_the_selected_branch():
    server = MBeanServer()
    metrics = Metrics(reporters=[JmxReporter("kafka.server", server)], time=MockTime())
    KafkaMetricsGroup(metrics, "kafka.server", "ReplicaManager").new_gauge("PartitionCount", lambda: 3)
    source = mbean_tree_figure(server, "kafka.server:type=ReplicaManager,name=PartitionCount").source
    assert "n1 [label=ReplicaManager" in source and "name=PartitionCount" in source and ">3</td>" in source
    assert object_name_keys('kafka.producer:type=producer-metrics,client-id="a,b"') == (
        "kafka.producer", [("type", "producer-metrics"), ("client-id", '"a,b"')])
