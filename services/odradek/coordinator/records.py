"""The framing of a coordinator's records: a versioned key and a versioned value.

Kafka's coordinator records (``*Key.json`` / ``*Value.json`` of ``group-coordinator`` and
``transaction-coordinator``): the record key is an int16 *record type* (the key version of older
Kafka: the two are the same two bytes) then the key struct; the record value is an int16
*version* then the value struct, or null (a tombstone: the key's entity is gone, and compaction
will drop it).

Keys and values are kio-style dataclasses (as ``protocol.interbroker`` declares its messages:
``kafka_type`` in each field's metadata, ``__flexible__``), encoded by the protocol layer's
writer and decoded by its bounded reader. A key class carries ``__record_type__``; a value class
``__version__``.

**One ``RecordFormat`` per internal topic**: record types are numbered per topic (type 0 is an
offset commit in ``__consumer_offsets`` and a transaction in ``__transaction_state``), so each
coordinator registers its types in its own format and decodes with it. Pure data; any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from odradek.protocol.reader import MalformedError, read_entity
from odradek.protocol.writer import encode as encode_entity

__all__ = [
    "CoordinatorRecord",
    "RecordFormat",
    "UnknownRecordError",
    "encode_key",
    "encode_value",
]

_INT16 = struct.Struct(">h")


class UnknownRecordError(ValueError):
    """A record of an internal topic whose type or version this broker does not know."""


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record to write or replayed: ``value`` None is a tombstone."""

    key: Any
    value: Any | None


def encode_key(key: Any) -> bytes:
    return _INT16.pack(type(key).__record_type__) + encode_entity(key)


def encode_value(value: Any | None) -> bytes | None:
    if value is None:
        return None
    return _INT16.pack(type(value).__version__) + encode_entity(value)


class RecordFormat:
    """The record types of one internal topic (``topic``): what ``decode`` knows.

    Invariant: one key class per record type; one value class per (record type, version).
    """

    def __init__(self, topic: str):
        self.topic = topic
        self._keys: dict[int, type[Any]] = {}
        self._values: dict[tuple[int, int], type[Any]] = {}

    def register(self, key_type: type[Any], *value_types: type[Any]) -> None:
        """Make ``key_type`` (and its value versions) known to ``decode``; once per type."""
        record_type = key_type.__record_type__
        if self._keys.get(record_type, key_type) is not key_type:
            raise RuntimeError(f"{self.topic}: two key classes for record type {record_type}")
        self._keys[record_type] = key_type
        for value_type in value_types:
            self._values[(record_type, value_type.__version__)] = value_type

    def decode(
        self, key: bytes | memoryview, value: bytes | memoryview | None
    ) -> CoordinatorRecord:
        """The record a log record holds; ``UnknownRecordError`` or ``MalformedError`` if not."""
        if len(key) < 2:
            raise MalformedError(f"a {self.topic} record key of {len(key)} bytes")
        (record_type,) = _INT16.unpack_from(key)
        key_type = self._keys.get(record_type)
        if key_type is None:
            raise UnknownRecordError(f"unknown {self.topic} record type {record_type}")
        decoded_key, _ = read_entity(key_type, key, 2)
        if value is None:
            return CoordinatorRecord(decoded_key, None)
        if len(value) < 2:
            raise MalformedError(f"a {self.topic} record value of {len(value)} bytes")
        (version,) = _INT16.unpack_from(value)
        value_type = self._values.get((record_type, version))
        if value_type is None:
            raise UnknownRecordError(
                f"{self.topic} record type {record_type}: unknown value version {version}"
            )
        decoded_value, _ = read_entity(value_type, value, 2)
        return CoordinatorRecord(decoded_key, decoded_value)
