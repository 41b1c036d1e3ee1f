"""Source offsets: where they are stored, how tasks read them, and which ones may be committed.

``OffsetStore`` is the protocol a ``Worker`` writes acknowledged source offsets to:

- ``get(connector, partitions)`` -> ``{partition_key(p): offset}`` for the partitions that have one;
- ``put(connector, offsets)``: ``offsets`` is a sequence of ``(partition, offset | None)`` pairs
  (``None`` resets the partition); durable when it returns, bounded by ``offset.flush.timeout.ms``
  (``OffsetStoreError`` otherwise);
- ``all(connector)`` -> ``[(partition, offset)]``, every stored partition (KIP-875's GET).

Partitions are JSON-able dicts, compared with ``storage_format.partition_key`` (order-free).
Standalone mode uses ``FileOffsetStore``; distributed mode stores them in the offset topic.

``FileOffsetStore`` file format: one JSON object ``{"version": 1, "offsets": [[key, value], ...]}``
whose keys and values are the offset topic's key and value as text (``["conn",{"file":"/x"}]``,
``{"position":42}``), so a file's content can be replayed into an offset topic. Every ``put``
rewrites it atomically: a temporary file in the same directory, fsync, rename, fsync of the
directory; a crash leaves the old or the new file, never a mix. Thread-safe (one lock).

``SubmittedOffsets`` is one source task's bookkeeping (Kafka's ``SubmittedRecords``): records are
submitted in poll order, acknowledged in any order, and a partition's offset becomes committable
only when every record of that partition submitted before it has been acknowledged. Used by the
task's own thread only (delivery callbacks run inside ``producer.poll``, on that thread).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from odradek.connect import storage_format as sf
from odradek.connect.storage_format import PartitionKey, partition_key

FILE_FORMAT_VERSION = 1

OffsetPairs = Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]


class OffsetStoreError(Exception):
    """Offsets could not be read or made durable in time."""


class OffsetStore(Protocol):
    def get(
        self, connector: str, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[PartitionKey, dict[str, Any]]: ...

    def put(self, connector: str, offsets: OffsetPairs) -> None: ...

    def all(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]: ...


class MemoryOffsetStore:
    """Offsets in a dict: tests, and the base of ``FileOffsetStore``. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (connector, partition_key) -> (partition, offset)
        self._data: dict[tuple[str, PartitionKey], tuple[dict[str, Any], dict[str, Any]]] = {}

    def get(
        self, connector: str, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[PartitionKey, dict[str, Any]]:
        with self._lock:
            found = {}
            for p in partitions:
                k = partition_key(p)
                entry = self._data.get((connector, k))
                if entry is not None:
                    found[k] = dict(entry[1])
            return found

    def all(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        with self._lock:
            return [(dict(p), dict(o)) for (c, _), (p, o) in self._data.items() if c == connector]

    def put(self, connector: str, offsets: OffsetPairs) -> None:
        with self._lock:
            before = dict(self._data)
            self._apply(connector, offsets)
            try:
                self._persist()
            except BaseException:
                self._data = before
                raise

    def _apply(self, connector: str, offsets: OffsetPairs) -> None:
        for partition, offset in offsets:
            k = (connector, partition_key(partition))
            if offset is None:
                self._data.pop(k, None)
            else:
                self._data[k] = (dict(partition), dict(offset))

    def _persist(self) -> None:
        pass


class FileOffsetStore(MemoryOffsetStore):
    """Standalone mode's store: ``offset.storage.file.filename`` (format in the module doc)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = os.path.abspath(path)
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        try:
            body = json.loads(raw)
            if body.get("version") != FILE_FORMAT_VERSION:
                raise OffsetStoreError(f"{self.path}: unknown version {body.get('version')!r}")
            for key, value in body["offsets"]:
                connector, partition = sf.parse_offset_key(key.encode())
                offset = sf.parse_offset_value(value.encode())
                if offset is not None:
                    self._data[(connector, partition_key(partition))] = (partition, offset)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise OffsetStoreError(f"{self.path}: not an offsets file: {e}") from e

    def _persist(self) -> None:
        entries = [
            [sf.offset_key(c, p).decode(), sf.offset_value(o).decode()]  # type: ignore[union-attr]
            for (c, _), (p, o) in self._data.items()
        ]
        data = json.dumps({"version": FILE_FORMAT_VERSION, "offsets": entries}).encode()
        directory = os.path.dirname(self.path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".offsets-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class StoreOffsetReader:
    """The ``OffsetStorageReader`` a source task gets: reads ``connector``'s committed offsets."""

    def __init__(self, store: OffsetStore, connector: str):
        self._store = store
        self._connector = connector

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._store.get(self._connector, [partition]).get(partition_key(partition))

    def offsets(
        self, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[PartitionKey, dict[str, Any]]:
        return self._store.get(self._connector, partitions)


class Submitted:
    """One submitted record: its partition and offset, acknowledged or not."""

    __slots__ = ("key", "partition", "offset", "acked")

    def __init__(self, key: PartitionKey, partition: Mapping[str, Any], offset: Mapping[str, Any]):
        self.key = key
        self.partition = partition
        self.offset = offset
        self.acked = False


class SubmittedOffsets:
    """Offsets of submitted records, committable per partition once acknowledged in order."""

    def __init__(self) -> None:
        self._pending: dict[PartitionKey, collections.deque[Submitted]] = {}
        self._count = 0

    def submit(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> Submitted:
        key = partition_key(partition)
        s = Submitted(key, partition, offset)
        self._pending.setdefault(key, collections.deque()).append(s)
        self._count += 1
        return s

    def ack(self, submitted: Submitted) -> None:
        submitted.acked = True

    @property
    def in_flight(self) -> int:
        """Submitted records not yet taken by ``committable`` (acknowledged or not)."""
        return self._count

    def committable(self) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """Each partition's latest offset among its acknowledged prefix; removes that prefix."""
        result = []
        for key in list(self._pending):
            queue = self._pending[key]
            last: Submitted | None = None
            while queue and queue[0].acked:
                last = queue.popleft()
                self._count -= 1
            if last is not None:
                result.append((last.partition, last.offset))
            if not queue:
                del self._pending[key]
        return result
