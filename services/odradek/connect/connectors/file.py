"""Kafka's example connectors, ``FileStreamSource`` and ``FileStreamSink``, with Kafka's keys.

Source: reads the lines of ``file`` and sends each as a STRING value to ``topic``, at most
``batch.size`` lines per poll. Its source partition is ``{"filename": <file>}`` and its offset
``{"position": <byte offset after the line>}``, as Kafka's, so a restarted task resumes after
the last acknowledged line. A line is sent only once its ``\\n`` was written (a trailing ``\\r``
is dropped); a line longer than ``LINE_BYTES_MAX`` fails the task. One task only. Unlike Kafka's,
``file`` is required: a worker's stdin is not a data source (Kafka reads stdin when it is absent).

Sink: appends each record's value to ``file`` as one line (strings as they are, bytes as UTF-8,
null as ``null``, anything else as JSON); ``flush`` fsyncs. Each ``put`` is one ``write`` on an
``O_APPEND`` descriptor, so several tasks (``tasks.max`` > 1, as Kafka allows) never interleave
inside a line. ``file`` is required (Kafka writes to stdout when it is absent).

Threading: each task is used by its own thread; ``stop`` may come from another thread and only
sets an event (the source's ``poll`` waits on it at most ``IDLE_WAIT_S``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConnectError,
    ExactlyOnceSupport,
    Importance,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from odradek.connect.config_def import in_range, non_empty_string
from odradek.connect.connectors import _json
from odradek.connect.connectors._config import version
from odradek.connect.data import STRING

log = logging.getLogger(__name__)

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TOPICS_CONFIG = "topics"
BATCH_SIZE_CONFIG = "batch.size"
BATCH_SIZE_DEFAULT = 2000

PARTITION_FIELD = "filename"
POSITION_FIELD = "position"

LINE_BYTES_MAX = 1 << 20
"""The longest line the source reads (Kafka's grows its buffer without a bound)."""
READ_BYTES_MAX = 4 * LINE_BYTES_MAX
"""The most one poll reads from the file."""
IDLE_WAIT_S = 1.0
"""How long ``poll`` waits for new lines (or for the file to appear), as Kafka's."""


def _source_config() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            FILE_CONFIG,
            ConfigType.STRING,
            importance=Importance.HIGH,
            documentation="The file to read (required: reading stdin is not supported).",
            validator=non_empty_string,
        )
        .define(
            TOPIC_CONFIG,
            ConfigType.STRING,
            importance=Importance.HIGH,
            documentation="The topic to send the lines to.",
            validator=_one_topic,
        )
        .define(
            BATCH_SIZE_CONFIG,
            ConfigType.INT,
            BATCH_SIZE_DEFAULT,
            importance=Importance.LOW,
            documentation="The most lines one poll returns.",
            validator=in_range(1),
        )
    )


def _sink_config() -> ConfigDef:
    return ConfigDef().define(
        FILE_CONFIG,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="The file to append to (required: writing to stdout is not supported).",
        validator=non_empty_string,
    )


def _one_topic(name: str, value: Any) -> None:
    non_empty_string(name, value)
    if "," in value:
        raise ConfigException(name, f"{value!r}: the source writes to a single topic")


class FileStreamSourceConnector(SourceConnector):
    """Kafka's ``org.apache.kafka.connect.file.FileStreamSourceConnector``: one task."""

    def version(self) -> str:
        return version()

    def config(self) -> ConfigDef:
        return _source_config()

    def start(self, props: Mapping[str, str]) -> None:
        self._config = self.config().parse(props)

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        c = self._config
        return [
            {
                FILE_CONFIG: c[FILE_CONFIG],
                TOPIC_CONFIG: c[TOPIC_CONFIG],
                BATCH_SIZE_CONFIG: str(c[BATCH_SIZE_CONFIG]),
            }
        ]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Offsets are byte positions in a file that only grows: a transaction's records and
        # their offset are replayed exactly (KIP-618), as Kafka's connector declares.
        return ExactlyOnceSupport.SUPPORTED

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        for partition, offset in offsets.items():
            keys = set(partition) if isinstance(partition, Mapping) else set(dict(partition))
            if keys != {PARTITION_FIELD}:
                raise ConnectError(
                    f"source partitions of this connector are {{{PARTITION_FIELD!r}: <file>}}, "
                    f"not {partition!r}"
                )
            if offset is None:
                continue  # a reset
            position = offset.get(POSITION_FIELD) if isinstance(offset, Mapping) else None
            if set(offset) != {POSITION_FIELD} or not isinstance(position, int) or position < 0:
                raise ConnectError(
                    f"offsets of this connector are {{{POSITION_FIELD!r}: <byte position >= 0>}}, "
                    f"not {offset!r}"
                )
        return True


