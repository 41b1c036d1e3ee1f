"""A request encoded with a map of where its fields' bytes are, for field-level mutation.

``encode_request(body, correlation_id, client_id)`` walks kio's schema of the header and of the
body (``odradek.protocol.fields.layout``, which reads kio's field metadata) and writes them as
Kafka does. Along the way it records a ``Slot`` for every fixed-width integer and for every
length or count prefix (strings, arrays, record sets, tagged-field sections), and the byte range
of every ``records`` field. A mutation then rewrites one slot (``Frame.with_slot``): a boundary
value, a null where none is allowed, a count of 2^31-1 over three items.

The bytes are checked against kio's own writer (``kio.serial.entity_writer``), so a valid case
is exactly what a kio client sends and this walker cannot drift from the schema unnoticed. The
broker's writer is not used for that check: it is part of what is under test.

Pure functions over values; any thread may call them.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer as kio_writer

from odradek.protocol.fields import FieldSpec, Kind, layout

__all__ = ["Slot", "Frame", "encode_request", "encode_uvarint", "encode_length"]

# kafka_type -> struct code of the fixed-width primitives a request can hold.
_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
}
INT_RANGES = {
    "b": (-(2**7), 2**7 - 1),
    "h": (-(2**15), 2**15 - 1),
    "i": (-(2**31), 2**31 - 1),
    "q": (-(2**63), 2**63 - 1),
    "B": (0, 2**8 - 1),
    "H": (0, 2**16 - 1),
    "I": (0, 2**32 - 1),
    "Q": (0, 2**64 - 1),
}


@dataclass(frozen=True)
class Slot:
    """Where one integer of the frame is, and how it is written.

    ``encoding`` is a struct code (``"h"``, ``"i"``, ...) or ``"uvarint"`` (compact lengths and
    counts carry their value plus one; tagged-field counts do not). ``role`` says what the
    integer is: ``value`` (a field), ``length`` (of a string, bytes or records), ``count`` (of an
    array) or ``tags`` (of a tagged-field section).
    """

    offset: int
    width: int
    encoding: str
    role: str
    path: str


@dataclass(frozen=True)
class Frame:
    """A request without its size prefix, with its slots and its record sets' byte ranges."""

    data: bytes
    slots: tuple[Slot, ...]
    records: tuple[tuple[int, int, str], ...]  # (offset, length, path) of each ``records`` value
    header_size: int

    def with_slot(self, slot: Slot, raw: bytes) -> bytes:
        """The frame's bytes with ``slot`` replaced by ``raw`` (which may differ in width)."""
        return self.data[: slot.offset] + raw + self.data[slot.offset + slot.width :]


