"""The records of ``__consumer_offsets`` (``base`` has the framing); importing this package
registers every record type (``offsets``, ``classic``, ``consumer``)."""

import odradek.groups.records.classic  # noqa: F401  (registers record type 2)
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
