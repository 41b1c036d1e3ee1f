"""The converters read and write what Kafka's do: JsonConverter's envelope (Kafka's own examples),
schemaless JSON, strings, bytes and header strings; bad input raises an error that says what."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.connect.api import ConfigException
from odradek.connect.converters import (
    ByteArrayConverter,
    ConverterError,
    JsonConverter,
    SimpleHeaderConverter,
    StringConverter,
)
from odradek.connect.data import (
    BOOLEAN,
    BYTES,
    DATE_SCHEMA,
    FLOAT64,
    INT32,
    INT64,
    OPTIONAL_STRING,
    STRING,
    TIME_SCHEMA,
    TIMESTAMP_SCHEMA,
    DataError,
    Schema,
    Type,
    decimal_schema,
    optional,
    struct,
)


def _json(schemas: bool = True, **props: str) -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": str(schemas).lower(), **props}, is_key=False)
    return c


def test_writes_kafkas_envelope_byte_for_byte():
    schema = struct(("id", INT32), ("name", OPTIONAL_STRING), name="r")
    data = _json().from_connect("t", schema, {"id": 1, "name": None})
    assert data == (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
        b'{"type":"string","optional":true,"field":"name"}],"optional":false,"name":"r"},'
        b'"payload":{"id":1,"name":null}}'
    )


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ('{"schema": {"type": "boolean"}, "payload": true}', BOOLEAN, True),
        ('{"schema": {"type": "int64"}, "payload": 12}', INT64, 12),
        ('{"schema": {"type": "double"}, "payload": 12.5}', FLOAT64, 12.5),
        ('{"schema": {"type": "bytes"}, "payload": "dGVzdC1zdHJpbmc="}', BYTES, b"test-string"),
        (
            '{"schema": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", '
            '"version": 1, "parameters": {"scale": "2"}}, "payload": "AJw="}',
            decimal_schema(2),
            decimal.Decimal("1.56"),
        ),
        (
            '{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Date", '
            '"version": 1}, "payload": 10000}',
            DATE_SCHEMA,
            datetime.date(1970, 1, 1) + datetime.timedelta(days=10000),
        ),
        (
            '{"schema": {"type": "int32", "name": "org.apache.kafka.connect.data.Time", '
            '"version": 1}, "payload": 14400000}',
            TIME_SCHEMA,
            datetime.time(4, 0),
        ),
        (
            '{"schema": {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", '
            '"version": 1}, "payload": 4000000000}',
            TIMESTAMP_SCHEMA,
            datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=4e6),
        ),
        (
            '{"schema": {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"}},'
            ' "payload": [[1, 12], [2, 15]]}',
            Schema(Type.MAP, key_schema=INT32, value_schema=INT32),
            {1: 12, 2: 15},
        ),
        (
            '{"schema": {"type": "struct", "fields": [{"type": "boolean", "optional": false, '
            '"field": "field1"}], "optional": false}, "payload": {"field1": true}}',
            struct(("field1", BOOLEAN)),
            {"field1": True},
        ),
    ],
)
def test_reads_kafkas_documented_examples_and_writes_them_back(text, schema, value):
    c = _json()
    result = c.to_connect("t", text.encode())
    assert result.schema == schema
    assert result.value == value
    again = c.to_connect("t", c.from_connect("t", result.schema, result.value))
    assert again == result
    # What we write is what Kafka wrote (modulo whitespace and the optional flag it adds).
    written = json.loads(c.from_connect("t", schema, value))
    assert written["payload"] == json.loads(text)["payload"]


def test_numeric_decimals_and_defaults():
    c = _json(**{"decimal.format": "NUMERIC"})
    schema = struct(("price", decimal_schema(2)))
    data = c.from_connect("t", schema, {"price": decimal.Decimal("12.30")})
    assert data.endswith(b'"payload":{"price":12.30}}')
    assert c.to_connect("t", data).value == {"price": decimal.Decimal("12.30")}
    with_default = Schema(Type.INT32, default=7)
    assert json.loads(c.from_connect("t", with_default, None))["payload"] == 7


def test_schemaless_round_trip_and_tombstones():
    c = _json(schemas=False)
    value = {"a": 1, "b": [1.5, "x", None], "c": {"d": True}}
    assert c.from_connect("t", None, value) == b'{"a":1,"b":[1.5,"x",null],"c":{"d":true}}'
    assert c.to_connect("t", c.from_connect("t", None, value)).value == value
    assert c.from_connect("t", None, None) is None
    assert c.to_connect("t", None).value is None
    assert _json().to_connect("t", None).value is None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"a": 1}', "schemas.enable=false"),
        (b"not json", "serialization error"),
        (b'{"schema": {"type": "int32"}, "payload": "x"}', "expected an int32"),
        (b'{"schema": {"type": "int8"}, "payload": 300}', "out of range"),
        (b'{"schema": {"type": "nope"}, "payload": 1}', "Unknown schema type"),
        (
            b'{"schema": {"type": "struct", "fields": [{"type": "int32", "field": "id"}]},'
            b' "payload": {"id": null}}',
            "id: Invalid null value",
        ),
    ],
)
def test_bad_json_names_what_is_wrong(data, words):
    with pytest.raises(ConverterError) as info:
        _json().to_connect("t", data)
    assert words in str(info.value)
    assert isinstance(info.value, DataError)


def test_bad_connect_data_names_the_field():
    schema = struct(("id", INT32), ("name", STRING))
    with pytest.raises(ConverterError, match="name: Invalid type for STRING"):
        _json().from_connect("t", schema, {"id": 1, "name": 5})
    with pytest.raises(ConverterError, match="does not have a corresponding schema type"):
        _json(schemas=False).from_connect("t", None, {"a": object()})


def test_bad_converter_config_names_the_key():
    with pytest.raises(ConfigException) as info:
        JsonConverter().configure({"schemas.enable": "maybe"}, is_key=False)
    assert info.value.name == "schemas.enable"
    with pytest.raises(ConfigException):
        JsonConverter().configure({"decimal.format": "HEX"}, is_key=False)


def test_string_and_bytes_converters():
    s = StringConverter()
    s.configure({}, is_key=True)
    assert s.from_connect("t", STRING, "héllo") == "héllo".encode()
    assert s.from_connect("t", None, True) == b"true"
    assert s.to_connect("t", b"x").value == "x"
    assert s.to_connect("t", b"x").schema == OPTIONAL_STRING
    assert s.from_connect("t", None, None) is None
    with pytest.raises(ConverterError):
        s.to_connect("t", b"\xff\xfe")
    b = ByteArrayConverter()
    b.configure({}, is_key=False)
    assert b.from_connect("t", BYTES, b"\x00\x01") == b"\x00\x01"
    assert b.to_connect("t", b"\x00").value == b"\x00"
    with pytest.raises(ConverterError, match="Invalid schema type"):
        b.from_connect("t", STRING, "x")


def test_simple_header_converter_infers_types():
    h = SimpleHeaderConverter()
    h.configure({})
    for value in (True, 42, 2**40, 1.5, "text", [1, 2], {"a": "b"}):
        back = h.to_connect_header("t", "k", h.from_connect_header("t", "k", None, value))
        assert back.value == value
    assert h.from_connect_header("t", "k", None, None) is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(_json_values)
def test_schemaless_round_trips(value):
    c = _json(schemas=False)
    data = c.from_connect("t", None, value)
    if value is None:
        assert data is None
    else:
        assert c.to_connect("t", data).value == value


@settings(max_examples=40, deadline=None)
@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-1e12, max_value=1e12)
)
def test_decimals_round_trip_in_both_formats(d):
    schema = decimal_schema(3)
    for fmt in ("BASE64", "NUMERIC"):
        c = _json(**{"decimal.format": fmt})
        assert c.to_connect("t", c.from_connect("t", schema, d)).value == d


@settings(max_examples=40, deadline=None)
@given(st.datetimes(timezones=st.just(datetime.UTC)))
def test_timestamps_round_trip_to_the_millisecond(ts):
    c = _json()
    back = c.to_connect("t", c.from_connect("t", optional(TIMESTAMP_SCHEMA), ts)).value
    assert back == ts.replace(microsecond=ts.microsecond // 1000 * 1000)


_PRIMITIVES = {
    Type.INT8: st.integers(-(2**7), 2**7 - 1),
    Type.INT16: st.integers(-(2**15), 2**15 - 1),
    Type.INT32: st.integers(-(2**31), 2**31 - 1),
    Type.INT64: st.integers(-(2**63), 2**63 - 1),
    Type.FLOAT64: st.floats(allow_nan=False, allow_infinity=False),
    Type.BOOLEAN: st.booleans(),
    Type.STRING: st.text(max_size=8),
    Type.BYTES: st.binary(max_size=8),
}


def _schemas(depth: int = 2):
    primitive = st.builds(
        lambda t, opt: Schema(t, optional=opt), st.sampled_from(sorted(_PRIMITIVES)), st.booleans()
    )
    if depth == 0:
        return primitive
    inner = _schemas(depth - 1)
    names = st.text(alphabet="abcdef", min_size=1, max_size=4)
    structs = st.lists(st.tuples(names, inner), min_size=1, max_size=3, unique_by=lambda f: f[0])
    return st.one_of(
        primitive,
        st.builds(lambda s: Schema(Type.ARRAY, value_schema=s), inner),
        st.builds(lambda k, v: Schema(Type.MAP, key_schema=k, value_schema=v), primitive, inner),
        st.builds(lambda fs, opt: struct(*fs, optional=opt), structs, st.booleans()),
    )


def _values(schema: Schema):
    base = _PRIMITIVES.get(schema.type)
    if base is None and schema.type is Type.ARRAY:
        base = st.lists(_values(schema.value_schema), max_size=3)
    elif base is None and schema.type is Type.MAP:
        keys = _PRIMITIVES[schema.key_schema.type]
        base = st.dictionaries(keys, _values(schema.value_schema), max_size=3)
    elif base is None:
        base = st.fixed_dictionaries({f.name: _values(f.schema) for f in schema.fields})
    return st.one_of(st.none(), base) if schema.optional else base


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_schema_and_value_round_trip_through_the_envelope(data):
    schema = data.draw(_schemas())
    value = data.draw(_values(schema))
    c = _json()
    back = c.to_connect("t", c.from_connect("t", schema, value))
    assert back.schema == schema
    assert back.value == value


def test_number_converters_write_what_kafkas_serializers_do():
    from odradek.connect.converters.numbers import DoubleConverter, IntegerConverter, LongConverter

    i = IntegerConverter()
    i.configure({}, is_key=True)
    assert i.from_connect("t", INT32, 258) == b"\x00\x00\x01\x02"
    assert i.to_connect("t", b"\xff\xff\xff\xfe").value == -2
    assert LongConverter().to_connect(
        "t", LongConverter().from_connect("t", None, 2**40)
    ).value == (2**40)
    assert DoubleConverter().to_connect(
        "t", DoubleConverter().from_connect("t", None, 1.5)
    ).value == (1.5)
    with pytest.raises(ConverterError, match="is not 4"):
        i.to_connect("t", b"\x00")
    with pytest.raises(ConverterError):
        i.from_connect("t", None, 2**40)
    with pytest.raises(ConverterError, match="Invalid schema type"):
        i.from_connect("t", STRING, "x")
