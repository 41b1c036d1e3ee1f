"""What an I/O error does to the storage engine, written once: ``with disk_errors(...)``.

An ``OSError`` from the disk (a failed write, fsync, rename, open) means the disk holding the log
can no longer be trusted, as in Kafka's ``LogDirFailureChannel``: it is *recorded* (a log goes
offline and tells the log manager, which takes the whole log dir offline; or the manager marks a
log dir offline itself) and, where the caller expects an answer, *raised* as
``KafkaStorageError`` (KAFKA_STORAGE_ERROR on the wire) chained to the ``OSError``. Every
handler of the engine is one ``with disk_errors(record, ...)`` block, its options saying what
differs::

    with disk_errors(self.report_io_error, raise_as=f"I/O error in {self.directory}"):
        segment.rename_with_suffix(DELETED_SUFFIX)

In this order, for an ``OSError`` raised in the block (nothing else is caught):

1. ``cleanup()``, if given: release what the block held (descriptors, a checkpoint file).
2. ``record(error)`` unless ``counts(error)`` says the error is not the disk's (too many open
   files, a directory deleted on purpose meanwhile).
3. ``raise KafkaStorageError(f"{raise_as}: {error}") from error`` if ``raise_as`` is given
   (a string, or a function making it, called only on error); else the error is swallowed and
   the code after the block runs (background work: the log is offline, nobody waits).

Stateless: one instance per block, any thread. A plain class rather than a generator-based
context manager, because an append enters one on the event loop for every record set.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from odradek.errors import KafkaStorageError

__all__ = ["disk_errors"]


class disk_errors:  # noqa: N801 - used as a context manager, named as one
    """Record (and optionally raise as ``KafkaStorageError``) an ``OSError`` from the block."""

    __slots__ = ("_cleanup", "_counts", "_raise_as", "_record")

    def __init__(
        self,
        record: Callable[[OSError], object],
        *,
        raise_as: str | Callable[[], str] | None = None,
        cleanup: Callable[[], object] | None = None,
        counts: Callable[[OSError], bool] | None = None,
    ):
        self._record = record
        self._raise_as = raise_as
        self._cleanup = cleanup
        self._counts = counts

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if not isinstance(error, OSError):
            return False  # no error, or not an I/O error: it propagates as it is
        if self._cleanup is not None:
            self._cleanup()
        if self._counts is None or self._counts(error):
            self._record(error)
        if self._raise_as is None:
            return True
        message = self._raise_as if isinstance(self._raise_as, str) else self._raise_as()
        raise KafkaStorageError(f"{message}: {error}") from error
