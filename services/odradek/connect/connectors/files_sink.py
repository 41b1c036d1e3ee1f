"""``FileSinkConnector``: records into Parquet or JSON-lines files in a directory or any fsspec
URL, exactly once by offset, in the role of Confluent's S3 sink connector.

Layout under ``path``: ``topic=<topic>/partition=<p>/`` (``partitioner=default``), or that plus
the record timestamp formatted with ``path.format`` (``partitioner=time``; strftime, default
``dt=%Y-%m-%d/hour=%H``, in ``timezone``). A file holds consecutive records of one topic
partition, one directory and one value schema; its name is
``<topic>+<partition>+<start offset>+<end offset>.<parquet|jsonl>`` with both offsets (first
and last record) zero-padded to ``filename.offset.zero.pad.width``. (The S3 connector names a
file by its start offset only; the end offset in the name lets ``open`` find where to resume
from a listing, without reading any file, on any store.)

Exactly once (the invariant: each offset of a topic partition is in at most one committed file,
and every offset below the committed position is in one):
- a file is written under a temporary name (``.<topic>+<partition>+<start>.<random>.tmp``,
  hidden from readers such as pyarrow datasets) and renamed to its final name: the commit. On
  a local directory the data is fsynced before the rename and the directory after it.
- a file is committed when it has ``flush.size`` records, when a record's timestamp is
  ``rotate.interval.ms`` past the file's first one, or when the next record goes to another
  directory or has another schema. Records still buffered are not committed anywhere.
- ``pre_commit`` gives the worker only offsets of committed files, so the consumer group never
  moves past a record that is not in a file.
- ``open`` lists the partition's committed files, rewinds the consumer to the offset after the
  highest end offset (``context.offset``), and removes temporary files left by a dead task;
  ``put`` drops any record below the committed or buffered position (a redelivery).
So after a crash, restart or rebalance, nothing is lost (the consumer resumes at most at the
last committed file) and nothing is written twice (records already in files are skipped).
Two tasks never write one partition at once when the worker's group fences them (Kafka's
guarantee too); a zombie task may leave a temporary file, never a duplicate committed one
unless it commits after its partition was reassigned (S3 has the same window).

Values: with a struct schema, a Parquet column per field (Connect types to Arrow types:
``_arrow_type``) and a JSON object per line; with another schema, one column ``value`` of that
type; schemaless values are JSON-encoded into one string column ``value`` in Parquet and
written as JSON in JSON lines. Null values (tombstones) fail the task
(``behavior.on.null.values=fail``, the default) or are skipped (``ignore``).

Memory: at most ``flush.size`` records per assigned partition are buffered.
Threading: a task's methods run in its thread; ``stop`` only drops buffers.
"""

from __future__ import annotations

import datetime
import io
import logging
import os
import re
import uuid
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from odradek.connect import data
from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConnectError,
    Importance,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Task,
    TopicPartition,
)
from odradek.connect.config_def import in_range, non_empty_string, one_of
from odradek.connect.connectors import _json
from odradek.connect.connectors._config import version
from odradek.connect.data import Schema, Type

log = logging.getLogger(__name__)

FORMAT = "format"
PATH = "path"
FLUSH_SIZE = "flush.size"
ROTATE_INTERVAL_MS = "rotate.interval.ms"
PARTITIONER = "partitioner"
PATH_FORMAT = "path.format"
TIMEZONE = "timezone"
NULL_VALUES = "behavior.on.null.values"
ZERO_PAD_WIDTH = "filename.offset.zero.pad.width"

FLUSH_SIZE_MAX = 1_000_000
"""The most records one file (and so one partition's buffer) holds."""
EXTENSIONS = {"parquet": "parquet", "jsonl": "jsonl"}
VALUE_COLUMN = "value"


def files_sink_config() -> ConfigDef:
    c = ConfigDef()
    c.define(
        FORMAT,
        ConfigType.STRING,
        "parquet",
        importance=Importance.HIGH,
        validator=one_of(*EXTENSIONS),
        documentation="parquet or jsonl.",
    )
    c.define(
        PATH,
        ConfigType.STRING,
        importance=Importance.HIGH,
        validator=non_empty_string,
        documentation="A directory or fsspec URL (file://, memory://, s3://, ...).",
    )
    c.define(
        FLUSH_SIZE,
        ConfigType.INT,
        importance=Importance.HIGH,
        validator=in_range(1, FLUSH_SIZE_MAX),
        documentation="Records per file.",
    )
    c.define(
        ROTATE_INTERVAL_MS,
        ConfigType.LONG,
        -1,
        documentation="Commit a file once a record's timestamp is this far past the "
        "file's first (-1: never).",
    )
    c.define(
        PARTITIONER,
        ConfigType.STRING,
        "default",
        validator=one_of("default", "time"),
        documentation="default: topic=<t>/partition=<p>/; time: also path.format.",
    )
    c.define(
        PATH_FORMAT,
        ConfigType.STRING,
        "dt=%Y-%m-%d/hour=%H",
        documentation="strftime format of the record timestamp (partitioner=time).",
    )
    c.define(
        TIMEZONE,
        ConfigType.STRING,
        "UTC",
        validator=_timezone,
        documentation="The time zone of path.format.",
    )
    c.define(
        NULL_VALUES,
        ConfigType.STRING,
        "fail",
        validator=one_of("fail", "ignore"),
        documentation="What a null value (tombstone) does: fail the task or is skipped.",
    )
    c.define(
        ZERO_PAD_WIDTH,
        ConfigType.INT,
        10,
        validator=in_range(1),
        documentation="Digits of the offsets in file names.",
    )
    return c


