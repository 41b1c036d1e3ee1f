"""``org.apache.kafka.connect.json.JsonConverter``: Connect data as JSON, as Kafka writes it.

With ``schemas.enable=true`` (the default) every record is an envelope
``{"schema": <schema>, "payload": <value>}``; the schema's JSON is Kafka's: ``type`` first (and
``items`` / ``keys`` + ``values`` / ``fields``, each field's schema with ``"field": <name>``),
then ``optional``, ``name``, ``version``, ``doc``, ``parameters``, ``default`` when set. Compact
(no spaces), UTF-8, as Jackson writes it. With ``schemas.enable=false`` the payload is written
alone and read back schemaless (integers as int64, decimals as float64, objects as maps).

Payload encodings: bytes as base64; maps with string keys as objects, others as arrays of
``[key, value]`` pairs; logical types as their underlying type (Timestamp: ms since the epoch,
Date: days since the epoch, Time: ms since midnight, Decimal: the unscaled two's-complement
big-endian bytes in base64, or a JSON number with ``decimal.format=NUMERIC``).

A null value with no schema is a tombstone (``None`` bytes), and ``None`` bytes read back as
``SchemaAndValue(None, None)``. Errors raise ``ConverterError`` naming the field path.

Its length: Kafka's converter is one class and so is this one; schema JSON and values are
converted both ways for every Connect type and logical type, and the halves mirror each other.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from odradek.connect.api import ConfigDef, ConfigType, Importance
from odradek.connect.config_def import in_range, one_of
from odradek.connect.converters.base import (
    CONVERTER_TYPE,
    ValueAsHeaderConverter,
    define_converter_type,
)
from odradek.connect.converters.errors import ConverterError
from odradek.connect.data import (
    DATE,
    DECIMAL,
    DECIMAL_SCALE,
    INT_BOUNDS,
    TIME,
    TIMESTAMP,
    Field,
    Schema,
    SchemaAndValue,
    Type,
)

SCHEMAS_ENABLE = "schemas.enable"
SCHEMAS_CACHE_SIZE = "schemas.cache.size"
DECIMAL_FORMAT = "decimal.format"
REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
EPOCH_DATE = datetime.date(1970, 1, 1)
MS_PER_DAY = 86_400_000

ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
    "contain additional fields. If you are trying to deserialize plain JSON data, set "
    "schemas.enable=false in your converter configuration."
)


def config_def() -> ConfigDef:
    return define_converter_type(
        ConfigDef()
        .define(
            SCHEMAS_ENABLE,
            ConfigType.BOOLEAN,
            True,
            importance=Importance.HIGH,
            group="Schemas",
            display_name="Enable Schemas",
            documentation="Include schemas within each of the serialized values and keys.",
        )
        .define(
            SCHEMAS_CACHE_SIZE,
            ConfigType.INT,
            1000,
            importance=Importance.HIGH,
            group="Schemas",
            display_name="Schema Cache Size",
            validator=in_range(0),
            documentation="The maximum number of schemas that can be cached in this converter.",
        )
        .define(
            DECIMAL_FORMAT,
            ConfigType.STRING,
            "BASE64",
            importance=Importance.LOW,
            group="Schemas",
            display_name="Decimal Format",
            validator=one_of("BASE64", "NUMERIC", case_insensitive=True),
            documentation="How DECIMAL logical values are written: BASE64 (the unscaled bytes) "
            "or NUMERIC (a JSON number).",
        )
        .define(
            REPLACE_NULL_WITH_DEFAULT,
            ConfigType.BOOLEAN,
            True,
            importance=Importance.LOW,
            group="Schemas",
            display_name="Replace null with default",
            documentation="Whether a null field with a default value is written (and read) as "
            "the default.",
        )
    )


# ------------------------------------------------------------------ schemas <-> JSON


def schema_to_json(schema: Schema | None, numeric_decimals: bool = False) -> dict | None:
    """Kafka's ``asJsonSchema``, in Kafka's key order."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": schema.type.value}
    if schema.type is Type.ARRAY:
        out["items"] = schema_to_json(schema.value_schema, numeric_decimals)
    elif schema.type is Type.MAP:
        out["keys"] = schema_to_json(schema.key_schema, numeric_decimals)
        out["values"] = schema_to_json(schema.value_schema, numeric_decimals)
    elif schema.type is Type.STRUCT:
        fields = []
        for f in schema.fields:
            field_json = dict(schema_to_json(f.schema, numeric_decimals) or {})
            field_json["field"] = f.name
            fields.append(field_json)
        out["fields"] = fields
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = value_to_json(schema, schema.default, "default", numeric_decimals, True)
    return out


