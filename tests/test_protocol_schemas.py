"""Every request and response schema of every API version we serve, plus headers and frames.

Values are generated from the schema itself, so the test follows the declarations: whatever a
schema accepts must come back unchanged, every strict prefix of an encoding must fail, and no
garbled input may raise anything but ProtocolError.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_strategies import strategy

from kafka_edu.common.protocol.api_keys import ApiKeys, UnsupportedVersionError
from kafka_edu.common.protocol.errors import Errors
from kafka_edu.common.protocol.header import (
    RequestHeader, decode_request, decode_response, encode_request, encode_response, request_header_version,
)
from kafka_edu.common.protocol.types import COMPACT_STRING, INT32, TAGGED_FIELDS, ProtocolError, compile_reader

FAST = settings(max_examples=20, deadline=None, database=None)


def distinct_schemas():
    """(id, schema) once per distinct schema object, named by the versions that share it."""
    seen: dict[int, list] = {}
    for api in ApiKeys:
        for kind in ("request", "response"):
            for version in range(api.min_version, api.max_version + 1):
                schema = getattr(api, f"{kind}_schema")(version)
                seen.setdefault(id(schema), [schema, api.message.name, kind, []])[3].append(version)
    return [pytest.param(schema, id=f"{name}-{kind}-v{'/'.join(map(str, vs))}")
            for schema, name, kind, vs in seen.values()]


SCHEMAS = distinct_schemas()


def test_every_api_and_version_is_declared():
    expected = {"PRODUCE": 8, "FETCH": 11, "LIST_OFFSETS": 5, "METADATA": 8, "OFFSET_COMMIT": 7, "OFFSET_FETCH": 5,
                "FIND_COORDINATOR": 2, "JOIN_GROUP": 5, "HEARTBEAT": 3, "LEAVE_GROUP": 3, "SYNC_GROUP": 3,
                "DESCRIBE_GROUPS": 4, "LIST_GROUPS": 2, "SASL_HANDSHAKE": 1, "SASL_AUTHENTICATE": 1, "API_VERSIONS": 2,
                "CREATE_TOPICS": 4, "DELETE_TOPICS": 3, "INIT_PRODUCER_ID": 1, "DESCRIBE_CONFIGS": 2, "ALTER_CONFIGS": 1,
                "CREATE_PARTITIONS": 1, "DESCRIBE_ACLS": 1, "CREATE_ACLS": 1, "DELETE_ACLS": 1, "LEADER_AND_ISR": 1,
                "STOP_REPLICA": 0, "UPDATE_METADATA": 4, "CONTROLLED_SHUTDOWN": 1,
                "DELETE_GROUPS": 1,   # DeleteGroups (Kafka 1.1): beyond DESIGN.md's list, for consumer-groups --delete
                "OFFSET_FOR_LEADER_EPOCH": 3}   # Kafka 0.11 (KIP-101): followers truncate by leader epoch
    assert {k.name: k.max_version for k in ApiKeys} == expected
    assert all(k.min_version == 0 for k in ApiKeys)
    for key in ApiKeys:   # only non-flexible versions are served
        assert key.flexible_from is None or key.flexible_from > key.max_version
    with pytest.raises(UnsupportedVersionError):
        ApiKeys.FETCH.request_schema(12)
    with pytest.raises(UnsupportedVersionError):
        ApiKeys.METADATA.response_schema(-1)


def test_spot_checks_against_the_specs():
    produce = ApiKeys.PRODUCE
    assert [f.name for f in produce.request_schema(2).fields] == ["acks", "timeout_ms", "topic_data"]
    assert produce.request_schema(3).fields[0].type.name == "NULLABLE_STRING"
    assert [f.name for f in produce.response_schema(1).fields] == ["responses", "throttle_time_ms"]
    metadata = ApiKeys.METADATA
    assert not metadata.request_schema(0).field("topics").type.nullable
    assert metadata.request_schema(1).field("topics").type.nullable
    assert metadata.request_schema(4).field("allow_auto_topic_creation").default is True
    assert ApiKeys.FETCH.request_schema(3).field("max_bytes").default == 0x7FFFFFFF
    assert "retention_time_ms" in ApiKeys.OFFSET_COMMIT.request_schema(2)
    assert "retention_time_ms" not in ApiKeys.OFFSET_COMMIT.request_schema(5)
    assert [f.name for f in ApiKeys.API_VERSIONS.response_schema(0).fields] == ["error_code", "api_keys"]
    assert ApiKeys.API_VERSIONS.request_schema(2).fields == ()
    assert ApiKeys.PRODUCE.request_schema(0) is ApiKeys.PRODUCE.request_schema(2)
    delete_groups = ApiKeys.DELETE_GROUPS
    assert delete_groups.value == 42 and delete_groups.flexible_from == 2
    assert [f.name for f in delete_groups.request_schema(1).fields] == ["groups_names"]
    assert [f.name for f in delete_groups.response_schema(0).fields] == ["throttle_time_ms", "results"]
    assert [f.name for f in delete_groups.response_schema(1).field("results").type.type.fields] == \
        ["group_id", "error_code"]


@pytest.mark.parametrize("schema", SCHEMAS)
@FAST
@given(data=st.data())
def test_round_trip_truncation_and_garbling(schema, data):
    """Values round-trip; every strict prefix fails; a garbled encoding decodes or raises ProtocolError."""
    value = data.draw(strategy(schema))
    wire = schema.write(value)
    back = schema.read(wire)
    assert back.to_dict() == value and back == value
    assert schema.write(back) == wire
    for cut in range(len(wire)):
        with pytest.raises(ProtocolError):
            schema.read(wire[:cut])
    with pytest.raises(ProtocolError):
        schema.read(wire + b"\x00")

    garbled = bytearray(wire)
    if garbled:
        for _ in range(data.draw(st.integers(1, 4))):
            garbled[data.draw(st.integers(0, len(garbled) - 1))] = data.draw(st.integers(0, 255))
    garbled += data.draw(st.binary(max_size=3))
    try:
        schema.read(bytes(garbled))
    except ProtocolError as e:
        assert e.offset is not None and 0 <= e.offset <= len(garbled)


def _outcome(read, data):
    """What a reader makes of `data`: (value, end) or the error's (message, field, offset)."""
    try:
        value, end = read(data, 0)
        return "value", value.to_dict() if hasattr(value, "to_dict") else value, end
    except ProtocolError as e:
        return "error", str(e), e.field, e.offset


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=5, deadline=None, database=None)
@given(data=st.data())
def test_compiled_reader_agrees_with_the_schema_walk(schema, data):
    """Same values for every encoding, same ProtocolError (message, field, offset) for cut and garbled ones."""
    read = compile_reader(schema)
    wire = schema.write(data.draw(strategy(schema)))
    assert _outcome(read, wire) == _outcome(schema.read_from, wire)
    cut = data.draw(st.integers(0, max(len(wire) - 1, 0)))
    assert _outcome(read, wire[:cut]) == _outcome(schema.read_from, wire[:cut])
    garbled = bytearray(wire)
    for _ in range(data.draw(st.integers(1, 4)) if garbled else 0):
        garbled[data.draw(st.integers(0, len(garbled) - 1))] = data.draw(st.integers(0, 255))
    assert _outcome(read, bytes(garbled)) == _outcome(schema.read_from, bytes(garbled))


