"""The framing of ``__consumer_offsets`` records: a versioned key and a versioned value.

Kafka's coordinator records (``group-coordinator/src/main/resources/common/message/*Key.json``
and ``*Value.json``): the record key is an int16 *record type* then the key struct, the value an
int16 *version* then the value struct, or null (a tombstone: the key's entity is gone, and
compaction will drop it). The record type says which entity a key names:

| type | key | value |
|---:|---|---|
| 0, 1 | OffsetCommitKey (group, topic, partition) | OffsetCommitValue |
| 2 | GroupMetadataKey (classic group) | GroupMetadataValue |
| 3 | ConsumerGroupMetadataKey | ConsumerGroupMetadataValue |
| 4 | ConsumerGroupPartitionMetadataKey | ConsumerGroupPartitionMetadataValue |
| 5 | ConsumerGroupMemberMetadataKey | ConsumerGroupMemberMetadataValue |
| 6 | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMetadataValue |
| 7 | ConsumerGroupTargetAssignmentMemberKey | ConsumerGroupTargetAssignmentMemberValue |
| 8 | ConsumerGroupCurrentMemberAssignmentKey | ConsumerGroupCurrentMemberAssignmentValue |

Keys and values are kio-style dataclasses (as ``protocol.interbroker`` declares its messages:
``kafka_type`` in each field's metadata, ``__flexible__``), encoded by the protocol layer's
writer and decoded by its bounded reader. A key class carries ``__record_type__``; a value class
``__version__``. Odradek writes one version of each value and reads the versions it registers:
the log holds only what Odradek wrote (there is no migration from Kafka's own log files).

``register`` is called once per record type by the modules that declare them
(``groups.records.offsets``, ``.classic``, ``.consumer``); ``encode``/``decode`` serve the runtime.
Pure data; any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from odradek.protocol.reader import MalformedError, read_entity
from odradek.protocol.writer import encode as encode_entity

__all__ = [
    "CoordinatorRecord",
    "UnknownRecordError",
    "register",
    "encode_key",
    "encode_value",
    "decode",
]

_INT16 = struct.Struct(">h")

# record type -> key class; (record type, value version) -> value class
_KEYS: dict[int, type[Any]] = {}
_VALUES: dict[tuple[int, int], type[Any]] = {}


class UnknownRecordError(ValueError):
    """A record of ``__consumer_offsets`` whose type or version this broker does not know."""


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record to write or replayed: ``value`` None is a tombstone."""

    key: Any
    value: Any | None


def register(key_type: type[Any], *value_types: type[Any]) -> None:
    """Make ``key_type`` (and its value versions) known to ``decode``; once per record type."""
    record_type = key_type.__record_type__
    if _KEYS.get(record_type, key_type) is not key_type:
        raise RuntimeError(f"two key classes for record type {record_type}")
    _KEYS[record_type] = key_type
    for value_type in value_types:
        _VALUES[(record_type, value_type.__version__)] = value_type


def encode_key(key: Any) -> bytes:
    return _INT16.pack(type(key).__record_type__) + encode_entity(key)


def encode_value(value: Any | None) -> bytes | None:
    if value is None:
        return None
    return _INT16.pack(type(value).__version__) + encode_entity(value)


def decode(key: bytes | memoryview, value: bytes | memoryview | None) -> CoordinatorRecord:
    """The record a log record holds; ``UnknownRecordError`` or ``MalformedError`` if not."""
    if len(key) < 2:
        raise MalformedError(f"a coordinator record key of {len(key)} bytes")
    (record_type,) = _INT16.unpack_from(key)
    key_type = _KEYS.get(record_type)
    if key_type is None:
        raise UnknownRecordError(f"unknown coordinator record type {record_type}")
    decoded_key, _ = read_entity(key_type, key, 2)
    if value is None:
        return CoordinatorRecord(decoded_key, None)
    if len(value) < 2:
        raise MalformedError(f"a coordinator record value of {len(value)} bytes")
    (version,) = _INT16.unpack_from(value)
    value_type = _VALUES.get((record_type, version))
    if value_type is None:
        raise UnknownRecordError(f"record type {record_type}: unknown value version {version}")
    decoded_value, _ = read_entity(value_type, value, 2)
    return CoordinatorRecord(decoded_key, decoded_value)