def _timezone(name: str, value: Any) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigException(name, f"{value!r} is not a time zone") from None


class FileSinkConnector(SinkConnector):
    def version(self) -> str:
        return version()

    def config(self) -> ConfigDef:
        return files_sink_config()

    def start(self, props: Mapping[str, str]) -> None:
        config = self.config().parse(props)
        try:
            fsspec.core.url_to_fs(config[PATH])
        except (ValueError, ImportError) as e:
            raise ConfigException(PATH, f"cannot use {config[PATH]}: {e}") from e
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return FileSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        # The files are the truth: a task rewinds to them in open, whatever the group says.
        return True


@dataclass
class _Partition:
    """One topic partition's committed position and the file being filled."""

    committed_next: int | None = None
    rows: list[Any] = field(default_factory=list)
    start_offset: int = -1
    last_offset: int = -1
    directory: str = ""
    schema: Schema | None = None
    first_timestamp_ms: int | None = None

    @property
    def next_offset(self) -> int:
        """Records below this were committed or are buffered already."""
        if self.rows:
            return self.last_offset + 1
        return self.committed_next if self.committed_next is not None else -1


class FileSinkTask(SinkTask):
    """Not thread-safe except ``stop``."""

    def version(self) -> str:
        return version()

    def start(self, props: Mapping[str, str]) -> None:
        c = files_sink_config().parse(props)
        self._format: str = c[FORMAT]
        self._flush_size: int = c[FLUSH_SIZE]
        self._rotate_ms: int = c[ROTATE_INTERVAL_MS]
        self._time_partitioned = c[PARTITIONER] == "time"
        self._path_format: str = c[PATH_FORMAT]
        self._zone = zoneinfo.ZoneInfo(c[TIMEZONE])
        self._ignore_nulls = c[NULL_VALUES] == "ignore"
        self._pad: int = c[ZERO_PAD_WIDTH]
        self._fs, self._root = fsspec.core.url_to_fs(c[PATH])
        self._root = self._root.rstrip("/")
        self._partitions: dict[TopicPartition, _Partition] = {}

    def stop(self) -> None:
        self._partitions = {}  # buffered records were never committed: they come again

    # ---------------------------------------------------------------- assignment

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            state = self._partitions[tp] = _Partition(committed_next=self._recover(tp))
            if state.committed_next is not None:
                self.context.offset(tp, state.committed_next)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self._partitions.pop(tp, None)

    def _partition_dir(self, tp: TopicPartition) -> str:
        return f"{self._root}/topic={tp.topic}/partition={tp.partition}"

    def _recover(self, tp: TopicPartition) -> int | None:
        """The offset after the partition's last committed file (None: no file); temporary
        files of the partition are removed."""
        base = self._partition_dir(tp)
        try:
            paths = self._fs.find(base) if self._fs.exists(base) else []
        except OSError as e:
            raise ConnectError(f"cannot list {base}: {e}") from e
        committed = re.compile(
            rf"{re.escape(tp.topic)}\+{tp.partition}\+(\d+)\+(\d+)\.{EXTENSIONS[self._format]}"
        )
        temporary = re.compile(rf"\.{re.escape(tp.topic)}\+{tp.partition}\+\d+\.\w+\.tmp")
        end = None
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if m := committed.fullmatch(name):
                end = max(end or 0, int(m.group(2)))
            elif temporary.fullmatch(name):
                log.info("removing %s, left by a task that did not commit it", path)
                self._fs.rm(path)
        return None if end is None else end + 1

    # ---------------------------------------------------------------- records

    def put(self, records: Sequence[SinkRecord]) -> None:
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            state = self._partitions.get(tp)
            if state is None:  # not opened (a worker that skips open): recover now
                state = self._partitions[tp] = _Partition(committed_next=self._recover(tp))
            if record.kafka_offset < state.next_offset:
                continue  # in a committed file or buffered already: a redelivery
            if record.value is None:
                if self._ignore_nulls:
                    continue
                raise ConnectError(
                    f"{tp.topic}-{tp.partition}@{record.kafka_offset}: a null "
                    f"value (set {NULL_VALUES}=ignore to skip them)"
                )
            directory = self._directory(tp, record)
            if state.rows and (
                directory != state.directory
                or record.value_schema != state.schema
                or self._rotate_due(state, record)
            ):
                self._commit(tp, state)
            if not state.rows:
                state.start_offset = record.kafka_offset
                state.directory = directory
                state.schema = record.value_schema
                state.first_timestamp_ms = record.timestamp
            state.rows.append(record.value)
            state.last_offset = record.kafka_offset
            if len(state.rows) >= self._flush_size:
                self._commit(tp, state)

    def _rotate_due(self, state: _Partition, record: SinkRecord) -> bool:
        if self._rotate_ms < 0 or record.timestamp is None or state.first_timestamp_ms is None:
            return False
        return record.timestamp - state.first_timestamp_ms >= self._rotate_ms

    def _directory(self, tp: TopicPartition, record: SinkRecord) -> str:
        base = self._partition_dir(tp)
        if not self._time_partitioned:
            return base
        if record.timestamp is None:
            raise ConnectError(
                f"{tp.topic}-{tp.partition}@{record.kafka_offset}: partitioner=time"
                " needs record timestamps and this record has none"
            )
        at = datetime.datetime.fromtimestamp(record.timestamp / 1000, self._zone)
        return f"{base}/{at.strftime(self._path_format).strip('/')}"

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        pass  # files are committed whole when they rotate; partial ones are never written

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        return {
            tp: state.committed_next
            for tp, state in self._partitions.items()
            if state.committed_next is not None
        }

    # ---------------------------------------------------------------- files

    def _commit(self, tp: TopicPartition, state: _Partition) -> None:
        ext = EXTENSIONS[self._format]
        start, end = (str(o).zfill(self._pad) for o in (state.start_offset, state.last_offset))
        name = f"{tp.topic}+{tp.partition}+{start}+{end}.{ext}"
        temp = f".{tp.topic}+{tp.partition}+{state.start_offset}.{uuid.uuid4().hex}.tmp"
        payload = self._encode(state)
        final_path = f"{state.directory}/{name}"
        temp_path = f"{state.directory}/{temp}"
        try:
            if isinstance(self._fs, LocalFileSystem):
                _write_local(state.directory, temp_path, final_path, payload)
            else:
                self._fs.makedirs(state.directory, exist_ok=True)
                with self._fs.open(temp_path, "wb") as f:
                    f.write(payload)
                self._fs.mv(temp_path, final_path)
        except OSError as e:
            raise ConnectError(f"cannot commit {final_path}: {e}") from e
        log.debug("committed %s (%d records)", final_path, len(state.rows))
        state.committed_next = state.last_offset + 1
        state.rows = []
        state.first_timestamp_ms = None

    def _encode(self, state: _Partition) -> bytes:
        schema, rows = state.schema, state.rows
        if self._format == "jsonl":
            return "".join(_json.dumps(v) + "\n" for v in rows).encode()
        if schema is None:
            arrow_schema = pa.schema([pa.field(VALUE_COLUMN, pa.string(), nullable=False)])
            columns = {VALUE_COLUMN: [_json.dumps(v) for v in rows]}
        elif schema.type is Type.STRUCT:
            arrow_schema = pa.schema(_arrow_field(f.name, f.schema) for f in schema.fields)
            columns = {f.name: [row.get(f.name) for row in rows] for f in schema.fields}
        else:
            arrow_schema = pa.schema([_arrow_field(VALUE_COLUMN, schema)])
            columns = {VALUE_COLUMN: rows}
        try:
            table = pa.table(columns, schema=arrow_schema)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise ConnectError(f"records do not fit their schema as Parquet: {e}") from e
        out = io.BytesIO()
        pq.write_table(table, out)
        return out.getvalue()