@pytest.mark.parametrize("schema", SCHEMAS[::4])
@settings(max_examples=10, deadline=None, database=None)
@given(junk=st.binary(max_size=64))
def test_random_bytes_raise_only_protocol_error(schema, junk):
    try:
        schema.read(junk)
    except ProtocolError:
        pass


@pytest.mark.parametrize("api", list(ApiKeys), ids=lambda k: k.name)
@settings(max_examples=10, deadline=None, database=None)
@given(data=st.data())
def test_request_and_response_frames(api, data):
    version = data.draw(st.integers(api.min_version, api.max_version))
    header = RequestHeader(api, version, data.draw(st.integers(-2**31, 2**31 - 1)),
                           data.draw(st.none() | st.text(max_size=10)))
    body = data.draw(strategy(api.request_schema(version)))
    frame = encode_request(header, body)
    assert INT32.read(frame[:4]) == len(frame) - 4
    decoded, struct = decode_request(frame[4:])
    expected_client = None if (api, version) == (ApiKeys.CONTROLLED_SHUTDOWN, 0) else header.client_id
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == \
        (api, version, header.correlation_id, expected_client)
    assert struct == body
    for cut in range(len(frame) - 4):
        with pytest.raises(ProtocolError):
            decode_request(frame[4:4 + cut])

    response = data.draw(strategy(api.response_schema(version)))
    frame = encode_response(header.correlation_id, api, version, response)
    assert INT32.read(frame[:4]) == len(frame) - 4
    correlation_id, struct = decode_response(frame[4:], api, version)
    assert correlation_id == header.correlation_id and struct == response


