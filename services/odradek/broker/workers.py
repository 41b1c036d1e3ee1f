"""Threads for the broker's work that must not run on its event loop.

The event loop serves every connection; anything that takes milliseconds there (validating a
large or compressed record set, re-encoding it for ``compression.type``) delays every other
client by as much. Such work runs here, on a small fixed pool of threads, and the request that
needs it awaits the result. The code it runs is thread-safe by contract (``Log.validate`` is a
pure function of bytes, configuration and time); the CRC32C, the codecs and the record walker
release the GIL, so on a machine with more than one core validation runs beside the loop.

Bounds: ``VALIDATION_THREADS`` threads, and at most ``VALIDATION_QUEUE_MAX`` jobs submitted and
not finished (a request past that waits its turn on the loop, without a thread).

What runs where (``must_offload``), from figures measured on the 2-vCPU development VM
(docs/benchmarks.md, "Validation on the produce path"): a hop to a thread and back costs about
50-130 µs, while validating an uncompressed record set costs about 8 µs up to 64 KiB and 80 µs
for 1 MiB (CRC32C and the record walk). So:

- uncompressed record sets below ``OFFLOAD_MIN_BYTES`` (2 MiB) are validated inline: up to
  64 KiB the hop would cost ten times the work, and a producer's usual 1 MB request costs less
  to validate (80 µs) than to hand over: with the threshold at 64 KiB, a broker replaying
  identical 1 MB produce requests spent about 100 µs more CPU per request than before records
  were checked at all, and about the same with it at 2 MiB (docs/benchmarks.md). The write of
  such a record set, which stays on the loop, costs four times its validation anyway;
- a record set holding a compressed batch goes to a thread if it is ``COMPRESSED_INLINE_MAX_BYTES``
  or larger; a smaller one is first validated on the loop with its decompression bounded by
  ``INLINE_DECOMPRESSED_MAX_BYTES`` (1 MiB, under a millisecond), and only one that expands past
  that (a bomb, or very compressible records) is validated again on a thread with the real
  limit: its cost is unknown until it is decompressed (a 1 KiB batch may expand to the 64 MiB
  limit), but handing every small batch to a thread cost more than decompressing it (16 KiB lz4
  batches: about 7 µs to decompress, 50-130 µs for the hop);
- so does every record set for a topic whose ``compression.type`` makes the broker re-encode;
- and any record set of more than ``INLINE_BATCHES_MAX`` batches, rather than reading all of
  their headers on the loop to find a codec.

Writing a validated record set into the page cache runs on a writer thread too once it reaches
``WRITE_OFFLOAD_MIN_BYTES``: the first write of 64 MiB to a fresh file region took 90-190 ms on
the VM (pages to allocate), a stall for everyone; 1 MiB takes about 0.4 ms, less than the
thread hop is worth. ``Partition`` keeps the appends of one partition in order around it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from odradek.config.topic import TopicConfig
from odradek.storage.batch import ATTRIBUTES_OFFSET, COMPRESSION_MASK, HEADER_SIZE, read_prefix

T = TypeVar("T")

VALIDATION_THREADS = 2
VALIDATION_QUEUE_MAX = 64
OFFLOAD_MIN_BYTES = 2 * 1024 * 1024
INLINE_BATCHES_MAX = 16
# A compressed record set smaller than this is first validated on the loop, with its
# decompression bounded by INLINE_DECOMPRESSED_MAX_BYTES; past that, on a thread, in full.
COMPRESSED_INLINE_MAX_BYTES = 64 * 1024
INLINE_DECOMPRESSED_MAX_BYTES = 1024 * 1024
WRITER_THREADS = 2
WRITE_OFFLOAD_MIN_BYTES = 4 * 1024 * 1024


class Placement(enum.Enum):
    """Where a record set is validated (``Workers.placement``)."""

    INLINE = "inline"  # on the event loop: cheap and bounded
    INLINE_BOUNDED = "inline, bounded"  # on the loop while it decompresses little, else a thread
    THREAD = "thread"  # on a validation thread


class Workers:
    """The broker's worker pools; created on the event loop, shut down with the broker."""

    def __init__(
        self,
        *,
        validation_threads: int = VALIDATION_THREADS,
        validation_queue_max: int = VALIDATION_QUEUE_MAX,
        offload_min_bytes: int = OFFLOAD_MIN_BYTES,
        write_offload_min_bytes: int = WRITE_OFFLOAD_MIN_BYTES,
    ):
        self.offload_min_bytes = offload_min_bytes
        self.write_offload_min_bytes = write_offload_min_bytes
        self._writers = ThreadPoolExecutor(
            max_workers=WRITER_THREADS, thread_name_prefix="odradek-append-write"
        )
        self._writes: set[Future[object]] = set()
        self._validation = ThreadPoolExecutor(
            max_workers=validation_threads, thread_name_prefix="odradek-validation"
        )
        self._validation_slots = asyncio.Semaphore(validation_queue_max)

    def placement(self, records: bytes | memoryview, config: TopicConfig) -> Placement:
        """Where validating ``records`` for a topic with ``config`` belongs (module docstring)."""
        if len(records) >= self.offload_min_bytes or config.compression_type != "producer":
            return Placement.THREAD
        position = 0
        for _ in range(INLINE_BATCHES_MAX):
            if len(records) - position < HEADER_SIZE:
                return Placement.INLINE  # not a whole batch: validation refuses it at once
            if records[position + ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK:
                if len(records) < COMPRESSED_INLINE_MAX_BYTES:
                    return Placement.INLINE_BOUNDED
                return Placement.THREAD
            _, size = read_prefix(records, position)
            if size <= 0:
                return Placement.INLINE
            position += size
            if position >= len(records):
                return Placement.INLINE
        return Placement.THREAD

    def must_offload(self, records: bytes | memoryview, config: TopicConfig) -> bool:
        """Whether validating ``records`` goes straight to a thread."""
        return self.placement(records, config) is Placement.THREAD

    async def validate(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Run ``fn(*args, **kwargs)`` on a validation thread and return its result."""
        async with self._validation_slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._validation, functools.partial(fn, *args, **kwargs)
            )

    async def write(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` (an append's write) on a writer thread and return its result."""
        future = self._writers.submit(fn, *args)
        self._writes.add(future)
        future.add_done_callback(self._writes.discard)
        return await asyncio.wrap_future(future)

    def wait_for_writes(self) -> None:
        """Block until every submitted write has finished (shutdown only)."""
        concurrent.futures.wait(list(self._writes))

    def shutdown(self) -> None:
        self._validation.shutdown(wait=True, cancel_futures=True)
        self._writers.shutdown(wait=True)
