"""ConfigDef parsing follows Kafka's rules and validation reports every key with its errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect.api import ConfigDef, ConfigException, ConfigType, Importance
from odradek.connect.config_def import (
    HIDDEN,
    in_range,
    non_empty_string,
    one_of,
    parse_value,
    regex,
    to_string,
)


def _def() -> ConfigDef:
    return (
        ConfigDef()
        .define("name", ConfigType.STRING, importance=Importance.HIGH, validator=non_empty_string)
        .define("tasks.max", ConfigType.INT, 1, validator=in_range(1))
        .define("flag", ConfigType.BOOLEAN, "false")
        .define("topics", ConfigType.LIST, "")
        .define("secret", ConfigType.PASSWORD, None)
        .define("mode", ConfigType.STRING, "bulk", validator=one_of("bulk", "incrementing"))
        .define("ratio", ConfigType.DOUBLE, 0.5)
        .define("pattern", ConfigType.STRING, None, validator=regex)
    )


def test_parse_applies_kafkas_rules_and_defaults():
    parsed = _def().parse(
        {"name": " c ", "flag": "TRUE", "topics": " a , b,c ", "tasks.max": " 3", "ratio": "2"}
    )
    assert parsed["name"] == "c"
    assert parsed["flag"] is True
    assert parsed["topics"] == ["a", "b", "c"]
    assert parsed["tasks.max"] == 3
    assert parsed["ratio"] == 2.0
    assert parsed["mode"] == "bulk"
    assert parsed["secret"] is None


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        ({}, "name", "Missing required configuration"),
        ({"name": "c", "flag": "yes"}, "flag", "either true or false"),
        ({"name": "c", "tasks.max": "x"}, "tasks.max", "Not a number"),
        ({"name": "c", "tasks.max": "0"}, "tasks.max", "at least 1"),
        ({"name": "c", "tasks.max": str(2**31)}, "tasks.max", "32-bit"),
        ({"name": "c", "mode": "other"}, "mode", "must be one of"),
        ({"name": "  "}, "name", "non-empty"),
        ({"name": "c", "pattern": "("}, "pattern", "regular expression"),
    ],
)
def test_bad_values_name_the_key(props, key, words):
    with pytest.raises(ConfigException) as info:
        _def().parse(props)
    assert info.value.name == key
    assert words in str(info.value)


def test_validate_reports_every_key_and_hides_passwords():
    values = {v.name: v for v in _def().validate({"flag": "maybe", "secret": "s3cret"})}
    assert set(values) == set(_def().keys)
    assert values["name"].errors and "Missing" in values["name"].errors[0]
    assert values["flag"].errors
    assert values["secret"].value == HIDDEN
    assert not values["tasks.max"].errors and values["tasks.max"].value == 1


def test_a_password_never_appears_in_an_error():
    d = ConfigDef().define("pw", ConfigType.PASSWORD, None, validator=one_of("a"))
    with pytest.raises(ConfigException) as info:
        d.parse({"pw": "hunter2"})
    assert "hunter2" not in str(info.value) and HIDDEN in str(info.value)


def test_recommenders_callable_and_object():
    class Rec:
        def valid_values(self, name, parsed):
            return ["x", "y"]

        def visible(self, name, parsed):
            return parsed.get("flag") is True

    d = (
        ConfigDef()
        .define("flag", ConfigType.BOOLEAN, False)
        .define("a", ConfigType.STRING, None, recommender=lambda parsed: ["p", "q"])
        .define("b", ConfigType.STRING, None, recommender=Rec())
    )
    values = {v.name: v for v in d.validate({})}
    assert values["a"].recommended_values == ("p", "q")
    assert values["b"].recommended_values == ("x", "y") and values["b"].visible is False


def test_to_string_matches_convert_to_string():
    assert to_string(["a", "b"], ConfigType.LIST) == "a,b"
    assert to_string(True, ConfigType.BOOLEAN) == "true"
    assert to_string("p", ConfigType.PASSWORD) == HIDDEN
    assert to_string(None, ConfigType.STRING) is None


def test_case_insensitive_one_of():
    v = one_of("none", "all", case_insensitive=True)
    v("errors.tolerance", "ALL")
    with pytest.raises(ConfigException):
        v("errors.tolerance", "some")


@settings(max_examples=40, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_long_round_trip(n):
    assert parse_value("k", ConfigType.LONG, f" {n} ") == n


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="abc._-", min_size=1), min_size=1, max_size=5))
def test_list_round_trip(items):
    assert parse_value("k", ConfigType.LIST, " , ".join(items)) == items
