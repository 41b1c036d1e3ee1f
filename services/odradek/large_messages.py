"""Large requests decoded, and their answers encoded, off the event loop.

The protocol layer (``protocol.codec``) is pure Python: decoding a 1 MB DescribeGroups request
of a million empty group ids takes about 0.2 s, encoding the answer longer, and done on the
event loop that would stall every other client of the process for as long. A request frame of
``OFF_LOOP_MIN_BYTES`` or more is therefore decoded on a codec thread, and its answer encoded
there too; a smaller one stays on the loop (the hop to a thread and back costs 50-130 µs,
more than decoding a usual request). The codec threads hold the GIL while they work, but
Python hands it back to the loop's thread every switch interval (5 ms), so the loop keeps
running (measured: 16 ms worst lag while a thread decoded a million group ids).

Produce requests are left alone: their record sets are views of the frame, decoded in
microseconds whatever their size (``broker.workers`` validates large ones off the loop).

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
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from odradek.protocol.apis import ApiKey

__all__ = [
    "CODEC_THREADS",
    "OFF_LOOP_MIN_BYTES",
    "freeze_long_lived_objects",
    "off_loop",
    "should_offload",
]

T = TypeVar("T")

OFF_LOOP_MIN_BYTES = 64 * 1024  # a request frame this large is decoded and answered on a thread
CODEC_THREADS = 2

_pool: ThreadPoolExecutor | None = None


def should_offload(frame_bytes: int, api_key: int) -> bool:
    """Whether a request of ``frame_bytes`` to ``api_key`` is decoded and encoded off the loop."""
    return frame_bytes >= OFF_LOOP_MIN_BYTES and api_key != ApiKey.PRODUCE  # see the module


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
