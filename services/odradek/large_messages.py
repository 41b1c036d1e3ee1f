"""Large requests decoded, and their answers encoded, off the event loop.

The protocol layer (``protocol.codec``) is pure Python: decoding a 1 MB DescribeGroups request
of a million empty group ids takes about 0.2 s, encoding the answer longer, and done on the
event loop that would stall every other client of the process for as long. A request frame of
``OFF_LOOP_MIN_BYTES`` or more is therefore decoded on a codec thread, and its answer encoded
there too; a smaller one stays on the loop (the hop to a thread and back costs 50-130 µs,
more than decoding a usual request). The codec threads hold the GIL while they work, but
Python hands it back to the loop's thread every switch interval (5 ms), so the loop keeps
running (measured: 16 ms worst lag while a thread decoded a million group ids).

Produce requests are left alone when they carry few partitions: their record sets are views
of the frame, decoded in microseconds whatever their size (``broker.workers`` validates large
ones off the loop), and the data path keeps its latency. What costs is the number of elements:
1 MB of 333,000 empty topics took 1.4 s to decode on the loop (issue 23). So a large Produce
frame whose first arrays (topics, and the first topic's partitions) hold
``PRODUCE_OFF_LOOP_MIN_ELEMENTS`` or more is decoded on a thread too (``produce_elements``
reads those two lengths from the frame, a few bytes, without decoding it).

At most ``CODEC_THREADS`` threads, shared by the whole process; a request that finds them busy
waits for one (without holding the loop). Codec functions are pure, safe from any thread.
Used by the broker's and the controller's listeners.

Garbage collection: a large request is millions of new objects, and the collector's full
collections, which it triggers as they pile up, walk every object the process holds, holding
the GIL (and so the loop) throughout, whichever thread allocated. With the 2 million objects of
a running service that was 313 ms for one 1 MB ListPartitionReassignments decoded on a thread.
``freeze_long_lived_objects`` (``gc.freeze``), called once a service has started, moves what it
holds by then (modules, schemas, configuration, loaded logs) out of the collector's view: 23 ms.
Those objects stay alive for the life of the process, as they would anyway.

That leaves the request's own objects: a full collection in the middle of one walks them all
(AlterConfigs of 142,000 resources: a round trip of another client 240 ms, and 3.97 s to answer
it). ``full_collections_deferred`` holds a large request's decoding, handling and encoding: while
one is in flight only the young generations are collected (the third generation's threshold is
set out of reach; objects still age into it), and once none is the thresholds are restored, so
the next full collection comes when the request's objects are already freed (by their reference
counts: a decoded request is a tree, not a cycle). The same request: 39 ms, 2.9 s. What is
bounded: cyclic garbage made meanwhile waits at most ``FULL_COLLECTION_DEFER_MAX_S``: requests
that overlap for longer (a client sending large requests back to back) get the usual full
collections again until none is in flight. Event loop only (a counter, not thread-safe); the
codec threads only allocate.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import InvalidRequestError
from odradek.protocol.header import parse_request_header

__all__ = [
    "CODEC_THREADS",
    "FULL_COLLECTION_DEFER_MAX_S",
    "OFF_LOOP_MIN_BYTES",
    "PRODUCE_OFF_LOOP_MIN_ELEMENTS",
    "freeze_long_lived_objects",
    "full_collections_deferred",
    "off_loop",
    "produce_elements",
    "should_offload",
]

T = TypeVar("T")

OFF_LOOP_MIN_BYTES = 64 * 1024  # a request frame this large is decoded and answered on a thread
CODEC_THREADS = 2
FULL_COLLECTION_DEFER_MAX_S = 30.0  # full collections deferred at most this long (the module)
_OUT_OF_REACH = 2**31 - 1  # a third-generation threshold no count reaches

_pool: ThreadPoolExecutor | None = None


PRODUCE_OFF_LOOP_MIN_ELEMENTS = 1000  # topics + the first topic's partitions (see the module)
PRODUCE_FLEXIBLE_VERSION = 9  # Produce v9+: compact strings and arrays


def should_offload(frame: bytes | memoryview, api_key: int) -> bool:
    """Whether the request ``frame`` to ``api_key`` is decoded and encoded off the loop."""
    if len(frame) < OFF_LOOP_MIN_BYTES:
        return False
    if api_key != ApiKey.PRODUCE:
        return True
    return produce_elements(frame) >= PRODUCE_OFF_LOOP_MIN_ELEMENTS


def produce_elements(frame: bytes | memoryview) -> int:
    """A Produce frame's topics plus its first topic's partitions, as the frame says (0 for a
    frame too short or malformed to say: its decoding on the loop refuses it cheaply)."""
    try:
        header = parse_request_header(frame)
        flexible = header.api_version >= PRODUCE_FLEXIBLE_VERSION
        pos = _skip_string(frame, header.size, flexible)  # transactional_id
        pos += 6  # acks (int16), timeout_ms (int32)
        topics, pos = _length(frame, pos, flexible)
        if topics <= 0:
            return 0
        pos = _skip_string(frame, pos, flexible)  # the first topic's name
        partitions, _ = _length(frame, pos, flexible)
        return topics + max(partitions, 0)
    except (InvalidRequestError, ValueError, IndexError):
        return 0


def _length(frame: bytes | memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's (or a compact string's) length at ``pos`` (-1: null), and where its content
    starts: an int32 before flexible versions, an unsigned varint of length + 1 from them."""
    if not flexible:
        return int.from_bytes(frame[pos : pos + 4], "big", signed=True), pos + 4
    value, shift = 0, 0
    for index in range(pos, min(pos + 5, len(frame))):
        byte = frame[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value - 1, index + 1
        shift += 7
    raise ValueError("truncated varint")


def _skip_string(frame: bytes | memoryview, pos: int, flexible: bool) -> int:
    if flexible:
        length, pos = _length(frame, pos, True)
    else:
        length, pos = int.from_bytes(frame[pos : pos + 2], "big", signed=True), pos + 2
    if pos > len(frame):
        raise ValueError("truncated")
    return pos + max(length, 0)


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` on a codec thread."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=CODEC_THREADS, thread_name_prefix="odradek-codec")
    return await asyncio.get_running_loop().run_in_executor(_pool, functools.partial(fn, *args))


def freeze_long_lived_objects() -> None:
    """Collect once, then keep everything alive now out of later collections (the module)."""
    gc.collect()
    gc.freeze()


class _Deferral:
    """The state of ``full_collections_deferred``: large requests in flight, since when."""

    in_flight = 0
    since = 0.0
    threshold: int | None = None  # the third generation's threshold while deferred, to restore


@contextlib.contextmanager
def full_collections_deferred(clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """No full collection while a large request is worked on; see the module."""
    if _Deferral.in_flight == 0:
        young, middle, old = gc.get_threshold()
        _Deferral.since, _Deferral.threshold = clock(), old
        gc.set_threshold(young, middle, _OUT_OF_REACH)
    elif (
        _Deferral.threshold is not None and clock() - _Deferral.since > FULL_COLLECTION_DEFER_MAX_S
    ):
        _restore_threshold()  # overlapping for too long: collections as usual until none is left
    _Deferral.in_flight += 1
    try:
        yield
    finally:
        _Deferral.in_flight -= 1
        if _Deferral.in_flight == 0:
            _restore_threshold()


def _restore_threshold() -> None:
    if _Deferral.threshold is not None:
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, _Deferral.threshold)
        _Deferral.threshold = None
