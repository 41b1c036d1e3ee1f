"""The three stores of distributed mode, each a ``KafkaBasedLog`` over one compacted internal
topic, with keys and values in Kafka Connect's formats (``odradek.connect.storage_format``).

- ``ConfigStore`` (``config.storage.topic``, one partition): connector configs, task configs,
  target states and restart requests. Task configs count only once their ``commit-<name>``
  record arrives and every task config it covers was read before it (Kafka writes them
  ``task-<name>-0 .. N-1`` then the commit; a commit with tasks missing leaves the connector
  *inconsistent*: its previous tasks stay until a complete commit). ``snapshot()`` is a
  consistent copy with the offset it was read up to (the config offset the group protocol
  carries).
- ``StatusStore`` (``status.storage.topic``): the worker's ``StatusListener``: each state change
  is written (without waiting: a task thread calls it) with the worker's current generation;
  everyone's entries are read back. An UNASSIGNED entry (a worker that stopped work in a
  rebalance) does not overwrite an entry of another worker with a newer or equal generation: the
  new owner may have written RUNNING first (Kafka's ``putSafe``).
- ``TopicOffsetStore`` (``offset.storage.topic``): the runtime's ``OffsetStore``; ``put`` returns
  once the records are acknowledged (bounded by ``offset.flush.timeout.ms``), ``get``/``all``
  read to the end first. Read ``read_committed``: offsets that exactly-once source tasks
  (KIP-618) write inside their transactions count only once committed.

Thread-safety: each store's state is guarded by one lock; its log's thread applies records,
any thread reads or writes. ``on_change`` callbacks run on the log's thread and must only hand
off (e.g. ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from odradek.connect import storage_format as sf
from odradek.connect.distributed.kafka_log import KafkaBasedLog, KafkaLogError
from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState
from odradek.connect.runtime.offsets import OffsetPairs, OffsetStoreError
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.storage_format import PartitionKey, partition_key
from odradek.connect.worker_config import WorkerConfig

__all__ = ["ConfigSnapshot", "ConfigStore", "StatusStore", "TopicOffsetStore", "StoreError"]

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 30.0
WRITE_TIMEOUT_S = 30.0
START_TIMEOUT_S = 60.0


class StoreError(Exception):
    """A store could not be read or written in time."""


def _log(
    config: WorkerConfig,
    topic_key: str,
    on_record: Callable[[bytes | None, bytes | None, int, int], None],
    *,
    partitions: int,
    read_committed: bool = False,
) -> KafkaBasedLog:
    topic = config.get(topic_key)
    if not topic:
        raise StoreError(f"{topic_key} must be set in distributed mode")
    replication = config.get(topic_key.replace(".topic", ".replication.factor"))
    return KafkaBasedLog(
        topic,
        on_record=on_record,
        consumer_config=config.consumer_config(None),
        producer_config=config.producer_config(),
        admin_config=config.admin_config(),
        partitions=partitions,
        replication_factor=replication,
        read_committed=read_committed,
    )


class _LogStore:
    """What the three stores share: their ``log``, started and stopped with the store, and read
    to its end with the log's error raised again as the store's own (``error``)."""

    log: KafkaBasedLog

    def start(self) -> None:
        self.log.start(START_TIMEOUT_S)

    def stop(self) -> None:
        self.log.stop()

    def _read_log(self, timeout_s: float, error: type[Exception] = StoreError) -> None:
        try:
            self.log.read_to_end(timeout_s)
        except KafkaLogError as e:
            raise error(str(e)) from e


# ------------------------------------------------------------------ config


@dataclass(frozen=True)
class ConfigSnapshot:
    """The config topic as read up to ``offset`` (the next offset to read)."""

    offset: int = 0
    connectors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    target_states: Mapping[str, TargetState] = field(default_factory=dict)
    tasks: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)
    inconsistent: frozenset[str] = frozenset()

    def task_ids(self) -> list[ConnectorTaskId]:
        return [
            ConnectorTaskId(name, i)
            for name, configs in sorted(self.tasks.items())
            if name in self.connectors
            for i in range(len(configs))
        ]

    def target_state(self, name: str) -> TargetState:
        return self.target_states.get(name, TargetState.STARTED)


ConfigChange = Callable[[sf.ConfigRecord], None]


class ConfigStore(_LogStore):
    """See the module docstring."""

    def __init__(self, config: WorkerConfig, on_change: ConfigChange | None = None):
        self._lock = threading.Lock()
        self.on_change = on_change  # set before start() or by the herder once it runs
        self._offset = 0
        self._connectors: dict[str, dict[str, str]] = {}
        self._target_states: dict[str, TargetState] = {}
        self._tasks: dict[str, tuple[dict[str, str], ...]] = {}
        self._pending: dict[str, dict[int, dict[str, str]]] = {}
        self._inconsistent: set[str] = set()
        self.log = _log(config, "config.storage.topic", self._apply, partitions=1)

    def read_to_end(self, timeout_s: float = READ_TIMEOUT_S) -> ConfigSnapshot:
        self._read_log(timeout_s)
        return self.snapshot()

    def snapshot(self) -> ConfigSnapshot:
        with self._lock:
            return ConfigSnapshot(
                offset=self._offset,
                connectors={n: dict(c) for n, c in self._connectors.items()},
                target_states=dict(self._target_states),
                tasks={n: tuple(dict(t) for t in ts) for n, ts in self._tasks.items()},
                inconsistent=frozenset(self._inconsistent),
            )

    # -- writes (each returns once acknowledged; the caller reads to the end to see it) ------

    def _send(self, records: list[tuple[bytes, bytes | None]]) -> None:
        try:
            self.log.send(records, WRITE_TIMEOUT_S)
        except KafkaLogError as e:
            raise StoreError(str(e)) from e

    def put_connector_config(
        self, name: str, props: Mapping[str, str], target: TargetState | None = None
    ) -> None:
        records = []
        if target is not None:  # first, so the connector never starts in the wrong state
            records.append((sf.target_state_key(name), sf.target_state_value(target)))
        records.append((sf.connector_config_key(name), sf.properties_value(props)))
        self._send(records)

    def remove_connector_config(self, name: str) -> None:
        self._send(
            [
                (sf.connector_config_key(name), None),
                (sf.target_state_key(name), None),
            ]
        )

    def put_task_configs(self, name: str, configs: Sequence[Mapping[str, str]]) -> None:
        records = [
            (sf.task_config_key(name, i), sf.properties_value(c)) for i, c in enumerate(configs)
        ]
        records.append((sf.commit_key(name), sf.commit_value(len(configs))))
        self._send(records)

    def put_target_state(self, name: str, state: TargetState) -> None:
        self._send([(sf.target_state_key(name), sf.target_state_value(state))])

    def put_restart_request(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        value = sf.restart_value(include_tasks=include_tasks, only_failed=only_failed)
        self._send([(sf.restart_key(name), value)])

    # -- replay (the log's thread) ---------------------------------------------------------------

    def _apply(self, key: bytes | None, value: bytes | None, _partition: int, offset: int) -> None:
        record: sf.ConfigRecord | None = None
        try:
            record = sf.parse_config_record(key or b"", value)
        except sf.FormatError as e:
            log.warning("config topic offset %d: skipped: %s", offset, e)
        with self._lock:
            self._offset = offset + 1
            if record is not None:
                self._apply_record(record)
        on_change = self.on_change
        if record is not None and on_change is not None:
            on_change(record)

    def _apply_record(self, record: sf.ConfigRecord) -> None:
        if isinstance(record, sf.ConnectorConfigRecord):
            if record.properties is None:
                self._connectors.pop(record.name, None)
                self._tasks.pop(record.name, None)
                self._pending.pop(record.name, None)
                self._inconsistent.discard(record.name)
            else:
                self._connectors[record.name] = record.properties
        elif isinstance(record, sf.TaskConfigRecord):
            if record.properties is not None:
                pending = self._pending.setdefault(record.task_id.connector, {})
                pending[record.task_id.task] = record.properties
        elif isinstance(record, sf.CommitRecord):
            pending = self._pending.pop(record.name, {})
            if record.tasks is None:
                return
            if all(i in pending for i in range(record.tasks)):
                self._tasks[record.name] = tuple(pending[i] for i in range(record.tasks))
                self._inconsistent.discard(record.name)
            else:
                log.warning("connector %s: a task commit with task configs missing", record.name)
                self._inconsistent.add(record.name)
        elif isinstance(record, sf.TargetStateRecord):
            if record.state is None:
                self._target_states.pop(record.name, None)
            else:
                self._target_states[record.name] = record.state


# ------------------------------------------------------------------ status


class StatusStore(_LogStore):
    """See the module docstring. Implements ``odradek.connect.runtime.status.StatusListener``."""

    def __init__(self, config: WorkerConfig, worker_id: str):
        self.worker_id = worker_id
        self.generation = 0
        self._latest = MemoryStatusListener()  # the latest entries read from the topic
        partitions = config.get("status.storage.partitions")
        self.log = _log(config, "status.storage.topic", self._apply, partitions=partitions)

    def read_to_end(self, timeout_s: float = READ_TIMEOUT_S) -> None:
        self._read_log(timeout_s)

    # -- StatusListener (task and connector threads) --------------------------------------------

    def connector(self, name: str, entry: StatusEntry) -> None:
        self._put(sf.status_connector_key(name), self._latest.get_connector(name), entry)

    def task(self, task_id: ConnectorTaskId, entry: StatusEntry) -> None:
        key = sf.status_task_key(task_id.connector, task_id.task)
        self._put(key, self._latest.get_task(task_id), entry)

    def _put(self, key: bytes, current: StatusEntry | None, entry: StatusEntry) -> None:
        entry = StatusEntry(entry.state, self.worker_id, entry.trace, self.generation)
        if (
            entry.state is State.UNASSIGNED
            and current is not None
            and current.worker_id != self.worker_id
            and current.generation >= entry.generation
        ):
            return  # another worker owns it now
        try:
            self.log.send_async(key, sf.status_value(entry), self._failed(key))
        except (KafkaLogError, KafkaException, BufferError) as e:  # a task thread must go on
            log.warning("status %s not written: %s", key.decode(errors="replace"), e)

    def _failed(self, key: bytes) -> Callable[[Any], None]:
        def callback(error: Any) -> None:
            if error is not None:
                log.warning("status %s not written: %s", key.decode(errors="replace"), error)

        return callback

    def delete_connector(self, name: str) -> None:
        """The tombstone of a deleted connector's status (its owner writes it once stopped)."""
        self._tombstone(sf.status_connector_key(name))

    def delete_task(self, task_id: ConnectorTaskId) -> None:
        self._tombstone(sf.status_task_key(task_id.connector, task_id.task))

    def _tombstone(self, key: bytes) -> None:
        try:
            self.log.send_async(key, None, self._failed(key))
        except (KafkaLogError, KafkaException, BufferError) as e:
            log.warning("status %s not deleted: %s", key.decode(errors="replace"), e)

    # -- reading -------------------------------------------------------------------------------

    def get_connector(self, name: str) -> StatusEntry | None:
        return self._latest.get_connector(name)

    def get_task(self, task_id: ConnectorTaskId) -> StatusEntry | None:
        return self._latest.get_task(task_id)

    def tasks_of(self, name: str) -> dict[int, StatusEntry]:
        return self._latest.tasks_of(name)

    def _apply(self, key: bytes | None, value: bytes | None, _partition: int, offset: int) -> None:
        try:
            what = sf.parse_status_key(key or b"")
            entry = sf.parse_status_value(value)
        except sf.FormatError as e:
            log.warning("status topic offset %d: skipped: %s", offset, e)
            return
        if isinstance(what, sf.ConnectorStatusKey):
            if entry is None:
                self._latest.forget(what.name)  # and its tasks' entries
            else:
                self._latest.connector(what.name, entry)
        elif isinstance(what, sf.TaskStatusKey):
            if entry is None:
                self._latest.forget_task(what.task_id)
            else:
                self._latest.task(what.task_id, entry)


