"""The records of ``__consumer_offsets`` (``base`` has the framing); importing this package
registers every record type (``offsets``, ``classic``, ``consumer``)."""

from odradek.groups.records import consumer as consumer  # registers record types 3 to 8
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
