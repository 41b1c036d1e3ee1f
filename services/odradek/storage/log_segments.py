"""The segments a reader of one log sees: an immutable, sorted snapshot (Kafka's ``LogSegments``).

A ``LogSegments`` is a value: the log's segments oldest first, with their base offsets for
bisecting. Invariants (the log keeps them when it builds a new value): base offsets strictly
increase, there is at least one segment, and only the last one (``active``) is written. A log
never changes a published value: every change of the segment list (a roll, retention, a
truncation, a cleaner's swap) publishes a new one under the log's lock, so any thread takes one
consistent snapshot without locking, and what it reads stays a consistent (if stale) picture.

The header walks here (``headers_from``, ``replay_from``, ``batch_holding``) read a segment's
file through its own descriptor: the appending thread's, or a loader's before the log exists.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from odradek.storage.batch import BatchHeader
from odradek.storage.control import EndTxnMarker, marker_or_none
from odradek.storage.segment import LogSegment

__all__ = ["LogSegments"]


@dataclass(frozen=True, slots=True)
class LogSegments:
    """An immutable snapshot of the segment list, with base offsets for bisecting."""

    segments: tuple[LogSegment, ...]
    base_offsets: tuple[int, ...] = field(default=())

    @classmethod
    def of(cls, segments: list[LogSegment] | tuple[LogSegment, ...]) -> LogSegments:
        ordered = tuple(segments)
        return cls(ordered, tuple(s.base_offset for s in ordered))

    def floor_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (the first one if none does)."""
        return max(bisect.bisect_right(self.base_offsets, offset) - 1, 0)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    def headers_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """``(base_offset, header)`` of every batch holding offsets >= ``offset``."""
        for segment in self.segments[self.floor_index(offset) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                for _, header in segment.batches_from(found[0]):
                    yield header.base_offset, header

    def replay_from(self, offset: int) -> Iterator[tuple[int, BatchHeader, EndTxnMarker | None]]:
        """``headers_from`` with each control batch's marker, for the producer state."""
        for segment in self.segments[self.floor_index(offset) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                for position, header in segment.batches_from(found[0]):
                    marker = None
                    if header.is_control:
                        marker = marker_or_none(header, segment.read_batch_bytes(position, header))
                    yield header.base_offset, header, marker

    def batch_holding(self, offset: int) -> BatchHeader | None:
        """The header of the batch holding ``offset`` (or the next one, past a gap)."""
        return next((header for _, header in self.headers_from(offset)), None)