# ------------------------------------------------------------------ offsets


class TopicOffsetStore(_LogStore):
    """See the module docstring. Implements ``odradek.connect.runtime.offsets.OffsetStore``."""

    def __init__(self, config: WorkerConfig):
        self._flush_timeout_s = config.offset_flush_timeout_ms / 1000
        self._lock = threading.Lock()
        self._data: dict[tuple[str, PartitionKey], tuple[dict[str, Any], dict[str, Any]]] = {}
        partitions = config.get("offset.storage.partitions")
        self.log = _log(
            config, "offset.storage.topic", self._apply, partitions=partitions, read_committed=True
        )

    @property
    def topic(self) -> str:
        return self.log.topic

    def _read_to_end(self) -> None:
        self._read_log(READ_TIMEOUT_S, OffsetStoreError)

    def get(
        self, connector: str, partitions: Sequence[Mapping[str, Any]]
    ) -> dict[PartitionKey, dict[str, Any]]:
        self._read_to_end()
        with self._lock:
            found = {}
            for p in partitions:
                entry = self._data.get((connector, partition_key(p)))
                if entry is not None:
                    found[partition_key(p)] = dict(entry[1])
            return found

    def all(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        self._read_to_end()
        with self._lock:
            return [(dict(p), dict(o)) for (c, _), (p, o) in self._data.items() if c == connector]

    def put(self, connector: str, offsets: OffsetPairs) -> None:
        records = [(sf.offset_key(connector, p), sf.offset_value(o)) for p, o in offsets]
        try:
            self.log.send(records, self._flush_timeout_s)
        except KafkaLogError as e:
            raise OffsetStoreError(str(e)) from e
        with self._lock:
            for partition, offset in offsets:
                self._set(connector, dict(partition), None if offset is None else dict(offset))

    def _set(
        self, connector: str, partition: dict[str, Any], offset: dict[str, Any] | None
    ) -> None:
        k = (connector, partition_key(partition))
        if offset is None:
            self._data.pop(k, None)
        else:
            self._data[k] = (partition, offset)

    def _apply(self, key: bytes | None, value: bytes | None, _partition: int, offset: int) -> None:
        try:
            connector, partition = sf.parse_offset_key(key or b"")
            source_offset = sf.parse_offset_value(value)
        except sf.FormatError as e:
            log.warning("offset topic offset %d: skipped: %s", offset, e)
            return
        with self._lock:
            self._set(connector, partition, source_offset)
