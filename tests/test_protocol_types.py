"""The primitive types, Schema/Field/Struct and error codes of kafka_edu.common.protocol."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_strategies import PRIMITIVES, strategy

from kafka_edu.common.protocol import types as T
from kafka_edu.common.protocol.errors import Errors, KafkaError
from kafka_edu.common.protocol.types import (
    BYTES, INT8, INT16, INT32, NULLABLE_STRING, RECORDS, STRING, UNSIGNED_VARINT, VARINT, VARLONG, Array, Field,
    ProtocolError, Schema, Struct,
)

FAST = settings(max_examples=30, deadline=None, database=None)
ALL_PRIMITIVES = sorted(PRIMITIVES, key=lambda t: t.name)


@pytest.mark.parametrize("kind", ALL_PRIMITIVES, ids=lambda t: t.name)
@FAST
@given(data=st.data())
def test_primitive_round_trip_and_truncation(kind, data):
    value = data.draw(PRIMITIVES[kind])
    wire = kind.write(value)
    assert kind.read(wire) == value
    assert len(wire) >= kind.min_size
    for cut in range(len(wire)):
        with pytest.raises(ProtocolError):
            kind.read(wire[:cut])
    with pytest.raises(ProtocolError, match="trailing"):
        kind.read(wire + b"\x00")


@pytest.mark.parametrize("kind", ALL_PRIMITIVES, ids=lambda t: t.name)
@FAST
@given(junk=st.binary(max_size=40))
def test_primitive_garbage_raises_only_protocol_error(kind, junk):
    try:
        kind.read(junk)
    except ProtocolError as e:
        assert e.offset is not None and 0 <= e.offset <= len(junk)


@pytest.mark.parametrize("value, hex_", [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"),
                                        (64, "8001"), (300, "d804"), (2**31 - 1, "feffffff0f"),
                                        (-2**31, "ffffffff0f")])
def test_zigzag_varint_vectors(value, hex_):
    assert VARINT.write(value).hex() == hex_
    assert VARINT.read(bytes.fromhex(hex_)) == value


def test_varint_limits():
    assert UNSIGNED_VARINT.write(300).hex() == "ac02"
    assert VARLONG.read(VARLONG.write(-2**63)) == -2**63
    assert len(VARLONG.write(-2**63)) == 10
    with pytest.raises(ProtocolError, match="longer than 5"):
        VARINT.read(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(ProtocolError, match="exceeds 32 bits"):
        UNSIGNED_VARINT.read(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(ProtocolError, match="runs past the end"):
        VARLONG.read(b"\xff")
    with pytest.raises(ProtocolError):
        VARINT.write(2**31)


@pytest.mark.parametrize("kind, bad", [(INT8, 128), (INT16, "1"), (INT32, True), (STRING, None), (STRING, b"x"),
                                       (BYTES, "text"), (Array(INT32), None), (Array(INT32), 5),
                                       (UNSIGNED_VARINT, -1), (T.BOOLEAN, 2), (STRING, "x" * 40_000)])
def test_write_rejects_values_that_do_not_fit(kind, bad):
    with pytest.raises(ProtocolError):
        kind.write(bad)


def test_lengths_nulls_and_utf8():
    assert NULLABLE_STRING.read(b"\xff\xff") is None
    assert RECORDS.read(b"\xff\xff\xff\xff") is None
    assert BYTES.write(memoryview(b"abc")) == b"\x00\x00\x00\x03abc"

    class Converts:
        def __bytes__(self):
            return b"abc"
    assert RECORDS.write(Converts()) == b"\x00\x00\x00\x03abc"
    with pytest.raises(ProtocolError, match="invalid length -1"):
        STRING.read(b"\xff\xff")
    with pytest.raises(ProtocolError, match="invalid length -2"):
        NULLABLE_STRING.read(b"\xff\xfe")
    with pytest.raises(ProtocolError, match="runs past the end") as info:
        BYTES.read(b"\x7f\xff\xff\xff")
    assert info.value.offset == 0
    with pytest.raises(ProtocolError, match="UTF-8") as info:
        STRING.read(b"\x00\x03ab\xff")
    assert info.value.offset == 4


def test_array_counts_are_checked_before_reading():
    ints = Array(INT32)
    assert ints.read(ints.write([1, -2, 3])) == [1, -2, 3]
    assert Array(STRING, nullable=True).read(b"\xff\xff\xff\xff") is None
    with pytest.raises(ProtocolError, match="invalid count -1"):
        ints.read(b"\xff\xff\xff\xff")
    with pytest.raises(ProtocolError, match="cannot fit"):
        ints.read(b"\x7f\xff\xff\xff" + bytes(100))
    with pytest.raises(ProtocolError, match="invalid count"):
        ints.read(b"\x80\x00\x00\x00")


PARTITION = Schema(Field("partition", INT32), Field("record_set", RECORDS), name="Partition")
TOPIC = Schema(Field("topic", STRING), Field("partitions", Array(PARTITION)), name="Topic")
REQUEST = Schema(Field("acks", INT16, default=1), Field("timeout", INT32), Field("topics", Array(TOPIC)),
                 name="Request")
SAMPLE = {"acks": -1, "timeout": 100, "topics": [
    {"topic": "a", "partitions": [{"partition": 0, "record_set": b"xy"}, {"partition": 1, "record_set": None},
                                  {"partition": 2, "record_set": b"zzz"}]}]}


def test_error_names_the_field_path_and_offset():
    wire = REQUEST.write(SAMPLE)
    with pytest.raises(ProtocolError) as info:
        REQUEST.read(wire[:-1])
    assert info.value.field == "topics[0].partitions[2].record_set"
    assert info.value.offset == len(wire) - 3 - 4
    assert "topics[0].partitions[2].record_set" in str(info.value) and str(info.value.offset) in str(info.value)
    with pytest.raises(ProtocolError) as info:
        REQUEST.write({**SAMPLE, "topics": [{"topic": "a", "partitions": [{"partition": "0"}]}]})
    assert info.value.field == "topics[0].partitions[0].partition"


def test_struct_access_equality_and_defaults():
    s = REQUEST.read(REQUEST.write(SAMPLE))
    assert isinstance(s, Struct) and s.schema is REQUEST
    assert s.acks == s["acks"] == -1 and s.topics[0].partitions[2].record_set == b"zzz"
    assert s == SAMPLE and s.to_dict() == SAMPLE and s.to_dict() is not SAMPLE
    assert s == REQUEST(SAMPLE) and s != REQUEST(SAMPLE, timeout=5)
    s.timeout = 7
    assert s.timeout == 7
    with pytest.raises(AttributeError):
        s.timeuot = 7
    with pytest.raises(AttributeError):
        _ = s.nope
    built = REQUEST(timeout=3)
    assert built.to_dict() == {"acks": 1, "timeout": 3, "topics": []}
    assert REQUEST.write({"timeout": 3, "unrelated": "ignored"}) == REQUEST.write(built)
    with pytest.raises(ProtocolError, match="no field"):
        REQUEST(timeuot=3)
    nested = REQUEST(topics=[{"topic": "t"}])
    assert isinstance(nested.topics[0], Struct) and nested.topics[0].partitions == []
    assert "Request(acks=1" in repr(nested)
    clone = copy.deepcopy(s)
    clone.topics[0].topic = "b"
    assert clone != s and s.topics[0].topic == "a" and copy.copy(s) == s


def test_read_from_reports_end_and_read_rejects_trailing_bytes():
    wire = REQUEST.write(SAMPLE)
    s, end = REQUEST.read_from(wire + b"tail", 0)
    assert end == len(wire) and s == SAMPLE
    assert REQUEST.read(b"\x00" * 3 + wire, 3) == SAMPLE
    with pytest.raises(ProtocolError, match="4 trailing bytes"):
        REQUEST.read(wire + b"tail")


def test_schema_rejects_duplicate_names():
    with pytest.raises(ValueError):
        Schema(Field("a", INT8), Field("a", INT16))


@FAST
@given(data=st.data())
def test_nested_schema_round_trip(data):
    value = data.draw(strategy(REQUEST))
    assert REQUEST.read(REQUEST.write(value)).to_dict() == value


def test_tagged_fields():
    tags = T.TAGGED_FIELDS
    assert tags.read(tags.write({3: b"a", 1: b""})) == {1: b"", 3: b"a"}
    with pytest.raises(ProtocolError, match="not above"):
        tags.read(b"\x02\x01\x00\x01\x00")
    with pytest.raises(ProtocolError, match="cannot fit"):
        tags.read(b"\x05\x00")


def _counted(op):
    def compare(self, other):
        _CountedTag.comparisons += 1
        return op(int(self), int(other))
    return compare


class _CountedTag(int):
    """A tag that counts the comparisons made on it."""

    comparisons = 0
    __lt__, __le__, __gt__, __ge__ = map(_counted, (int.__lt__, int.__le__, int.__gt__, int.__ge__))


def test_tagged_fields_checks_order_in_linear_time(monkeypatch):
    """Each tag is compared with the previous one only: checking against every tag read so far made a
    ~100 KB header of 30,000 tags cost seconds of broker CPU before the request was even routed."""
    class CountingVarint:
        def read_from(self, buf, pos):
            value, end = UNSIGNED_VARINT.read_from(buf, pos)
            return _CountedTag(value), end
    n = 2000
    raw = T.TAGGED_FIELDS.write({t: b"" for t in range(n)})
    monkeypatch.setattr(T, "UNSIGNED_VARINT", CountingVarint())
    monkeypatch.setattr(_CountedTag, "comparisons", 0)
    assert list(T.TAGGED_FIELDS.read(raw)) == list(range(n))
    assert _CountedTag.comparisons <= 3 * n
    with pytest.raises(ProtocolError, match="tag 5 is not above"):
        T.TAGGED_FIELDS.read(b"\x03\x01\x00\x07\x00\x05\x00")     # out of order after an in-order pair


def test_error_codes():
    codes = [e.code for e in Errors]
    assert set(range(-1, 129)) == set(codes) and codes == sorted(codes)
    assert Errors.for_code(6) is Errors.NOT_LEADER_OR_FOLLOWER and Errors.NOT_LEADER_OR_FOLLOWER.retriable
    assert Errors.for_code(35) is Errors.UNSUPPORTED_VERSION and not Errors.UNSUPPORTED_VERSION.retriable
    assert Errors.for_code(12345) is Errors.UNKNOWN_SERVER_ERROR
    retriable = {e.name for e in Errors if e.retriable}
    assert {"CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT",
            "NETWORK_EXCEPTION", "NOT_COORDINATOR", "NOT_ENOUGH_REPLICAS", "COORDINATOR_LOAD_IN_PROGRESS"} <= retriable
    assert not {"MESSAGE_TOO_LARGE", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "OFFSET_OUT_OF_RANGE"} & retriable
    assert all(e.description for e in Errors)
    err = Errors.TOPIC_AUTHORIZATION_FAILED.exception("no access to t")
    assert isinstance(err, KafkaError) and err.error is Errors.TOPIC_AUTHORIZATION_FAILED and not err.retriable
    assert "TOPIC_AUTHORIZATION_FAILED (29)" in str(err)