def encode_uvarint(value: int) -> bytes:
    """An unsigned varint; values past 2^35 come out longer than Kafka allows, on purpose."""
    out = bytearray()
    value &= (1 << 70) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_length(slot: Slot, value: int) -> bytes:
    """``value`` written as ``slot`` writes its integer: a length of -1 is null."""
    if slot.encoding == "uvarint":
        biased = slot.role in ("length", "count")
        return encode_uvarint(value + 1 if biased else value)
    low, high = INT_RANGES.get(slot.encoding, (-(2**63), 2**63 - 1))
    return struct.pack(">" + slot.encoding, max(low, min(high, value)))


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()
        self.slots: list[Slot] = []
        self.records: list[tuple[int, int, str]] = []

    def fixed(self, code: str, value: Any, path: str, role: str = "value") -> None:
        if code in INT_RANGES:
            self.slots.append(Slot(len(self.out), struct.calcsize(code), code, role, path))
        self.out += struct.pack(">" + code, value)

    def uvarint(self, value: int, path: str, role: str) -> None:
        raw = encode_uvarint(value)
        self.slots.append(Slot(len(self.out), len(raw), "uvarint", role, path))
        self.out += raw

    def length(self, length: int, flexible: bool, code: str, path: str, role: str) -> None:
        """A length or count: -1 is null."""
        if flexible:
            self.uvarint(length + 1, path, role)
        else:
            self.fixed(code, length, path, role)

    def primitive(self, kafka_type: str, value: Any, flexible: bool, path: str) -> None:
        code = _FIXED.get(kafka_type)
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            value = round(value.total_seconds() * 1000)
        elif kafka_type == "datetime_i64":
            value = -1 if value is None else round(value.timestamp() * 1000)
        if code is not None:
            self.fixed(code, value, path)
        elif kafka_type == "uuid":
            self.out += bytes(16) if value is None else value.bytes
        elif kafka_type in ("string", "bytes", "records"):
            self.variable(kafka_type, value, flexible, path)
        else:
            raise TypeError(f"{path}: no encoding for {kafka_type}")

    def variable(self, kafka_type: str, value: Any, flexible: bool, path: str) -> None:
        code = "h" if kafka_type == "string" else "i"
        if value is None:
            self.length(-1, flexible, code, path, "length")
            return
        data = value.encode() if isinstance(value, str) else bytes(value)
        self.length(len(data), flexible, code, path, "length")
        if kafka_type == "records":
            self.records.append((len(self.out), len(data), path))
        self.out += data

    def entity(self, entity: Any, path: str) -> None:
        schema = layout(type(entity))
        for spec in schema.fields:
            self.field(spec, getattr(entity, spec.name), schema.flexible, f"{path}.{spec.name}")
        if schema.flexible:
            self.tags(schema.tagged, entity, path)

    def field(self, spec: FieldSpec, value: Any, flexible: bool, path: str) -> None:
        if spec.kind in (Kind.PRIMITIVE, Kind.RECORDS):
            self.primitive(spec.kafka_type or "", value, flexible, path)
        elif spec.kind is Kind.STRUCT:
            if spec.nullable:  # KIP-893: an int8 marker, negative for null
                self.fixed("b", -1 if value is None else 1, path, "length")
            if value is not None:
                self.entity(value, path)
        elif value is None:
            self.length(-1, flexible, "i", path, "count")
        else:
            self.length(len(value), flexible, "i", path, "count")
            for index, item in enumerate(value):
                item_path = f"{path}[{index}]"
                if spec.kind is Kind.STRUCT_ARRAY:
                    self.entity(item, item_path)
                else:
                    self.primitive(spec.kafka_type or "", item, flexible, item_path)

    def tags(self, tagged: tuple[FieldSpec, ...], entity: Any, path: str) -> None:
        present = [s for s in tagged if getattr(entity, s.name) != s.default]
        self.uvarint(len(present), f"{path}.<tags>", "tags")
        for spec in present:
            inner = _Writer()
            inner.field(spec, getattr(entity, spec.name), True, f"{path}.{spec.name}")
            self.out += encode_uvarint(spec.tag or 0)
            self.uvarint(len(inner.out), f"{path}.{spec.name}.<size>", "tags")
            base = len(self.out)
            self.slots += [dataclasses.replace(s, offset=s.offset + base) for s in inner.slots]
            self.records += [(o + base, n, p) for o, n, p in inner.records]
            self.out += inner.out


def _header(body: Any, correlation_id: int, client_id: str | None) -> Any:
    header_type = body.__header_schema__
    return header_type(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )


def _kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    kio_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def encode_request(body: Any, correlation_id: int, client_id: str | None) -> Frame:
    """Header and body as a client sends them (no size prefix), with their slots.

    Raises ``AssertionError`` if the bytes differ from kio's: a bug in this walker.
    """
    header = _header(body, correlation_id, client_id)
    writer = _Writer()
    schema = layout(type(header))
    for spec in schema.fields:
        if spec.name == "client_id":  # a legacy string in every header version (as Kafka)
            writer.variable("string", header.client_id, False, "header.client_id")
        else:
            writer.field(spec, getattr(header, spec.name), False, f"header.{spec.name}")
    if schema.flexible:
        writer.tags(schema.tagged, header, "header")
    header_size = len(writer.out)
    writer.entity(body, "body")
    data = bytes(writer.out)
    expected = _kio_bytes(header) + _kio_bytes(body)
    if data != expected:
        raise AssertionError(f"{type(body).__name__}: the fuzz's encoding differs from kio's")
    return Frame(data, tuple(writer.slots), tuple(writer.records), header_size)