_TYPES = {t.value: t for t in Type}


def schema_from_json(node: Any, path: str = "schema") -> Schema | None:
    """Kafka's ``asConnectSchema``: raises ``ConverterError`` naming what is malformed."""
    if node is None:
        return None
    if not isinstance(node, dict):
        raise ConverterError(f"{path}: a schema must be a JSON object, not {_json_kind(node)}")
    type_name = node.get("type")
    if not isinstance(type_name, str):
        raise ConverterError(f"{path}: Schema must contain 'type' field")
    type_ = _TYPES.get(type_name)
    if type_ is None:
        raise ConverterError(f"{path}: Unknown schema type: {type_name}")
    kw: dict[str, Any] = {}
    if type_ is Type.ARRAY:
        items = node.get("items")
        if items is None:
            raise ConverterError(f"{path}: Array schema did not specify the element type")
        kw["value_schema"] = schema_from_json(items, f"{path}.items")
    elif type_ is Type.MAP:
        if "keys" not in node:
            raise ConverterError(f"{path}: Map schema did not specify the key type")
        if "values" not in node:
            raise ConverterError(f"{path}: Map schema did not specify the value type")
        kw["key_schema"] = schema_from_json(node["keys"], f"{path}.keys")
        kw["value_schema"] = schema_from_json(node["values"], f"{path}.values")
    elif type_ is Type.STRUCT:
        fields_node = node.get("fields")
        if not isinstance(fields_node, list):
            raise ConverterError(f'{path}: Struct schema\'s "fields" argument is not an array.')
        fields = []
        seen = set()
        for i, f in enumerate(fields_node):
            name = f.get("field") if isinstance(f, dict) else None
            if not isinstance(name, str):
                raise ConverterError(
                    f"{path}.fields[{i}]: Struct schema's field name not specified properly"
                )
            if name in seen:
                raise ConverterError(f"{path}.fields[{i}]: duplicate field name {name!r}")
            seen.add(name)
            fields.append(Field(name, i, schema_from_json(f, f"{path}.{name}")))
        kw["fields"] = tuple(fields)
    params = node.get("parameters")
    if params is not None:
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise ConverterError(f"{path}: Schema parameters must have string values.")
        kw["parameters"] = tuple(params.items())
    name = node.get("name")
    version = node.get("version")
    doc = node.get("doc")
    schema = Schema(
        type_,
        optional=node.get("optional") is True,
        name=name if isinstance(name, str) else None,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        doc=doc if isinstance(doc, str) else None,
        **kw,
    )
    if node.get("default") is not None:
        default = value_from_json(schema, node["default"], f"{path}.default", False)
        schema = Schema(**{**schema.__dict__, "default": default})
    return schema


# ------------------------------------------------------------------ values -> JSON


