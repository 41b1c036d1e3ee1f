"""Threads for the broker's work that must not run on its event loop.

The event loop serves every connection; anything that takes milliseconds there (validating a
large or compressed record set, re-encoding it for ``compression.type``) delays every other
client by as much. Such work runs here, on a small fixed pool of threads, and the request that
needs it awaits the result. The code it runs is thread-safe by contract (``Log.validate`` is a
pure function of bytes, configuration and time); the CRC32C, the codecs and the record walker
release the GIL, so on a machine with more than one core validation runs beside the loop.

Bounds: ``VALIDATION_THREADS`` threads, and at most ``VALIDATION_QUEUE_MAX`` jobs submitted and
not finished (a request past that waits its turn on the loop, without a thread). What is below
``OFFLOAD_MIN_BYTES`` is validated inline: handing it to a thread costs more than the work.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

VALIDATION_THREADS = 2
VALIDATION_QUEUE_MAX = 64
OFFLOAD_MIN_BYTES = 64 * 1024


class Workers:
    """The broker's worker pools; created on the event loop, shut down with the broker."""

    def __init__(
        self,
        *,
        validation_threads: int = VALIDATION_THREADS,
        validation_queue_max: int = VALIDATION_QUEUE_MAX,
        offload_min_bytes: int = OFFLOAD_MIN_BYTES,
    ):
        self.offload_min_bytes = offload_min_bytes
        self._validation = ThreadPoolExecutor(
            max_workers=validation_threads, thread_name_prefix="odradek-validation"
        )
        self._validation_slots = asyncio.Semaphore(validation_queue_max)

    async def validate(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Run ``fn(*args, **kwargs)`` on a validation thread and return its result."""
        async with self._validation_slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._validation, functools.partial(fn, *args, **kwargs)
            )

    def shutdown(self) -> None:
        self._validation.shutdown(wait=True, cancel_futures=True)
