"""Encode kio schema dataclasses: the same bytes as kio's writer, about three times faster.

kio's ``entity_writer`` is pure Python that packs one field at a time and opens a ``BytesIO`` for
the tagged fields of every struct: measured on kio 0.6.5, a Produce v9 response takes 19 us, a
Fetch v12 response 16 us per partition, a Metadata v12 response for 100 topics of 10 partitions
10 ms (ours: 7 us, 3.5 us, 2.9 ms; see docs/protocol.md). This writer walks the same schemas
(``fields.layout``), packs each run of fixed-width fields with one ``struct`` call and appends to
one ``bytearray``; a test compares its output with kio's byte for byte, for every API and version
the broker serves. It also leaves record sets held in files out of the buffer (below), which kio's
writer cannot.

Rules kept from Kafka (and kio):
- a tagged field equal to its default is not written at all (Debian's kcat misreads an ApiVersions
  v3 response that carries default-valued tagged fields);
- tagged fields go out in increasing tag order.

A ``records`` field may hold bytes, ``None``, or a file region (``parts.FileRegion``): for a region
only the length is written and the region is recorded as a hole in ``OutBuffer.holes``;
``OutBuffer.parts()`` cuts the buffer there. Writers are built once per type and hold no state.

An array whose next element is the very object just written (a handler answering a million
repeats of one id shares one answer, ``time_slices.answer_each``) copies the bytes just written
instead of encoding it again: the same bytes, a fraction of the time.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import Any

from odradek.protocol.fields import FieldSpec, Kind, layout, plan
from odradek.protocol.parts import FileRegion, Part, part_size

__all__ = ["OutBuffer", "entity_writer", "encode", "write_uvarint"]

_NOTHING = object()  # no element written yet


class OutBuffer(bytearray):
    """A growing message, with the file regions (holes) that go between its bytes."""

    def __init__(self, initial: bytes = b""):
        super().__init__(initial)
        self.holes: list[tuple[int, FileRegion]] = []  # (byte position, region)

    def parts(self) -> list[Part]:
        """The message as buffers and regions, in wire order (a single buffer if no holes)."""
        if not self.holes:
            return [bytes(self)]
        view = memoryview(self)
        parts: list[Part] = []
        start = 0
        for position, region in self.holes:
            if position > start:
                parts.append(bytes(view[start:position]))
            parts.append(region)
            start = position
        if start < len(self):
            parts.append(bytes(view[start:]))
        return parts


Writer = Callable[[OutBuffer, Any], None]

_FIXED_CODES = {
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
    "error_code": "h",  # ErrorCode is an IntEnum: struct packs it as the int it is
}
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_ZERO_UUID = bytes(16)
_LEGACY_STRING_MAX = 0x7FFF


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _millis(value: Any) -> int:
    return round(value.total_seconds() * 1000)


def _string_writer(flexible: bool, nullable: bool, is_bytes: bool) -> Writer:
    def write(out: OutBuffer, value: Any) -> None:
        if value is None:
            if not nullable:
                raise TypeError("None in a non-nullable string or bytes field")
            if flexible:
                out.append(0)
            else:
                out += (_INT16 if not is_bytes else _INT32).pack(-1)
            return
        data = value.encode() if isinstance(value, str) else value
        if flexible:
            write_uvarint(out, len(data) + 1)
        elif is_bytes:
            out += _INT32.pack(len(data))
        else:
            if len(data) > _LEGACY_STRING_MAX:
                raise ValueError(f"string of {len(data)} bytes is too long for int16 length")
            out += _INT16.pack(len(data))
        out += data

    return write


def _primitive_writer(kafka_type: str, flexible: bool, nullable: bool) -> Writer:
    code = _FIXED_CODES.get(kafka_type)
    if code is not None:
        pack = struct.Struct(">" + code).pack

        def write_fixed(out: OutBuffer, value: Any) -> None:
            out += pack(value)

        return write_fixed
    if kafka_type in ("string", "bytes"):
        return _string_writer(flexible, nullable, kafka_type == "bytes")
    if kafka_type == "uuid":

        def write_uuid(out: OutBuffer, value: Any) -> None:
            out += _ZERO_UUID if value is None else value.bytes

        return write_uuid
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        pack = (_INT32 if kafka_type == "timedelta_i32" else _INT64).pack

        def write_timedelta(out: OutBuffer, value: Any) -> None:
            out += pack(_millis(value))

        return write_timedelta
    if kafka_type == "datetime_i64":

        def write_datetime(out: OutBuffer, value: Any) -> None:
            out += _INT64.pack(-1 if value is None else round(value.timestamp() * 1000))

        return write_datetime
    raise TypeError(f"no writer for {kafka_type}")


def _records_writer(flexible: bool) -> Writer:
    def write_records(out: OutBuffer, value: Any) -> None:
        if value is None:
            if flexible:
                out.append(0)
            else:
                out += _INT32.pack(-1)
            return
        is_region = not isinstance(value, bytes | bytearray | memoryview)
        size = part_size(value)
        if flexible:
            write_uvarint(out, size + 1)
        else:
            out += _INT32.pack(size)
        if is_region:
            out.holes.append((len(out), value))
        else:
            out += value

    return write_records


def _array_writer(flexible: bool, write_item: Writer | None, item_code: str | None) -> Writer:
    def write_array(out: OutBuffer, items: Any) -> None:
        if items is None:
            if flexible:
                out.append(0)
            else:
                out += _INT32.pack(-1)
            return
        count = len(items)
        if flexible:
            write_uvarint(out, count + 1)
        else:
            out += _INT32.pack(count)
        if item_code is not None:
            if count:
                out += struct.pack(f">{count}{item_code}", *items)
        else:
            assert write_item is not None
            previous: Any = _NOTHING
            start = end = 0
            for item in items:
                if item is previous:  # the same object again: the same bytes (see the module)
                    out += out[start:end]
                    continue
                start, holes = len(out), len(out.holes)
                write_item(out, item)
                end = len(out)
                # an element holding a file region is written again: its hole is its own
                previous = item if len(out.holes) == holes else _NOTHING

    return write_array


def _nullable_struct_writer(write_struct: Writer) -> Writer:
    def write_nullable_struct(out: OutBuffer, value: Any) -> None:
        if value is None:
            out += _INT8.pack(-1)
        else:
            out += _INT8.pack(1)
            write_struct(out, value)

    return write_nullable_struct


def _field_writer(spec: FieldSpec, flexible: bool) -> Writer:
    if spec.kind is Kind.PRIMITIVE:
        return _primitive_writer(spec.kafka_type or "", flexible, spec.nullable)
    if spec.kind is Kind.RECORDS:
        return _records_writer(flexible)
    if spec.kind is Kind.PRIMITIVE_ARRAY:
        kafka_type = spec.kafka_type or ""
        code = _FIXED_CODES.get(kafka_type)
        item = None if code else _primitive_writer(kafka_type, flexible, False)
        return _array_writer(flexible, item, code)
    assert spec.struct_type is not None
    write_struct = entity_writer(spec.struct_type)
    if spec.kind is Kind.STRUCT_ARRAY:
        return _array_writer(flexible, write_struct, None)
    return _nullable_struct_writer(write_struct) if spec.nullable else write_struct


def _fixed_run_step(specs: list[FieldSpec]) -> Callable[[OutBuffer, Any], None]:
    """One ``struct.pack`` for a run of consecutive fixed-width fields."""
    pack = struct.Struct(">" + "".join(_FIXED_CODES[s.kafka_type or ""] for s in specs)).pack
    if len(specs) == 1:
        get_one = attrgetter(specs[0].name)

        def pack_one(out: OutBuffer, entity: Any) -> None:
            out += pack(get_one(entity))

        return pack_one
    get_many = attrgetter(*(s.name for s in specs))

    def pack_run(out: OutBuffer, entity: Any) -> None:
        out += pack(*get_many(entity))

    return pack_run


def _field_step(spec: FieldSpec, flexible: bool) -> Callable[[OutBuffer, Any], None]:
    write = _field_writer(spec, flexible)
    get = attrgetter(spec.name)

    def write_field(out: OutBuffer, entity: Any) -> None:
        write(out, get(entity))

    return write_field


def _tags_step(specs: tuple[FieldSpec, ...]) -> Callable[[OutBuffer, Any], None]:
    if not specs:

        def write_no_tags(out: OutBuffer, entity: Any) -> None:
            out.append(0)

        return write_no_tags
    tagged = [(s.tag, s.name, s.default, _field_writer(s, True)) for s in specs]

    def write_tags(out: OutBuffer, entity: Any) -> None:
        present = []
        for tag, name, default, write in tagged:
            value = getattr(entity, name)
            if value is default or value == default:
                continue
            encoded = OutBuffer()
            write(encoded, value)
            present.append((tag, encoded))
        write_uvarint(out, len(present))
        for tag, encoded in present:
            write_uvarint(out, tag)
            write_uvarint(out, len(encoded))
            out += encoded

    return write_tags


@cache
def entity_writer(entity_type: type[Any]) -> Writer:
    """A writer for ``entity_type``: ``(out, entity) -> None``, appending to ``out``."""
    steps = plan(layout(entity_type), _FIXED_CODES, _fixed_run_step, _field_step, _tags_step)

    def write_entity(out: OutBuffer, entity: Any) -> None:
        for step in steps:
            step(out, entity)

    return write_entity


def encode(entity: Any) -> bytes:
    """``entity`` alone, as bytes (no file regions allowed)."""
    out = OutBuffer()
    entity_writer(type(entity))(out, entity)
    if out.holes:
        raise TypeError("a file region cannot be encoded to bytes; use OutBuffer.parts()")
    return bytes(out)
