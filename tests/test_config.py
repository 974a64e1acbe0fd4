import logging

import pytest

from kafka_edu.common.config import (ConfigDef, ConfigException, Range, Type, ValidString,
                                     load_properties, parse_properties)


def make_def():
    return (ConfigDef()
            .define("broker.id", Type.INT, doc="required")
            .define("num.io.threads", Type.INT, 8, Range.at_least(1))
            .define("log.retention.bytes", Type.LONG, -1)
            .define("log.cleaner.min.cleanable.ratio", Type.DOUBLE, 0.5, Range.between(0, 1))
            .define("log.cleanup.policy", Type.LIST, "delete", ValidString.in_("delete", "compact"))
            .define("auto.create.topics.enable", Type.BOOLEAN, True)
            .define("zookeeper.connect", Type.STRING, None))


def test_defaults_and_types():
    values = make_def().parse({"broker.id": "3", "log.cleanup.policy": "compact,delete"})
    assert values == {"broker.id": 3, "num.io.threads": 8, "log.retention.bytes": -1,
                      "log.cleaner.min.cleanable.ratio": 0.5, "log.cleanup.policy": ["compact", "delete"],
                      "auto.create.topics.enable": True, "zookeeper.connect": None}


@pytest.mark.parametrize("key,value,reason", [
    ("num.io.threads", "0", "at least 1"),
    ("num.io.threads", "2147483648", "integer in"),
    ("log.retention.bytes", "1e3", "LONG"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "no more than 1"),
    ("log.cleanup.policy", "delete,shred", "one of"),
    ("auto.create.topics.enable", "yes", "true or false"),
])
def test_bad_values_name_the_key(key, value, reason):
    with pytest.raises(ConfigException) as info:
        make_def().parse({"broker.id": "0", key: value})
    assert info.value.name == key
    assert key in str(info.value) and reason in str(info.value)


def test_missing_required_key():
    with pytest.raises(ConfigException, match="broker.id: Missing required"):
        make_def().parse({})


def test_unknown_keys_warn_not_fail(caplog):
    with caplog.at_level(logging.WARNING):
        make_def().parse({"broker.id": "1", "no.such.key": "1"})
    assert "no.such.key was supplied but isn't a known config" in caplog.text


def test_duplicate_definition_rejected():
    with pytest.raises(ValueError):
        ConfigDef().define("a", Type.INT, 1).define("a", Type.INT, 2)


def test_properties_grammar(tmp_path):
    text = ("# comment\n! also comment\n\n  a=1\nb : two words \nc\tthree\n"
            "d=x,\\\n   y\ne=\\u0041\\t\\=\nf\n")
    props = parse_properties(text)
    assert props == {"a": "1", "b": "two words ", "c": "three", "d": "x,y", "e": "A\t=", "f": ""}
    path = tmp_path / "server.properties"
    path.write_text(text)
    assert load_properties(path) == props
