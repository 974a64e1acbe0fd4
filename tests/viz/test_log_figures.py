"""The storage and purgatory figures of chapter 4 (4-7, 4-12, 4-20, 4-24, 4-26, 4-38) read live objects."""
import os
import threading

from kafka_edu.common.record.compression import CompressionType
from kafka_edu.common.record.memory_records import MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.kafka_config import KafkaConfig
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.log.log_manager import LogManager
from kafka_edu.server.network.socket_server import SocketServer
from kafka_edu.server.replica.metadata_cache import MetadataCache
from kafka_edu.server.replica.partition import PartitionState
from kafka_edu.server.replica.replica_manager import FetchPartitionInfo, ReplicaManager
from kafka_edu.server.utils.scheduler import KafkaScheduler
from kafka_edu.server.zk.embedded import EmbeddedZooKeeper
from kafka_edu.server.zk.zk_utils import LeaderAndIsr, ZkUtils
from kafka_edu.viz.delayed_fetch import fetch_snapshot, older_segment_figure, waiting_fetches
from kafka_edu.viz.log import exposure_figure, tail_snapshot, trim_figure
from kafka_edu.viz.log_offsets import record_positions
from kafka_edu.viz.log_segment import first_offset_figure
from kafka_edu.viz.socket_server import processor_slices, processor_slices_figure

V1 = LogConfig(message_format_version="0.10.0")


def _batch(magic, compression, *values):
    builder = MemoryRecordsBuilder(magic, compression, 0)
    for value in values:
        builder.append(1000, None, value)
    return bytes(builder.build())


def test_processor_slices_are_the_acceptors_runs_of_one_array():
    server = SocketServer(KafkaConfig({
        "broker.id": 0, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "num.network.threads": 2, "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="a";'}, warn_unknown=False))
    server.startup()
    try:
        assert processor_slices(server) == [("PLAINTEXT", 0, 2), ("SASL_PLAINTEXT", 2, 4)]
        source = processor_slices_figure(server).source
        assert "processors[2:4]" in source and "queue 3" in source and "queue 4" not in source
    finally:
        server.shutdown()


def test_record_positions_share_the_entry_of_a_batch(tmp_path):
    log = Log(str(tmp_path / "o-0"), LogConfig(), time=MockTime(start_ms=0))
    log.append(_batch(2, CompressionType.NONE, b"a", b"b"))
    log.append(_batch(2, CompressionType.NONE, b"c"))
    positions = record_positions(log)
    log.close()
    assert [offset for offset, _, _ in positions] == [0, 1, 2]
    assert positions[0][2] == positions[1][2] == 0 < positions[2][2]


def test_first_offset_figure_indexes_a_wrapper_under_its_first_inner_offset(tmp_path):
    log = Log(str(tmp_path / "w-0"), LogConfig(message_format_version="0.10.0", index_interval_bytes=0),
              time=MockTime(start_ms=0))
    log.append(_batch(1, CompressionType.NONE, b"a"))
    info = log.append(_batch(1, CompressionType.GZIP, b"b", b"c", b"d"))
    segment = log.active_segment
    (entry,) = segment.index.entries_list()
    source = first_offset_figure([("v1", segment)]).source
    log.close()
    assert (info.first_offset, info.last_offset) == (1, 3) and entry.offset == 1
    assert "header: offset 3 (its last record's)" in source
    assert f"index0:i0:e -> log0:e{entry.position}:w" in source


def test_exposure_figure_reads_past_and_up_to_the_published_end(tmp_path):
    log = Log(str(tmp_path / "r-0"), V1, time=MockTime(start_ms=0))
    for _ in range(3):
        log.append(_batch(1, CompressionType.NONE, b"x"))
    written, resume = threading.Event(), threading.Event()
    publish = log._update_log_end_offset

    def paused(offset):
        written.set()
        resume.wait(10)
        publish(offset)

    log._update_log_end_offset = paused
    writer = threading.Thread(target=log.append, args=(_batch(1, CompressionType.NONE, b"y"),), daemon=True)
    writer.start()
    try:
        assert written.wait(10)
        source = exposure_figure(log, 2).source
    finally:
        resume.set()
        writer.join()
    log.close()
    assert "fetch from 2: offsets 2, 3" in source and "next fetch from 4: OffsetOutOfRange" in source
    assert "fetch from 2: offsets 2<" in source and "next fetch from 3: 0 bytes" in source


def test_trim_figure_keeps_whole_entries_of_a_torn_fetch(tmp_path):
    source_log = Log(str(tmp_path / "a" / "t-0"), V1, time=MockTime(start_ms=0))
    for _ in range(3):
        source_log.append(_batch(1, CompressionType.NONE, b"z" * 100))
    fetched = source_log.read(0, 300).records.read_bytes()
    follower = Log(str(tmp_path / "b" / "t-0"), V1, time=MockTime(start_ms=0))
    info = follower.append(fetched, assign_offsets=False)
    snapshot = tail_snapshot("fetch", fetched)
    source_log.close()
    follower.close()
    whole = snapshot.entries[-1][1] + snapshot.entries[-1][2]
    assert snapshot.size == 300 and info.valid_bytes == whole == follower.size() and len(snapshot.entries) == 2
    assert f"kept {whole:,} bytes, cut {300 - whole:,}" in trim_figure([(snapshot, info.valid_bytes)]).source


def test_older_segment_figure_sees_a_waiting_fetch_completed_by_truncation(tmp_path):
    config = KafkaConfig({"broker.id": 0, "log.dirs": str(tmp_path), "log.segment.bytes": 300})
    scheduler = KafkaScheduler()
    scheduler.startup()
    zk_utils = ZkUtils(EmbeddedZooKeeper().connect())
    zk_utils.create_leader_and_isr("t", 0, LeaderAndIsr(0, 0, (0, 1)), 1)
    log_manager = LogManager(config.log_dirs, scheduler=scheduler)
    replica_manager = ReplicaManager(config, log_manager, zk_utils, scheduler, MetadataCache(0))
    try:
        replica_manager.become_leader_or_follower(0, 1, {("t", 0): PartitionState(1, 0, 0, (0, 1), 0, (0, 1))})
        for _ in range(6):
            replica_manager.append_records(1000, 1, False, {("t", 0): _batch(2, CompressionType.NONE, b"v" * 40)},
                                           lambda result: None)
        partition = replica_manager.get_partition(("t", 0))
        end = partition.local_replica.log_end_offset
        answers = []
        replica_manager.fetch_messages(5_000, 1, 1, 1 << 20, False, [(("t", 0), FetchPartitionInfo(end, 1 << 20))],
                                       answers.append)
        (operation,) = waiting_fetches(replica_manager.delayed_fetch_purgatory, ("t", 0))
        moments = [fetch_snapshot("waits", operation, partition)]
        partition.truncate_to(log_manager.get_log("t", 0).segments[-2].base_offset)
        replica_manager.delayed_fetch_purgatory.check_and_complete(("t", 0))
        moments.append(fetch_snapshot("checked", operation, partition))
        source = older_segment_figure(moments).source
    finally:
        replica_manager.shutdown()
        log_manager.shutdown()
        scheduler.shutdown()
    assert moments[0]["state"] == "waiting" and moments[1]["end"].on_older_segment(moments[1]["fetch"])
    assert "completed: t-0: the log was truncated" in source and "E on an older segment than F" in source
    assert answers and answers[0][0][1].error.name == "OFFSET_OUT_OF_RANGE"
    assert os.path.isdir(tmp_path / "t-0")
