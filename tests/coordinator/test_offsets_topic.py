"""`__consumer_offsets` placement and record formats: byte-exact against Kafka's layouts."""
from __future__ import annotations

import struct

import pytest

from kafka_edu.common.protocol.types import ProtocolError
from kafka_edu.server.coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata
from kafka_edu.server.coordinator.offsets_topic import (GroupMetadataKey, OffsetAndMetadata, OffsetKey,
                                                        describe_record, group_metadata_key, group_metadata_value,
                                                        java_string_hash, kafka_abs, offset_commit_key,
                                                        offset_commit_value, partition_for, read_group_message_value,
                                                        read_message_key, read_offset_message_value)

# String.hashCode() and abs(hashCode) % 50 as printed by a JVM (OpenJDK 17) for these strings.
JVM_HASHES = [
    ("g", 103, 3), ("Aa", 2112, 12), ("console-consumer-1", 35782224, 24),
    ("polygenelubricants", -2147483648, 0), ("\U0001F600", 1772899, 49), ("my-group", -1906497762, 12),
    ("billing", -109829509, 9), ("group1", -1237460590, 40), ("spark-kafka-source", -877681262, 12),
]


@pytest.mark.parametrize("text,hash_code,partition", JVM_HASHES)
def test_java_string_hash_and_partition_match_the_jvm(text, hash_code, partition):
    assert java_string_hash(text) == hash_code
    assert partition_for(text, 50) == partition


def test_kafka_abs_maps_min_value_to_zero_and_is_not_a_mask():
    assert kafka_abs(-2**31) == 0
    assert kafka_abs(-1) == 1 and (-1 & 0x7FFFFFFF) != 1
    assert partition_for("billing", 50) != (java_string_hash("billing") & 0x7FFFFFFF) % 50


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        partition_for("g", 0)


def test_offset_commit_key_and_value_v1_literal_bytes():
    key = offset_commit_key("group", "topic", 7)
    assert key == (b"\x00\x01" b"\x00\x05group" b"\x00\x05topic" b"\x00\x00\x00\x07")
    value = offset_commit_value(OffsetAndMetadata(123456789, "meta", 1_500_000_000_000, 1_500_086_400_000))
    assert value == (b"\x00\x01" + struct.pack(">q", 123456789) + b"\x00\x04meta"
                     + struct.pack(">qq", 1_500_000_000_000, 1_500_086_400_000))
    assert read_message_key(key) == OffsetKey(1, "group", "topic", 7)
    assert read_offset_message_value(value) == OffsetAndMetadata(123456789, "meta", 1_500_000_000_000,
                                                                 1_500_086_400_000)


def test_group_metadata_key_literal_bytes():
    assert group_metadata_key("group") == b"\x00\x02\x00\x05group"
    assert read_message_key(b"\x00\x02\x00\x05group") == GroupMetadataKey(2, "group")


def test_offset_key_version_0_reads_like_version_1():
    v0 = b"\x00\x00" + offset_commit_key("g", "t", 1)[2:]
    assert read_message_key(v0) == OffsetKey(0, "g", "t", 1)


def test_offset_value_versions_0_2_3_read_back():
    v0 = b"\x00\x00" + struct.pack(">q", 5) + b"\x00\x00" + struct.pack(">q", 77)
    assert read_offset_message_value(v0) == OffsetAndMetadata(5, "", 77, -1, -1)
    v2 = b"\x00\x02" + struct.pack(">q", 5) + b"\x00\x01m" + struct.pack(">q", 77)
    assert read_offset_message_value(v2) == OffsetAndMetadata(5, "m", 77, -1, -1)
    v3 = b"\x00\x03" + struct.pack(">qi", 5, 9) + b"\x00\x00" + struct.pack(">q", 77)
    assert read_offset_message_value(v3) == OffsetAndMetadata(5, "", 77, -1, 9)