def test_header_versions():
    assert request_header_version(ApiKeys.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKeys.CONTROLLED_SHUTDOWN, 1) == 1
    assert request_header_version(ApiKeys.API_VERSIONS, 2) == 1
    assert request_header_version(ApiKeys.API_VERSIONS, 3) == 2
    assert request_header_version(ApiKeys.METADATA, 12) == 2
    assert request_header_version(ApiKeys.SASL_HANDSHAKE, 7) == 1
    assert request_header_version(9999, 0) == 1


def flexible_api_versions(correlation_id=9, client_id="rdkafka", tags=None, version=3):
    out = bytearray()
    RequestHeader(ApiKeys.API_VERSIONS, version, correlation_id, client_id, tags or {}).write_to(out)
    out += COMPACT_STRING.write("librdkafka") + COMPACT_STRING.write("2.16.0") + TAGGED_FIELDS.write({})
    return bytes(out)


def test_flexible_header_peek_and_error_35_answer():
    frame = flexible_api_versions(tags={0: b"\x01\x02", 7: b""}, version=4)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    header = info.value.header
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 4, 9, "rdkafka")
    assert header.tagged_fields == {0: b"\x01\x02", 7: b""} and header.header_version == 2
    _, end = RequestHeader.read_from(frame)
    assert COMPACT_STRING.read_from(frame, end)[0] == "librdkafka"
    answer = encode_response(header.correlation_id, ApiKeys.API_VERSIONS, 0,
                             {"error_code": Errors.UNSUPPORTED_VERSION.code, "api_keys": ApiKeys.version_ranges()})
    # the exact v0 layout kafka-python's fallback expects: error int16, [key, min, max int16], no throttle time
    assert answer[4:8] == INT32.write(9) and answer[8:10] == b"\x00\x23"
    assert INT32.read(answer[10:14]) == len(ApiKeys) and len(answer) == 14 + 6 * len(ApiKeys)
    correlation_id, body = decode_response(answer[4:], ApiKeys.API_VERSIONS, 0)
    assert correlation_id == 9 and {"api_key": 18, "min_version": 0, "max_version": 2} in body.api_keys


def test_unknown_api_key_and_malformed_headers():
    frame = INT32.write(0x00630000) + INT32.write(1) + b"\xff\xff"
    with pytest.raises(UnsupportedVersionError, match="unknown api key 99") as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 1
    with pytest.raises(ProtocolError) as info:
        decode_request(b"\x00\x03")
    assert info.value.field == "header.api_version" and info.value.offset == 2
    with pytest.raises(ProtocolError) as info:
        decode_request(flexible_api_versions()[:10])
    assert info.value.field == "header.client_id"
    with pytest.raises(ProtocolError) as info:   # metadata v1 with an array count past the end
        decode_request(INT32.write(0x00030001) + INT32.write(5) + b"\xff\xff" + INT32.write(100))
    assert info.value.field == "topics" and info.value.offset == 10
    with pytest.raises(ProtocolError, match="trailing"):
        decode_request(encode_request(RequestHeader(ApiKeys.API_VERSIONS, 0, 1, "c"), {})[4:] + b"\x00")
    with pytest.raises(ProtocolError, match="header"):
        decode_response(b"\x00", ApiKeys.METADATA, 0)