def _timestamp_ms(value: Any, where: str) -> int:
    if not isinstance(value, datetime.datetime):
        raise ConverterError(
            f"{where}: Invalid type for Timestamp, expected datetime but was {type(value).__name__}"
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    delta = value - EPOCH
    return delta.days * MS_PER_DAY + delta.seconds * 1000 + delta.microseconds // 1000


def _date_days(value: Any, where: str) -> int:
    if isinstance(value, datetime.datetime):
        if value.time() != datetime.time(0):
            raise ConverterError(
                f"{where}: Kafka Connect Date type should not have any time fields set to "
                "non-zero values."
            )
        value = value.date()
    if not isinstance(value, datetime.date):
        raise ConverterError(
            f"{where}: Invalid type for Date, expected date but was {type(value).__name__}"
        )
    return (value - EPOCH_DATE).days


def _time_ms(value: Any, where: str) -> int:
    if isinstance(value, datetime.datetime):
        value = value.time()
    if not isinstance(value, datetime.time):
        raise ConverterError(
            f"{where}: Invalid type for Time, expected time but was {type(value).__name__}"
        )
    return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000


def _decimal_scale(schema: Schema, where: str) -> int:
    try:
        return int(schema.params[DECIMAL_SCALE])
    except (KeyError, ValueError):
        raise ConverterError(f"{where}: Decimal schema without a valid scale parameter") from None


def decimal_unscaled(value: Any, scale: int, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        value = decimal.Decimal(value)
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise ConverterError(
            f"{where}: Invalid type for Decimal, expected Decimal but was {value!r}"
        )
    scaled = value.scaleb(scale)
    if scaled != scaled.to_integral_value():
        raise ConverterError(
            f"{where}: Decimal {value} has more digits after the point than the "
            f"schema's scale {scale}"
        )
    return int(scaled)


def decimal_to_bytes(unscaled: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: minimal two's-complement, big-endian."""
    length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_bytes(data: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale)


def value_to_json(
    schema: Schema | None,
    value: Any,
    where: str,
    numeric_decimals: bool,
    replace_null_with_default: bool,
) -> Any:
    """Kafka's ``convertToJson``: a JSON-able tree (``decimal.Decimal`` for NUMERIC decimals)."""
    if value is None:
        if schema is None:
            return None
        if schema.default is not None and replace_null_with_default:
            return value_to_json(schema, schema.default, where, numeric_decimals, True)
        if schema.optional:
            return None
        raise ConverterError(
            f"{where}: Conversion error: null value for field that is required and has no "
            "default value"
        )
    if schema is None:
        return _schemaless_to_json(value, where)
    name = schema.name
    if name is not None:
        if name == TIMESTAMP:
            return _timestamp_ms(value, where)
        if name == DATE:
            return _date_days(value, where)
        if name == TIME:
            return _time_ms(value, where)
        if name == DECIMAL:
            unscaled = decimal_unscaled(value, _decimal_scale(schema, where), where)
            if numeric_decimals:
                return decimal.Decimal(unscaled).scaleb(-_decimal_scale(schema, where))
            return base64.b64encode(decimal_to_bytes(unscaled)).decode("ascii")
    t = schema.type
    if t in INT_BOUNDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConverterError(
                f"{where}: Invalid type for {t.value.upper()}: {type(value).__name__}"
            )
        low, high = INT_BOUNDS[t]
        if not low <= value <= high:
            raise ConverterError(f"{where}: {value} is out of range for {t.value.upper()}")
        return value
    if t in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise ConverterError(
                f"{where}: Invalid type for {t.value.upper()}: {type(value).__name__}"
            )
        return float(value)
    if t is Type.BOOLEAN:
        if not isinstance(value, bool):
            raise ConverterError(f"{where}: Invalid type for BOOLEAN: {type(value).__name__}")
        return value
    if t is Type.STRING:
        if not isinstance(value, str):
            raise ConverterError(f"{where}: Invalid type for STRING: {type(value).__name__}")
        return value
    if t is Type.BYTES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ConverterError(f"{where}: Invalid type for bytes type: {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    if t is Type.ARRAY:
        if not isinstance(value, (list, tuple)):
            raise ConverterError(f"{where}: Invalid type for ARRAY: {type(value).__name__}")
        return [
            value_to_json(
                schema.value_schema, v, f"{where}[{i}]", numeric_decimals, replace_null_with_default
            )
            for i, v in enumerate(value)
        ]
    if t is Type.MAP:
        if not isinstance(value, Mapping):
            raise ConverterError(f"{where}: Invalid type for MAP: {type(value).__name__}")
        key_schema = schema.key_schema
        if key_schema is not None and key_schema.type is Type.STRING:
            return {
                str(value_to_json(key_schema, k, f"{where}.<key>", numeric_decimals, True)): (
                    value_to_json(
                        schema.value_schema,
                        v,
                        f"{where}[{k!r}]",
                        numeric_decimals,
                        replace_null_with_default,
                    )
                )
                for k, v in value.items()
            }
        return [
            [
                value_to_json(key_schema, k, f"{where}.<key>", numeric_decimals, True),
                value_to_json(
                    schema.value_schema,
                    v,
                    f"{where}[{k!r}]",
                    numeric_decimals,
                    replace_null_with_default,
                ),
            ]
            for k, v in value.items()
        ]
    if t is Type.STRUCT:
        if not isinstance(value, Mapping):
            raise ConverterError(f"{where}: Invalid type for STRUCT: {type(value).__name__}")
        unknown = set(value) - {f.name for f in schema.fields}
        if unknown:
            raise ConverterError(f"{where}: fields not in the schema: {sorted(unknown)}")
        return {
            f.name: value_to_json(
                f.schema,
                value.get(f.name),
                f"{where}.{f.name}" if where != "value" else f.name,
                numeric_decimals,
                replace_null_with_default,
            )
            for f in schema.fields
        }
    raise ConverterError(f"{where}: Couldn't convert {value!r} to JSON.")


def _schemaless_to_json(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_schemaless_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v, f"{where}[{k!r}]") for k, v in value.items()}
        return [
            [_schemaless_to_json(k, f"{where}.<key>"), _schemaless_to_json(v, f"{where}[{k!r}]")]
            for k, v in value.items()
        ]
    raise ConverterError(
        f"{where}: Python type {type(value).__name__} does not have a corresponding schema type "
        "(give the record a schema)"
    )


# ------------------------------------------------------------------ JSON -> values


def _json_kind(node: Any) -> str:
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, (int, float, decimal.Decimal)):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    return "OBJECT"


def value_from_json(
    schema: Schema | None, node: Any, where: str, replace_null_with_default: bool = True
) -> Any:
    """Kafka's ``convertToConnect``: ``node`` (parsed with decimals as ``decimal.Decimal``)."""
    if schema is None:
        return _schemaless_from_json(node)
    t = schema.type
    if node is None:
        if schema.default is not None and replace_null_with_default:
            return schema.default
        if schema.optional:
            return None
        raise ConverterError(f"{where}: Invalid null value for required {t.value.upper()} field")
    name = schema.name
    if name == DECIMAL:
        scale = _decimal_scale(schema, where)
        if isinstance(node, (int, decimal.Decimal)) and not isinstance(node, bool):
            return decimal.Decimal(node).quantize(decimal.Decimal(1).scaleb(-scale))
        if isinstance(node, float):
            return decimal.Decimal(repr(node)).quantize(decimal.Decimal(1).scaleb(-scale))
        return decimal_from_bytes(_b64(node, where), scale)
    if t in INT_BOUNDS:
        if isinstance(node, decimal.Decimal) and node == node.to_integral_value():
            node = int(node)
        if isinstance(node, bool) or not isinstance(node, int):
            raise ConverterError(f"{where}: expected an {t.value} but found {_json_kind(node)}")
        low, high = INT_BOUNDS[t]
        if not low <= node <= high:
            raise ConverterError(f"{where}: {node} is out of range for {t.value}")
        if name == TIMESTAMP:
            return EPOCH + datetime.timedelta(milliseconds=node)
        if name == DATE:
            return EPOCH_DATE + datetime.timedelta(days=node)
        if name == TIME:
            if not 0 <= node < MS_PER_DAY:
                raise ConverterError(
                    f"{where}: Time values must use number of milliseconds greater than 0 and "
                    "less than 86400000"
                )
            return (datetime.datetime.min + datetime.timedelta(milliseconds=node)).time()
        return node
    if t in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(node, bool) or not isinstance(node, (int, float, decimal.Decimal)):
            raise ConverterError(f"{where}: expected a {t.value} but found {_json_kind(node)}")
        return float(node)
    if t is Type.BOOLEAN:
        if not isinstance(node, bool):
            raise ConverterError(f"{where}: expected a boolean but found {_json_kind(node)}")
        return node
    if t is Type.STRING:
        if not isinstance(node, str):
            raise ConverterError(f"{where}: expected a string but found {_json_kind(node)}")
        return node
    if t is Type.BYTES:
        return _b64(node, where)
    if t is Type.ARRAY:
        if not isinstance(node, list):
            raise ConverterError(f"{where}: expected an array but found {_json_kind(node)}")
        return [
            value_from_json(schema.value_schema, v, f"{where}[{i}]", replace_null_with_default)
            for i, v in enumerate(node)
        ]
    if t is Type.MAP:
        key_schema = schema.key_schema
        if key_schema is None or key_schema.type is Type.STRING:
            if not isinstance(node, dict):
                raise ConverterError(
                    f"{where}: Maps with string fields should be encoded as JSON objects, but "
                    f"found {_json_kind(node)}"
                )
            return {
                k: value_from_json(
                    schema.value_schema, v, f"{where}[{k!r}]", replace_null_with_default
                )
                for k, v in node.items()
            }
        if not isinstance(node, list):
            raise ConverterError(
                f"{where}: Maps with non-string fields should be encoded as JSON array of "
                f"tuples, but found {_json_kind(node)}"
            )
        result = {}
        for i, entry in enumerate(node):
            if not isinstance(entry, list) or len(entry) != 2:
                raise ConverterError(f"{where}[{i}]: a map entry must be a [key, value] array")
            key = value_from_json(key_schema, entry[0], f"{where}.<key>")
            try:
                hash(key)
            except TypeError:
                raise ConverterError(
                    f"{where}[{i}]: map keys of this type are not supported"
                ) from None
            result[key] = value_from_json(
                schema.value_schema, entry[1], f"{where}[{key!r}]", replace_null_with_default
            )
        return result
    if t is Type.STRUCT:
        if not isinstance(node, dict):
            raise ConverterError(
                f"{where}: Structs should be encoded as JSON objects, but found {_json_kind(node)}"
            )
        return {
            f.name: value_from_json(
                f.schema,
                node.get(f.name),
                f"{where}.{f.name}" if where != "payload" else f.name,
                replace_null_with_default,
            )
            for f in schema.fields
        }
    raise ConverterError(f"{where}: Unknown schema type: {t}")


def _b64(node: Any, where: str) -> bytes:
    if not isinstance(node, str):
        raise ConverterError(f"{where}: expected base64 bytes but found {_json_kind(node)}")
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError):
        raise ConverterError(f"{where}: Invalid bytes field (not base64)") from None


def _schemaless_from_json(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    return node


# ------------------------------------------------------------------ JSON text


def dumps(tree: Any) -> bytes:
    """Compact JSON as Jackson writes it (UTF-8, no spaces); ``Decimal`` as a plain number."""
    try:
        return json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except TypeError:
        return "".join(_write(tree)).encode("utf-8")  # NUMERIC decimals


def _write(node: Any):
    if isinstance(node, decimal.Decimal):
        yield str(node)
    elif isinstance(node, dict):
        yield "{"
        for i, (k, v) in enumerate(node.items()):
            if i:
                yield ","
            yield json.dumps(k, ensure_ascii=False)
            yield ":"
            yield from _write(v)
        yield "}"
    elif isinstance(node, list):
        yield "["
        for i, v in enumerate(node):
            if i:
                yield ","
            yield from _write(v)
        yield "]"
    else:
        yield json.dumps(node, ensure_ascii=False)


def loads(data: bytes, exact_decimals: bool) -> Any:
    try:
        text = bytes(data).decode("utf-8")
        if exact_decimals:
            return json.loads(text, parse_float=decimal.Decimal)
        return json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConverterError(
            f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}"
        ) from None


# ------------------------------------------------------------------ the converter


class _BoundedCache(OrderedDict):
    """A least-recently-inserted cache of at most ``size`` entries (0: none kept)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def put(self, key: Any, value: Any) -> None:
        if self.size > 0:
            self[key] = value
            if len(self) > self.size:
                self.popitem(last=False)


_ENVELOPE_HEAD = '{"schema":'
_ENVELOPE_MIDDLE = ',"payload":'
_EXACT_DECODER = json.JSONDecoder(parse_float=decimal.Decimal)


class JsonConverter(ValueAsHeaderConverter):
    """``org.apache.kafka.connect.json.JsonConverter`` (also usable as a header converter).

    Keeps two bounded caches (``schemas.cache.size`` each), as Kafka's does: a schema's JSON text
    for writing, and the schema a JSON text stands for when reading (keyed by the text, so an
    envelope in the compact form Kafka and this converter write costs one schema parse per
    distinct schema; other layouts are read without the cache)."""

    def __init__(self) -> None:
        self.schemas_enable = True
        self.numeric_decimals = False
        self.replace_null_with_default = True
        self.is_key = False
        self._written: _BoundedCache = _BoundedCache(1000)
        self._read: _BoundedCache = _BoundedCache(1000)
        self._last_schema: Schema | None = None
        self._last_text = ""

    def config(self) -> ConfigDef:
        return config_def()

    def configure(self, props: Mapping[str, str], is_key: bool = False) -> None:
        parsed = config_def().parse(props)
        self.schemas_enable = parsed[SCHEMAS_ENABLE]
        self.numeric_decimals = parsed[DECIMAL_FORMAT].upper() == "NUMERIC"
        self.replace_null_with_default = parsed[REPLACE_NULL_WITH_DEFAULT]
        self.is_key = is_key if parsed[CONVERTER_TYPE] is None else parsed[CONVERTER_TYPE] == "key"
        self._written = _BoundedCache(parsed[SCHEMAS_CACHE_SIZE])
        self._read = _BoundedCache(parsed[SCHEMAS_CACHE_SIZE])
        self._last_schema, self._last_text = None, ""

    def _schema_text(self, schema: Schema | None) -> str:
        if schema is None:
            return "null"
        if schema is self._last_schema:  # a connector usually reuses one schema object
            return self._last_text
        try:
            cached = self._written.get(schema)
        except TypeError:  # an unhashable default value: not cached
            cached = None
            hashable = False
        else:
            hashable = True
        if cached is None:
            cached = dumps(schema_to_json(schema, self.numeric_decimals)).decode("utf-8")
            if hashable:
                self._written.put(schema, cached)
        self._last_schema, self._last_text = schema, cached
        return cached

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = dumps(
            value_to_json(
                schema, value, "value", self.numeric_decimals, self.replace_null_with_default
            )
        )
        if self.schemas_enable:
            head = f"{_ENVELOPE_HEAD}{self._schema_text(schema)}{_ENVELOPE_MIDDLE}".encode()
            return head + payload + b"}"
        return payload

    def to_connect(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        if not self.schemas_enable:
            return SchemaAndValue(None, _schemaless_from_json(loads(data, exact_decimals=False)))
        compact = self._compact_envelope(data)
        if compact is not None:
            schema, payload = compact
        else:
            tree = loads(data, exact_decimals=True)
            if not isinstance(tree, dict) or set(tree) != {"schema", "payload"}:
                raise ConverterError(f"topic {topic}: {ENVELOPE_ERROR}")
            schema, payload = schema_from_json(tree["schema"]), tree["payload"]
        return SchemaAndValue(
            schema, value_from_json(schema, payload, "payload", self.replace_null_with_default)
        )

    def _compact_envelope(self, data: bytes) -> tuple[Schema | None, Any] | None:
        """(schema, payload node) of ``{"schema":...,"payload":...}`` written without spaces,
        the schema from the cache when its text was seen before; None for any other layout."""
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not text.startswith(_ENVELOPE_HEAD):
            return None
        try:
            schema_node, schema_end = _EXACT_DECODER.raw_decode(text, len(_ENVELOPE_HEAD))
            if not text.startswith(_ENVELOPE_MIDDLE, schema_end):
                return None
            payload, payload_end = _EXACT_DECODER.raw_decode(
                text, schema_end + len(_ENVELOPE_MIDDLE)
            )
        except ValueError:
            return None
        if text[payload_end:].strip() != "}":
            return None
        key = text[len(_ENVELOPE_HEAD) : schema_end]
        schema = self._read.get(key)
        if schema is None:
            schema = schema_from_json(schema_node)
            if schema is not None:
                self._read.put(key, schema)
        return schema, payload

    def close(self) -> None:
        self._written.clear()
        self._read.clear()