def test_a_commit_with_a_leader_epoch_is_written_as_v3():
    value = offset_commit_value(OffsetAndMetadata(5, "", 77, 1077, leader_epoch=9))
    assert value == b"\x00\x03" + struct.pack(">qi", 5, 9) + b"\x00\x00" + struct.pack(">q", 77)


def _stable_group() -> GroupMetadata:
    group = GroupMetadata("grp", "consumer")
    for member_id in ("m-1", "m-2"):
        member = MemberMetadata(member_id, "grp", member_id[0], "/h", 45_000, 10_000, "consumer",
                                [("range", b"S" + member_id.encode())])
        member.awaiting_join_callback = print
        group.add(member)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    return group


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_group_metadata_value_v0_and_v1_literal_bytes():
    group = _stable_group()
    assignment = {"m-1": b"A1", "m-2": b""}
    head = _s("consumer") + struct.pack(">i", 1) + _s("range") + _s("m-1") + struct.pack(">i", 2)
    v0 = b"\x00\x00" + head
    v1 = b"\x00\x01" + head
    for member_id, assigned in assignment.items():
        v0 += _s(member_id) + _s("m") + _s("/h") + struct.pack(">i", 10_000) + _b(b"S" + member_id.encode()) \
            + _b(assigned)
        v1 += _s(member_id) + _s("m") + _s("/h") + struct.pack(">ii", 45_000, 10_000) + _b(b"S" + member_id.encode()) \
            + _b(assigned)
    assert group_metadata_value(group, assignment, version=0) == v0
    assert group_metadata_value(group, assignment) == v1


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_metadata_value_round_trips(version):
    group = _stable_group()
    data = group_metadata_value(group, {"m-1": b"A1", "m-2": b"A2"}, version=version, current_state_timestamp=5)
    back = read_group_message_value("grp", data)
    assert back.state is GroupState.STABLE and back.generation_id == 1 and back.protocol == "range"
    assert back.leader_id == "m-1" and back.all_members() == ["m-1", "m-2"]
    assert [m.assignment for m in back.all_member_metadata()] == [b"A1", b"A2"]
    assert back.get("m-2").metadata("range") == b"Sm-2"
    expected_rebalance = 10_000 if version == 0 else 45_000
    assert back.get("m-1").rebalance_timeout_ms == expected_rebalance


def test_an_empty_group_is_stored_with_null_protocol_and_leader_and_loads_as_empty():
    group = GroupMetadata("grp", "consumer", initial_state=GroupState.EMPTY)
    data = group_metadata_value(group, {})
    assert data == b"\x00\x01" + _s("consumer") + struct.pack(">ihhi", 0, -1, -1, 0)
    back = read_group_message_value("grp", data)
    assert back.state is GroupState.EMPTY and back.leader_id is None and back.protocol is None


def test_group_value_requires_an_assignment_for_every_member():
    with pytest.raises(ValueError):
        group_metadata_value(_stable_group(), {"m-1": b""})


def test_tombstones_decode_to_none():
    assert read_offset_message_value(None) is None
    assert read_group_message_value("g", None) is None


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x07\x00\x01g", b"\x00\x01\x00\x05gr", b"\x00\x02\x00\x01gX"])
def test_bad_keys_raise_protocol_error(data):
    with pytest.raises(ProtocolError):
        read_message_key(data)


def test_unknown_value_versions_raise_protocol_error():
    with pytest.raises(ProtocolError):
        read_offset_message_value(b"\x00\x09" + bytes(30))
    with pytest.raises(ProtocolError):
        read_group_message_value("g", b"\x00\x04" + bytes(30))


def test_describe_record_reads_every_kind():
    assert describe_record(offset_commit_key("g", "t", 0), None) == ("offset [g,t,0]", "tombstone")
    shown = describe_record(offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(3, "x", 1, 2)))
    assert shown == ("offset [g,t,0]", "offset 3 'x' at 1, expires 2")
    key, value = describe_record(group_metadata_key("grp"), group_metadata_value(_stable_group(),
                                                                                   {"m-1": b"", "m-2": b"AB"}))
    assert key == "group [grp]" and "generation 1" in value and "m-2=2B" in value
