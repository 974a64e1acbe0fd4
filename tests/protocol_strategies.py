"""Hypothesis strategies derived from our protocol types: a schema describes the values it accepts."""
from __future__ import annotations

from hypothesis import strategies as st

from kafka_edu.common.protocol import types as T


def _ints(bits: int, signed: bool = True):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else st.integers(0, 2**bits - 1)


_text = st.text(max_size=12)
_blob = st.binary(max_size=24)

PRIMITIVES = {
    T.INT8: _ints(8), T.INT16: _ints(16), T.INT32: _ints(32), T.INT64: _ints(64), T.UINT32: _ints(32, False),
    T.BOOLEAN: st.booleans(),
    T.UNSIGNED_VARINT: _ints(32, False), T.VARINT: _ints(32), T.VARLONG: _ints(64),
    T.STRING: _text, T.NULLABLE_STRING: st.none() | _text,
    T.COMPACT_STRING: _text, T.COMPACT_NULLABLE_STRING: st.none() | _text,
    T.BYTES: _blob, T.NULLABLE_BYTES: st.none() | _blob, T.RECORDS: st.none() | st.binary(max_size=64),
    T.TAGGED_FIELDS: st.dictionaries(st.integers(0, 300), st.binary(max_size=6), max_size=3),
}


def strategy(kind: T.Type, primitives: dict = PRIMITIVES):
    """Values of `kind`: plain dicts for schemas, lists (or None where nullable) for arrays; the
    values of each primitive type drawn from `primitives`."""
    if isinstance(kind, T.Schema):
        return st.fixed_dictionaries({f.name: strategy(f.type, primitives) for f in kind.fields})
    if isinstance(kind, T.Array):
        items = st.lists(strategy(kind.type, primitives), max_size=3)
        return st.none() | items if kind.nullable else items
    return primitives[kind]


def without_errors(value):
    """A drawn body with every error code 0: an answer that claims success, whatever else it says."""
    if isinstance(value, dict):
        return {k: 0 if k == "error_code" else without_errors(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_errors(v) for v in value]
    return value
