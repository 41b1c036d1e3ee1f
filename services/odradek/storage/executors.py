"""The threads storage runs its slow file work on, so the thread that appends never waits for it.

The broker appends on its event loop. Three kinds of work there could take milliseconds to
seconds on a loaded disk, and each has a pool here, owned by the ``LogManager``:

- ``flush``: the fsync that ``flush.messages`` asks for before an append is acknowledged
  (``Log.flush_in_background``). ``FLUSH_THREADS`` threads. A log keeps at most one flush
  queued (later appends join it), so the queue holds at most one job per log.
- ``housekeeping``: one thread, so jobs run in the order they were submitted. It writes the
  producer-state snapshot taken at each roll, and closes and removes the files of a deleted
  partition. FIFO is the ordering these need: a partition's directory is removed only after the
  snapshot writes submitted before its deletion have run (and found the log gone; see
  ``producer_state``). Its queue grows by one job per roll and per deleted partition.

Both are ``concurrent.futures`` executors: storage knows nothing of asyncio; the broker awaits a
future with ``asyncio.wrap_future``. ``shutdown`` stops ``flush`` first (its fsyncs may be what
an acknowledgement waits for), then ``housekeeping``, each after the jobs already submitted have
run: none is cancelled, since a snapshot or a deletion left half done is worse than a slower
stop. The log manager writes the clean-shutdown marker only after that.

``StorageExecutors.inline()`` runs every job on the calling thread, at once: for tools and tests
that open a ``Log`` without a manager.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

FLUSH_THREADS = 4  # fsyncs wait on the disk, not the CPU: a few run side by side
HOUSEKEEPING_THREADS = 1  # one, so that jobs run in submission order


class InlineExecutor(Executor):
    """Runs each job on the submitting thread before ``submit`` returns."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # the future carries it, as a pool thread's would
            future.set_exception(e)
        return future


class StorageExecutors:
    """The ``flush`` and ``housekeeping`` executors; see the module docstring."""

    def __init__(self, flush: Executor, housekeeping: Executor):
        self.flush = flush
        self.housekeeping = housekeeping

    @classmethod
    def threads(cls) -> StorageExecutors:
        return cls(
            ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="odradek-flush"),
            ThreadPoolExecutor(HOUSEKEEPING_THREADS, thread_name_prefix="odradek-housekeeping"),
        )

    @classmethod
    def inline(cls) -> StorageExecutors:
        return cls(InlineExecutor(), InlineExecutor())

    def shutdown(self) -> None:
        """Run every job already submitted, then stop: flushes first, then housekeeping."""
        self.flush.shutdown(wait=True)
        self.housekeeping.shutdown(wait=True)