class FileStreamSourceTask(SourceTask):
    """Reads whole lines after ``position``; not thread-safe except ``stop``."""

    idle_wait_s: float = IDLE_WAIT_S

    def version(self) -> str:
        return version()

    def start(self, props: Mapping[str, str]) -> None:
        config = _source_config().parse(props)
        self._filename: str = config[FILE_CONFIG]
        self._topic: str = config[TOPIC_CONFIG]
        self._batch_size: int = config[BATCH_SIZE_CONFIG]
        self._partition = {PARTITION_FIELD: self._filename}
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the file, between poll's reads and stop
        self._file = None
        stored = self.context.offset_storage_reader.offset(self._partition)
        position = (stored or {}).get(POSITION_FIELD, 0)
        if not isinstance(position, int) or position < 0:
            raise ConnectError(f"stored offset {stored!r} of {self._filename} is not a position")
        self._position: int = position
        if position:
            log.info("%s: resuming at byte %d", self._filename, position)

    def poll(self) -> list[SourceRecord] | None:
        with self._lock:
            if self._stopping.is_set():
                return None
            if self._file is None:
                try:
                    self._file = open(self._filename, "rb")  # noqa: SIM115 (open across polls)
                except FileNotFoundError:
                    self._file = None
            if self._file is not None:
                self._file.seek(self._position)
                chunk = self._file.read(READ_BYTES_MAX)
        if self._file is None:
            log.warning("%s does not exist yet; waiting for it", self._filename)
            self._stopping.wait(self.idle_wait_s)
            return None
        records: list[SourceRecord] = []
        start = 0
        while len(records) < self._batch_size:
            end = chunk.find(b"\n", start)
            if end < 0:
                if len(chunk) - start > LINE_BYTES_MAX:
                    raise ConnectError(
                        f"{self._filename}: a line at byte {self._position + start} is longer "
                        f"than {LINE_BYTES_MAX} bytes"
                    )
                break
            line = chunk[start:end].removesuffix(b"\r")
            start = end + 1
            records.append(
                SourceRecord(
                    topic=self._topic,
                    partition=None,
                    key_schema=None,
                    key=None,
                    value_schema=STRING,
                    value=line.decode("utf-8", errors="replace"),
                    source_partition=self._partition,
                    source_offset={POSITION_FIELD: self._position + start},
                )
            )
        self._position += start
        if not records:
            self._stopping.wait(self.idle_wait_s)
            return None
        return records

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _line(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return _json.dumps(value)


class FileStreamSinkConnector(SinkConnector):
    """Kafka's ``org.apache.kafka.connect.file.FileStreamSinkConnector``."""

    def version(self) -> str:
        return version()

    def config(self) -> ConfigDef:
        return _sink_config()

    def start(self, props: Mapping[str, str]) -> None:
        self._config = self.config().parse(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{FILE_CONFIG: self._config[FILE_CONFIG]} for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        return True  # the file keeps no offsets of its own: any consumer offset is fine


class FileStreamSinkTask(SinkTask):
    """Appends lines; not thread-safe except ``stop``."""

    def version(self) -> str:
        return version()

    def start(self, props: Mapping[str, str]) -> None:
        self._filename = _sink_config().parse(props)[FILE_CONFIG]
        self._lock = threading.Lock()  # the descriptor, between put/flush and stop
        try:
            self._fd: int | None = os.open(
                self._filename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
        except OSError as e:
            raise ConnectError(f"cannot open {self._filename} for appending: {e}") from e

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        data = "".join(_line(r.value) + "\n" for r in records).encode()
        view = memoryview(data)
        with self._lock:
            if self._fd is None:
                raise ConnectError(f"{self._filename}: the task was stopped")
            while view:  # a regular file takes it whole; a short write is finished, not dropped
                written = os.write(self._fd, view)
                view = view[written:]

    def flush(self, current_offsets: Mapping[Any, int]) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def stop(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