def _write_local(directory: str, temp_path: str, final_path: str, payload: bytes) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(temp_path, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp_path, final_path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _arrow_field(name: str, schema: Schema) -> pa.Field:
    return pa.field(name, _arrow_type(schema), nullable=schema.optional)


def _arrow_type(schema: Schema) -> pa.DataType:
    name = schema.name
    if name == data.TIMESTAMP:
        return pa.timestamp("ms", tz="UTC")
    if name == data.DATE:
        return pa.date32()
    if name == data.TIME:
        return pa.time64("us")
    if name == data.DECIMAL:
        return pa.decimal128(38, int(schema.params.get(data.DECIMAL_SCALE, "0")))
    t = schema.type
    simple = {
        Type.INT8: pa.int8(),
        Type.INT16: pa.int16(),
        Type.INT32: pa.int32(),
        Type.INT64: pa.int64(),
        Type.FLOAT32: pa.float32(),
        Type.FLOAT64: pa.float64(),
        Type.BOOLEAN: pa.bool_(),
        Type.STRING: pa.string(),
        Type.BYTES: pa.binary(),
    }
    if t in simple:
        return simple[t]
    if t is Type.ARRAY:
        return pa.list_(_arrow_field("element", schema.value_schema))
    if t is Type.MAP:
        return pa.map_(_arrow_type(schema.key_schema), _arrow_field("value", schema.value_schema))
    return pa.struct([_arrow_field(f.name, f.schema) for f in schema.fields])
