"""The records of ``__consumer_offsets`` (``base`` has the framing); importing this package
registers every record type (``offsets``, ``classic``, ``consumer``)."""

from odradek.groups.records import classic as classic  # registers GroupMetadata (type 2)
from odradek.groups.records import consumer as consumer  # registers record types 3 to 8
from odradek.groups.records import offsets as offsets  # registers OffsetCommit records
from odradek.groups.records.base import (
    CoordinatorRecord,
    UnknownRecordError,
    decode,
    encode_key,
    encode_value,
    register,
)

__all__ = [
    "CoordinatorRecord",
    "UnknownRecordError",
    "decode",
    "encode_key",
    "encode_value",
    "register",
]
