"""Consumer groups' offsets as the admin tools compute them (pure): lag, the targets of a reset,
and the members' assignments decoded from DescribeGroups.

- ``lag``: log end offset minus committed offset, when both are known (kafka-consumer-groups'
  ``LAG``: "-" otherwise).
- ``ResetSpec`` / ``reset_target``: Kafka's ``--to-earliest``, ``--to-latest``,
  ``--to-datetime``, ``--shift-by``, ``--to-offset``. As Kafka's tool, every target is clamped
  into ``[log start offset, log end offset]``; a datetime after the last record resets to the
  log end offset. A shift (and ``--to-current``, a shift by 0) moves from the committed offset:
  a partition without one has nothing to shift from and is left out (reported, not reset).
  ``--by-duration`` is a datetime (now minus the duration, ``parse_duration``).
- ``decode_assignment``: Kafka's ``ConsumerProtocolAssignment`` (versions 0-3 share the prefix
  read here: int16 version, then ``[topic string, [partition int32]]``), what a classic
  consumer's SyncGroup assignment holds and what consumer-protocol groups describe as. Bounded
  reads: a malformed assignment is ``ValueError``, never an over-read.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime

from odradek.common.partitions import TopicPartition

__all__ = [
    "ResetKind",
    "ResetSpec",
    "OffsetBounds",
    "lag",
    "reset_target",
    "parse_datetime",
    "parse_duration",
    "decode_assignment",
    "CONSUMER_PROTOCOL_TYPE",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
ASSIGNED_TOPICS_MAX = 100_000  # a bound on counts read from an untrusted assignment


class ResetKind(enum.Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    DATETIME = "to-datetime"
    SHIFT_BY = "shift-by"
    OFFSET = "to-offset"
    CURRENT = "to-current"


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """One of Kafka's reset scenarios; ``value`` is the shift, the offset, or epoch ms."""

    kind: ResetKind
    value: int = 0


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """What ListOffsets says of a partition: its first offset, its end, and (for a datetime
    reset) the first offset at or after the time, None when no record is that recent."""

    log_start_offset: int
    log_end_offset: int
    at_time: int | None = None


def lag(committed: int | None, log_end_offset: int | None) -> int | None:
    if committed is None or log_end_offset is None or committed < 0:
        return None
    return max(log_end_offset - committed, 0)


def reset_target(spec: ResetSpec, committed: int | None, bounds: OffsetBounds) -> int | None:
    """The offset ``spec`` resets a partition to; None when it cannot say (a shift from no
    committed offset)."""
    if spec.kind is ResetKind.EARLIEST:
        target = bounds.log_start_offset
    elif spec.kind is ResetKind.LATEST:
        target = bounds.log_end_offset
    elif spec.kind is ResetKind.DATETIME:
        target = bounds.log_end_offset if bounds.at_time is None else bounds.at_time
    elif spec.kind is ResetKind.OFFSET:
        target = spec.value
    else:  # SHIFT_BY, CURRENT (a shift by 0: the committed offset, clamped into the log)
        if committed is None or committed < 0:
            return None
        target = committed + (spec.value if spec.kind is ResetKind.SHIFT_BY else 0)
    return min(max(target, bounds.log_start_offset), bounds.log_end_offset)


def parse_datetime(text: str) -> int:
    """Kafka's ``--to-datetime`` format, ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone
    (``Z``, ``+hh:mm``; none means UTC here, where Kafka takes the local zone): epoch ms."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:mm:SS.sss[+hh:mm]") from e
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)


def parse_duration(text: str) -> int:
    """Kafka's ``--by-duration`` format, ISO-8601 ``PnDTnHnMnS`` (``P1DT2H``, ``PT30M``): ms."""
    match = _DURATION.fullmatch(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"--by-duration {text!r} is not PnDTnHnMnS (P1DT2H, PT30M)")
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    seconds = parts["days"] * 86400 + parts["hours"] * 3600 + parts["minutes"] * 60
    return int((seconds + parts["seconds"]) * 1000)


class _Reader:
    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.position = 0

    def take(self, fmt: struct.Struct) -> int:
        if self.position + fmt.size > len(self.data):
            raise ValueError("the assignment ends early")
        (value,) = fmt.unpack_from(self.data, self.position)
        self.position += fmt.size
        return value

    def string(self) -> str:
        length = self.take(_INT16)
        if length < 0 or self.position + length > len(self.data):
            raise ValueError("the assignment has a bad topic name")
        text = bytes(self.data[self.position : self.position + length]).decode()
        self.position += length
        return text

    def count(self) -> int:
        n = self.take(_INT32)
        if n < 0:
            return 0
        if n > ASSIGNED_TOPICS_MAX:
            raise ValueError(f"the assignment claims {n} entries")
        return n


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ``ConsumerProtocolAssignment``; () for an empty assignment."""
    if not data:
        return ()
    reader = _Reader(data)
    version = reader.take(_INT16)
    if version < 0:
        raise ValueError(f"assignment version {version}")
    assigned = []
    for _ in range(reader.count()):
        topic = reader.string()
        for _ in range(reader.count()):
            assigned.append(TopicPartition(topic, reader.take(_INT32)))
    return tuple(sorted(assigned))
