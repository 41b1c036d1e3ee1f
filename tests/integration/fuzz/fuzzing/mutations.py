"""Mutations of an encoded request, at the field level and at the byte level.

``field_mutations`` rewrites one to three of the frame's slots (``frames.Slot``): an integer
set to a bound of its width, a length or array count set to -1, -2, 0, off by one, doubled,
32767 or 2^31-1; or adds a tagged field the broker does not know to the body's own tagged
fields. ``byte_mutations`` flips bits, overwrites bytes, cuts the tail, inserts bytes, repeats a
segment, or puts the header of another served API or version over the body. Both return the
new bytes and what they did, for the report of a case. The size prefix is the caller's.

Pure functions of their draws.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from hypothesis import strategies as st

from fuzzing.frames import INT_RANGES, Frame, Slot, encode_length, encode_uvarint

__all__ = ["field_mutations", "byte_mutations"]

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


def _weighted(*choices: object) -> st.SearchStrategy[object]:
    """One of ``choices``; a value listed twice comes up twice as often."""
    return st.sampled_from(choices)


def _current(frame: Frame, slot: Slot) -> int:
    if slot.encoding == "uvarint":
        value, shift = 0, 0
        for byte in frame.data[slot.offset : slot.offset + slot.width]:
            value |= (byte & 0x7F) << shift
            shift += 7
        return value - 1 if slot.role in ("length", "count") else value
    return struct.unpack_from(">" + slot.encoding, frame.data, slot.offset)[0]


@st.composite
def field_mutations(draw: st.DrawFn, frame: Frame) -> tuple[bytes, list[str]]:
    """The frame with one to three slots rewritten (from the last one backwards, so offsets
    stay true), or an unknown tagged field added; and what was done."""
    data, done = frame.data, []
    candidates = [s for s in frame.slots if not s.path.startswith("header.request_api")]
    picked = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))
    for slot in sorted(picked, key=lambda s: s.offset, reverse=True):
        current = _current(frame, slot)
        if slot.role == "value":
            low, high = INT_RANGES[slot.encoding]
            value = draw(_weighted(low, high, -1, 0, low + 1, high - 1))
        else:
            value = draw(
                _weighted(
                    -1,
                    -2,
                    0,
                    current - 1,
                    current + 1,
                    2 * current + 3,
                    32767,
                    INT32_MAX,
                    INT32_MIN,
                )
            )
        data = data[: slot.offset] + encode_length(slot, value) + data[slot.offset + slot.width :]
        done.append(f"{slot.path}: {current} -> {value}")
    tags = [s for s in frame.slots if s.role == "tags" and s.path == "body.<tags>"]
    if tags and draw(st.booleans()) and data == frame.data:
        slot = tags[0]  # the body's own tagged fields close the frame: append one more
        count = _current(frame, slot)
        tag = draw(_weighted(0, 1, 7, 10_000, 2**31))
        value = draw(st.binary(max_size=8))
        data = (
            data[: slot.offset]
            + encode_uvarint(count + 1)
            + data[slot.offset + slot.width :]
            + encode_uvarint(tag)
            + encode_uvarint(len(value))
            + value
        )
        done = [f"unknown tagged field {tag} ({len(value)} bytes)"]
    return data, done


@st.composite
def byte_mutations(
    draw: st.DrawFn, data: bytes, served: Mapping[int, tuple[int, int]]
) -> tuple[bytes, list[str]]:
    """``data`` with one or two byte-level changes; and what was done."""
    buffer, done = bytearray(data), []
    for _ in range(draw(st.integers(1, 2))):
        if not buffer:
            break
        op = draw(_weighted("flip", "flip", "set", "truncate", "insert", "duplicate", "header"))
        at = draw(st.integers(0, len(buffer) - 1))
        if op == "flip":
            buffer[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            buffer[at] = draw(_weighted(0x00, 0xFF, 0x7F, 0x80, 0x01))
        elif op == "truncate":
            del buffer[at:]
        elif op == "insert":
            buffer[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "duplicate":
            length = draw(st.integers(1, 64))
            buffer[at:at] = buffer[at : at + length]
        else:  # the header of another served API or version over this body
            api_key = draw(st.sampled_from(sorted(served)))
            low, high = served[api_key]
            version = draw(st.integers(low - 1, high + 1))
            if len(buffer) >= 4:
                struct.pack_into(">hh", buffer, 0, api_key, version)
            at = f"api {api_key} v{version}"
        done.append(f"{op} at {at}")
    return bytes(buffer), done
