"""Decode kio schema dataclasses from bytes that may be hostile: bounded, and records not copied.

Why not kio's own reader (``kio.serial.entity_reader``, native code): measured on kio 0.6.5, it

- reserves memory for an array from the length on the wire before reading any element, and a
  failed reservation aborts the process (Rust ``alloc`` failure, not a Python exception): the
  8-byte Metadata v0 body ``7f ff ff ff`` asks for 16 GiB, a 5-byte compact length for 32 GiB;
- raises ``KeyError`` on a tagged field it does not know, where Kafka skips it (that is what
  tagged fields are for);
- copies every ``records`` field into a new ``bytes`` object;
- reads a null where the schema forbids one as ``None``, which a handler would then trip over.

This reader walks the same schemas (``fields.layout``), checks every length against the bytes
left before using it, skips unknown tags, rejects nulls in non-nullable fields, and returns a
``records`` field as a read-only ``memoryview`` slice of the input (zero copy: the broker hands it
to ``Log.append`` as is). Runs of fixed-width fields are unpacked with one ``struct`` call and
turned into kio's types (``ErrorCode``, ``timedelta``, ``UUID``); strings, bytes and timestamps go
through kio's native primitive readers, which do check their lengths. The price is speed: about
15 us for a one-partition Produce or Fetch request where kio takes 1.5 us (docs/protocol.md).

Every failure is ``MalformedError``. Readers are built once per type and hold no state: any
thread may call them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import timedelta
from functools import cache
from typing import Any
from uuid import UUID

from kio.serial import errors as kio_errors
from kio.serial import readers as kio

from odradek.errors import ErrorCode
from odradek.protocol.fields import FieldSpec, Kind, layout, plan

__all__ = ["MalformedError", "read_entity", "entity_reader"]

Buffer = memoryview  # read-only, format "B": what kio's native readers accept
Reader = Callable[[Buffer, int], tuple[Any, int]]
NativeReader = Callable[[Buffer, int], tuple[Any, int]]  # returns (value, size), not a position

_INT8 = struct.Struct(">b")
_INT32 = struct.Struct(">i")


class MalformedError(ValueError):
    """The bytes do not follow the schema."""


# Fixed-width types: a struct code, and how to turn the unpacked int into kio's value (or None).
_FIXED: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "int8": ("b", None),
    "int16": ("h", None),
    "int32": ("i", None),
    "int64": ("q", None),
    "uint8": ("B", None),
    "uint16": ("H", None),
    "uint32": ("I", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "bool": ("?", None),
    "error_code": ("h", lambda code: _error_code(code)),
    "timedelta_i32": ("i", lambda ms: timedelta(milliseconds=ms)),
    "timedelta_i64": ("q", lambda ms: timedelta(milliseconds=ms)),
    "uuid": ("16s", lambda raw: None if raw == _ZERO_UUID else UUID(bytes=raw)),  # as kio does
}
_ZERO_UUID = bytes(16)
_ERROR_CODES = {code.value: code for code in ErrorCode}


def _error_code(value: int) -> ErrorCode:
    code = _ERROR_CODES.get(value)
    if code is None:
        raise MalformedError(f"unknown error code {value}")
    return code


def _read_datetime_or_unset(buf: Buffer, pos: int) -> tuple[Any, int]:
    """A timestamp field Kafka declares non-nullable yet fills with -1 for "none"
    (DescribeTransactions' TransactionStartTimeMs of a transaction not started): None, as
    the writer writes None; any other negative value is still refused."""
    if struct.unpack_from(">q", buf, pos)[0] == -1:
        return None, 8
    return kio.read_datetime_i64(buf, pos)


# (kafka_type, flexible, nullable) -> kio's native reader, for the variable-length primitives.
_VARIABLE: dict[tuple[str, bool, bool], NativeReader] = {
    ("string", True, False): kio.read_compact_string,
    ("string", True, True): kio.read_compact_string_nullable,
    ("string", False, False): kio.read_legacy_string,
    ("string", False, True): kio.read_nullable_legacy_string,
    ("bytes", True, False): kio.read_compact_string_as_bytes,
    ("bytes", True, True): kio.read_compact_string_as_bytes_nullable,
    ("bytes", False, False): kio.read_legacy_bytes,
    ("bytes", False, True): kio.read_nullable_legacy_bytes,
    ("datetime_i64", True, False): _read_datetime_or_unset,
    ("datetime_i64", False, False): _read_datetime_or_unset,
    ("datetime_i64", True, True): kio.read_nullable_datetime_i64,
    ("datetime_i64", False, True): kio.read_nullable_datetime_i64,
}

# A step reads some fields into ``values`` and returns the new position.
Step = Callable[[Buffer, int, dict[str, Any]], int]


def _native(kafka_type: str, flexible: bool, nullable: bool) -> NativeReader:
    fixed = _FIXED.get(kafka_type)
    if fixed is not None:
        code, convert = fixed
        unpack = struct.Struct(">" + code).unpack_from
        size = struct.calcsize(">" + code)
        if convert is None:

            def read_fixed(buf: Buffer, pos: int) -> tuple[Any, int]:
                return unpack(buf, pos)[0], size

            return read_fixed

        def read_converted(buf: Buffer, pos: int) -> tuple[Any, int]:
            return convert(unpack(buf, pos)[0]), size

        return read_converted
    reader = _VARIABLE.get((kafka_type, flexible, nullable))
    if reader is None:
        raise TypeError(f"no reader for {kafka_type} (flexible={flexible}, nullable={nullable})")
    return reader


def _read_length(buf: Buffer, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's or a record set's length: -1 for null. Bounded by the bytes left."""
    if flexible:
        raw, size = kio.read_unsigned_varint(buf, pos)
        length = raw - 1
    else:
        (length,) = _INT32.unpack_from(buf, pos)
        size = 4
        if length < -1:
            raise MalformedError(f"negative length {length} at byte {pos}")
    pos += size
    if length > len(buf) - pos:
        raise MalformedError(f"length {length} at byte {pos} exceeds the {len(buf) - pos} left")
    return length, pos


def _records_reader(spec: FieldSpec, flexible: bool) -> Reader:
    def read_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
        length, pos = _read_length(buf, pos, flexible)
        if length < 0:
            if not spec.nullable:
                raise MalformedError(f"null in non-nullable field {spec.name}")
            return None, pos
        return buf[pos : pos + length], pos + length

    return read_records


def _array_reader(spec: FieldSpec, flexible: bool, read_item: Reader | None) -> Reader:
    """``read_item`` reads a struct; without it the items are primitives."""
    kafka_type = spec.kafka_type or ""
    fixed = None if read_item else _FIXED.get(kafka_type)
    bulk_code = fixed[0] if fixed is not None and fixed[1] is None else None
    native = None if read_item or bulk_code else _native(kafka_type, flexible, False)

    def read_array(buf: Buffer, pos: int) -> tuple[tuple[Any, ...] | None, int]:
        length, pos = _read_length(buf, pos, flexible)
        if length < 0:
            if not spec.nullable:
                raise MalformedError(f"null in non-nullable array {spec.name}")
            return None, pos
        if bulk_code is not None:  # int arrays: one unpack
            bulk = struct.Struct(f">{length}{bulk_code}")
            return bulk.unpack_from(buf, pos), pos + bulk.size
        items = []
        if native is not None:
            for _ in range(length):
                item, size = native(buf, pos)
                pos += size
                items.append(item)
        else:
            assert read_item is not None
            for _ in range(length):
                item, pos = read_item(buf, pos)
                items.append(item)
        return tuple(items), pos

    return read_array


def _nullable_struct_reader(read_struct: Reader) -> Reader:
    # KIP-893: a nullable struct is preceded by an int8, negative for null.
    def read_nullable_struct(buf: Buffer, pos: int) -> tuple[Any, int]:
        (marker,) = _INT8.unpack_from(buf, pos)
        if marker < 0:
            return None, pos + 1
        return read_struct(buf, pos + 1)

    return read_nullable_struct


def _field_reader(spec: FieldSpec, flexible: bool) -> tuple[Reader | NativeReader, bool]:
    """(reader, native): a native reader returns the size read, the others the new position."""
    if spec.kind is Kind.PRIMITIVE:
        return _native(spec.kafka_type or "", flexible, spec.nullable), True
    if spec.kind is Kind.RECORDS:
        return _records_reader(spec, flexible), False
    if spec.kind is Kind.PRIMITIVE_ARRAY:
        return _array_reader(spec, flexible, None), False
    assert spec.struct_type is not None
    read_struct = entity_reader(spec.struct_type)
    if spec.kind is Kind.STRUCT_ARRAY:
        return _array_reader(spec, flexible, read_struct), False
    return (_nullable_struct_reader(read_struct) if spec.nullable else read_struct), False


def _field_step(spec: FieldSpec, flexible: bool) -> Step:
    reader, native = _field_reader(spec, flexible)
    name = spec.name
    if native:

        def read_native_field(buf: Buffer, pos: int, values: dict[str, Any]) -> int:
            values[name], size = reader(buf, pos)
            return pos + size

        return read_native_field

    def read_field(buf: Buffer, pos: int, values: dict[str, Any]) -> int:
        values[name], pos = reader(buf, pos)
        return pos

    return read_field


def _fixed_run_step(specs: list[FieldSpec]) -> Step:
    """One ``struct.unpack_from`` for a run of consecutive fixed-width fields."""
    run = struct.Struct(">" + "".join(_FIXED[s.kafka_type or ""][0] for s in specs))
    unpack, size = run.unpack_from, run.size
    names = tuple(s.name for s in specs)
    converted = tuple(
        (s.name, convert) for s in specs if (convert := _FIXED[s.kafka_type or ""][1]) is not None
    )

    def read_run(buf: Buffer, pos: int, values: dict[str, Any]) -> int:
        values.update(zip(names, unpack(buf, pos)))  # noqa: B905 (the struct has len(names) items)
        for name, convert in converted:
            values[name] = convert(values[name])
        return pos + size

    return read_run


def _tags_step(specs: tuple[FieldSpec, ...]) -> Step:
    tagged = {}
    for spec in specs:
        reader, native = _field_reader(spec, True)
        tagged[spec.tag] = (spec.name, reader, native)

    def read_tags(buf: Buffer, pos: int, values: dict[str, Any]) -> int:
        if buf[pos] == 0:  # the usual case: no tagged fields
            return pos + 1
        count, size = kio.read_unsigned_varint(buf, pos)
        pos += size
        if count > len(buf) - pos:
            raise MalformedError(f"{count} tagged fields at byte {pos} cannot fit")
        for _ in range(count):
            tag, size = kio.read_unsigned_varint(buf, pos)
            pos += size
            length, size = kio.read_unsigned_varint(buf, pos)
            pos += size
            end = pos + length
            if end > len(buf):
                raise MalformedError(f"tagged field {tag} overruns the buffer")
            known = tagged.get(tag)
            if known is not None:  # unknown tags are skipped, as Kafka does
                name, reader, native = known
                if native:
                    value, size = reader(buf, pos)
                    read_end = pos + size
                else:
                    value, read_end = reader(buf, pos)
                if read_end != end:
                    raise MalformedError(f"tagged field {tag} is {length} bytes, its value is not")
                values[name] = value
            pos = end
        return pos

    return read_tags


@cache
def entity_reader(entity_type: type[Any]) -> Reader:
    """A reader for ``entity_type``: ``(buf, pos) -> (entity, new_pos)``. Raises anything."""
    steps = plan(layout(entity_type), _FIXED, _fixed_run_step, _field_step, _tags_step)

    def read_entity(buf: Buffer, pos: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        for step in steps:
            pos = step(buf, pos, values)
        return entity_type(**values), pos

    return read_entity


_DECODE_FAILURES = (
    kio_errors.DecodeError,
    kio_errors.SerialError,
    ValueError,  # kio: unknown ErrorCode, over-long varint, negative array length
    OverflowError,
    struct.error,
    IndexError,
    UnicodeDecodeError,
)


def read_entity(entity_type: type[Any], buf: Buffer, pos: int = 0) -> tuple[Any, int]:
    """Read one ``entity_type`` at ``pos``; every failure comes out as ``MalformedError``."""
    try:
        return entity_reader(entity_type)(buf, pos)
    except MalformedError:
        raise
    except _DECODE_FAILURES as e:
        raise MalformedError(f"{entity_type.__name__}: {e}") from e
