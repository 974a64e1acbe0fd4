"""A group coordinator on a mock clock over real `__consumer_offsets` logs, for the coordinator tests.

Purgatories run without reaper threads; `advance(ms)` moves the clock and runs what timed out, so every
test decides exactly when sessions and rebalances expire.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka_edu.common.utils.time import MockTime
from kafka_edu.server.coordinator.group_coordinator import GroupConfig, GroupCoordinator, JoinGroupResult
from kafka_edu.server.coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig
from kafka_edu.server.coordinator.offsets_store import LogOffsetsStore
from kafka_edu.server.coordinator.offsets_topic import (read_group_message_value, read_message_key,
                                                        read_offset_message_value)
from kafka_edu.server.log.log import Log
from kafka_edu.server.log.log_config import LogConfig
from kafka_edu.server.purgatory.delayed_operation import DelayedOperationPurgatory
from kafka_edu.server.utils.scheduler import MockScheduler

PROTOCOLS = [("range", b"sub:orders")]


class Reply:
    """Collects what a callback receives; `.value` is the single answer (None while parked)."""

    def __init__(self):
        self.values = []

    def __call__(self, *args):
        self.values.append(args[0] if len(args) == 1 else args)

    @property
    def value(self):
        assert len(self.values) <= 1, f"answered {len(self.values)} times: {self.values}"
        return self.values[0] if self.values else None

    @property
    def error(self) -> Errors:
        value = self.value
        if isinstance(value, JoinGroupResult):
            return value.error
        if isinstance(value, tuple):
            return value[1]
        return value


class ScriptedStore:
    """An in-memory `__consumer_offsets` whose appends fail with a chosen error and whose HW can lag."""

    def __init__(self):
        self.batches: dict[int, list[bytes]] = {}
        self.fail_with = Errors.NONE
        self.hw_lag = 0

    def append(self, partition, records, callback):
        if self.fail_with is Errors.NONE:
            builder = MemoryRecordsBuilder(base_offset=self.end(partition))
            for record in records.records():
                builder.append(record.timestamp, record.key, record.value)
            self.batches.setdefault(partition, []).append(bytes(builder.build()))
        callback(self.fail_with)

    def end(self, partition):
        return sum(len(list(MemoryRecords(b).records())) for b in self.batches.get(partition, []))

    def log_range(self, partition):
        return 0, max(self.end(partition) - self.hw_lag, 0)

    def read(self, partition, offset, max_bytes):
        for data in self.batches.get(partition, []):
            batch = next(MemoryRecords(data).batches())
            if batch.last_offset >= offset:
                return MemoryRecords(data)
        return MemoryRecords(b"")

    def try_complete_actions(self):
        """Its appends complete no other operation, so they leave nothing for later."""


class Harness:
    def __init__(self, tmp_path: Path, num_partitions: int = 50, keep_empty_groups: bool = False,
                 start_ms: int = 0, retention_ms: int = 24 * 3600 * 1000, check_interval_ms: int = 600_000,
                 min_session_ms: int = 6000, max_session_ms: int = 30000, store=None):
        self.tmp_path = tmp_path
        self.clock = MockTime(start_ms=start_ms)
        self.logs: dict[int, Log] = {}
        self.store = store or LogOffsetsStore(self.log_for)
        self.offset_config = OffsetConfig(offsets_topic_num_partitions=num_partitions,
                                          offsets_retention_ms=retention_ms,
                                          offsets_retention_check_interval_ms=check_interval_ms)
        self.group_config = GroupConfig(min_session_ms, max_session_ms, keep_empty_groups)
        self.start_coordinator()

    def start_coordinator(self) -> None:
        """A fresh coordinator (a broker restart) over the same logs."""
        if getattr(self, "coordinator", None) is not None:
            self.coordinator.shutdown()
        self.scheduler = MockScheduler(self.clock)
        self.manager = GroupMetadataManager(0, self.offset_config, self.store, self.scheduler, time=self.clock)
        self.purgatories = [DelayedOperationPurgatory(name, 0, reaper_enabled=False, time=self.clock)
                            for name in ("Heartbeat", "Rebalance")]
        numbers = itertools.count(1)
        self.coordinator = GroupCoordinator(0, self.group_config, self.manager, *self.purgatories, time=self.clock,
                                            new_member_id=lambda client_id: f"{client_id}-{next(numbers)}")
        self.coordinator.startup()

    def close(self) -> None:
        self.coordinator.shutdown()
        for log in self.logs.values():
            log.close()

    # --- storage ---------------------------------------------------------------------------------
    def log_for(self, partition: int) -> Log:
        if partition not in self.logs:
            self.logs[partition] = Log(str(self.tmp_path / f"__consumer_offsets-{partition}"),
                                       LogConfig(cleanup_policy="compact"), time=self.clock)
        return self.logs[partition]

    def own(self, *group_ids: str) -> None:
        """Become coordinator of these groups: load their partitions now."""
        for partition in sorted({self.manager.partition_for(g) for g in group_ids}):
            self.coordinator.handle_group_immigration(partition)
        self.scheduler.tick()

    def records(self, partition: int) -> list[tuple[int, object, object]]:
        """(offset, decoded key, decoded value or None) of every record in a partition's log."""
        log = self.log_for(partition)
        data = log.read(log.log_start_offset, 1 << 24, min_one_message=True).records.read_bytes()
        out = []
        for record in MemoryRecords(data).records():
            key = read_message_key(record.key)
            if key.version == 2:
                value = read_group_message_value(key.group, record.value)
            else:
                value = read_offset_message_value(record.value)
            out.append((record.offset, key, value))
        return out

    # --- time ------------------------------------------------------------------------------------
    def advance(self, ms: int) -> None:
        """Let `ms` pass on the mock clock and run every delayed operation that timed out."""
        self.clock.advance(ms)
        for _ in range(2):           # an expired heartbeat may start a rebalance whose timeout is due too
            for purgatory in self.purgatories:
                purgatory.advance_clock(0)
                purgatory.timeout_timer.await_executed()

    # --- requests --------------------------------------------------------------------------------
    def join(self, group_id: str, member_id: str = "", client_id: str = "c", session_ms: int = 10_000,
             rebalance_ms: int | None = None, protocols=PROTOCOLS, protocol_type: str = "consumer") -> Reply:
        reply = Reply()
        self.coordinator.handle_join_group(group_id, member_id, client_id, "/127.0.0.1",
                                           session_ms if rebalance_ms is None else rebalance_ms, session_ms,
                                           protocol_type, protocols, reply)
        return reply

    def sync(self, group_id: str, generation: int, member_id: str, assignment=None) -> Reply:
        reply = Reply()
        self.coordinator.handle_sync_group(group_id, generation, member_id, assignment or {}, reply)
        return reply

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> Errors:
        reply = Reply()
        self.coordinator.handle_heartbeat(group_id, member_id, generation, reply)
        return reply.value

    def leave(self, group_id: str, member_id: str) -> Errors:
        reply = Reply()
        self.coordinator.handle_leave_group(group_id, member_id, reply)
        return reply.value

    def commit(self, group_id: str, member_id: str, generation: int, offsets: dict, metadata: str = "") -> dict:
        reply = Reply()
        request = {tp: self.coordinator.offset_and_metadata(offset, metadata) for tp, offset in offsets.items()}
        self.coordinator.handle_commit_offsets(group_id, member_id, generation, request, reply)
        return reply.value

    def fetch(self, group_id: str, partitions=None):
        return self.coordinator.handle_fetch_offsets(group_id, partitions)

    def stable_group(self, group_id: str, *clients: str, session_ms: int = 10_000,
                     rebalance_ms: int | None = None) -> tuple[int, list[str]]:
        """Join `clients` one after another (each rejoining as needed) and sync: (generation, member ids)."""
        ids: list[str] = []
        timeouts = {"session_ms": session_ms, "rebalance_ms": rebalance_ms}
        for client in clients:
            pending = [self.join(group_id, client_id=client, **timeouts)]
            for member_id in ids:
                pending.append(self.join(group_id, member_id=member_id, client_id=member_id.split("-")[0],
                                         **timeouts))
            results = [reply.value for reply in pending]
            assert all(r is not None and r.error is Errors.NONE for r in results), results
            ids = [r.member_id for r in results[1:]] + [results[0].member_id]
        generation = self.manager.get_group(group_id).generation_id
        leader = self.manager.get_group(group_id).leader_id
        syncs = [self.sync(group_id, generation, m, {m: m.encode() for m in ids} if m == leader else None)
                 for m in sorted(ids, key=lambda m: m == leader)]
        assert all(s.error is Errors.NONE for s in syncs), [s.value for s in syncs]
        return generation, ids
