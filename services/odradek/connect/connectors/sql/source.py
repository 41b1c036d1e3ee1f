"""``SqlSourceConnector``: rows of tables (or of one query) as records, in the role of
Confluent's ``JdbcSourceConnector`` and with its keys.

Modes (``mode``), per table or query:
- ``bulk``: the whole table every ``poll.interval.ms``; no offsets.
- ``incrementing``: rows with ``incrementing.column.name`` above the last one seen, in its
  order; offset ``{"incrementing": n}``. Sees new rows, not updates.
- ``timestamp``: rows with ``timestamp.column.name`` after the last one seen and before now minus
  ``timestamp.delay.interval.ms``, in its order; offset ``{"timestamp": ms, "timestamp_nanos":
  nanos of the second}`` (Confluent's). Sees updates that move the timestamp; rows sharing a
  timestamp are never split across polls (a batch that ends inside a run of equal timestamps is
  cut before the run, or, if the run fills it, extended to the whole run).
- ``timestamp+incrementing``: both, ordered by (timestamp, incrementing): exact.

Source partitions are ``{"table": <name>}``, or ``{"query": "query"}`` in query mode, as
Confluent's older versions write them; a restarted task resumes from the stored offset. Topics are
``topic.prefix`` + table name (``topic.prefix`` alone for a query). Values are structs named after
the table, built from its reflected columns (``typemap``). "Now" for the timestamp delay is the
worker's clock, not the database's (Confluent asks the database).

Tasks split the tables into contiguous groups; the connector lists them again every
``table.poll.interval.ms`` and asks for new task configs when they change.
Threading: a task's methods run in its thread; ``stop`` only sets an event.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from odradek.connect import data
from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConfigValue,
    ConnectError,
    Importance,
    RetriableError,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from odradek.connect.config_def import in_range, one_of
from odradek.connect.connectors._config import validate_with, version
from odradek.connect.connectors.sql import typemap
from odradek.connect.connectors.sql.common import create_engine, define_connection, split_name

log = logging.getLogger(__name__)

MODE = "mode"
INCREMENTING_COLUMN = "incrementing.column.name"
TIMESTAMP_COLUMN = "timestamp.column.name"
TABLE_WHITELIST = "table.whitelist"
TABLE_INCLUDE_LIST = "table.include.list"
TABLE_BLACKLIST = "table.blacklist"
TABLE_EXCLUDE_LIST = "table.exclude.list"
QUERY = "query"
TOPIC_PREFIX = "topic.prefix"
POLL_INTERVAL_MS = "poll.interval.ms"
BATCH_MAX_ROWS = "batch.max.rows"
TIMESTAMP_DELAY_INTERVAL_MS = "timestamp.delay.interval.ms"
TABLE_POLL_INTERVAL_MS = "table.poll.interval.ms"
TASK_TABLES = "tables"
"""The task-config key with a task's share of the tables (Confluent's ``tables``)."""

BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING = (
    "bulk",
    "incrementing",
    "timestamp",
    "timestamp+incrementing",
)
INCREMENTING_FIELD = "incrementing"
TIMESTAMP_FIELD = "timestamp"
TIMESTAMP_NANOS_FIELD = "timestamp_nanos"
QUERY_PARTITION = {"query": "query"}

MONITOR_JOIN_TIMEOUT_S = 5.0
"""How long ``stop`` waits for the table monitor (it may be inside a slow listing)."""
WAIT_MAX_S = 1.0
"""The longest one ``poll`` waits for the next table to be due (``stop`` is seen within it)."""
EPOCH = datetime.datetime(1970, 1, 1)


def source_config() -> ConfigDef:
    c = define_connection(ConfigDef())
    c.define(
        MODE,
        ConfigType.STRING,
        importance=Importance.HIGH,
        validator=one_of(BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING),
        documentation="bulk, incrementing, timestamp or timestamp+incrementing.",
    )
    c.define(
        INCREMENTING_COLUMN,
        ConfigType.STRING,
        "",
        documentation="A strictly increasing column (incrementing modes).",
    )
    c.define(
        TIMESTAMP_COLUMN,
        ConfigType.LIST,
        [],
        documentation="Timestamp columns (timestamp modes); several: the first non-null.",
    )
    c.define(TABLE_WHITELIST, ConfigType.LIST, [], documentation="The tables to copy.")
    c.define(TABLE_INCLUDE_LIST, ConfigType.LIST, [], documentation="Alias of table.whitelist.")
    c.define(TABLE_BLACKLIST, ConfigType.LIST, [], documentation="Tables not to copy.")
    c.define(TABLE_EXCLUDE_LIST, ConfigType.LIST, [], documentation="Alias of table.blacklist.")
    c.define(
        QUERY,
        ConfigType.STRING,
        "",
        documentation="Copy this query's rows instead of tables (one task).",
    )
    c.define(
        TOPIC_PREFIX,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Prefix of the topic names (the topic itself in query mode).",
    )
    c.define(
        POLL_INTERVAL_MS,
        ConfigType.INT,
        5000,
        validator=in_range(0),
        documentation="How often each table is polled for new rows.",
    )
    c.define(
        BATCH_MAX_ROWS,
        ConfigType.INT,
        100,
        validator=in_range(1),
        documentation="The most rows one poll reads from one table.",
    )
    c.define(
        TIMESTAMP_DELAY_INTERVAL_MS,
        ConfigType.INT,
        0,
        validator=in_range(0),
        documentation="Rows are copied once their timestamp is this much in the past.",
    )
    c.define(
        TABLE_POLL_INTERVAL_MS,
        ConfigType.INT,
        60000,
        validator=in_range(1),
        documentation="How often the connector looks for tables created or dropped.",
    )
    c.define(
        TASK_TABLES,
        ConfigType.LIST,
        [],
        importance=Importance.LOW,
        documentation="Set by the connector: the tables of one task.",
    )
    return c


def parse(props: Mapping[str, str]) -> dict[str, Any]:
    """The config with cross-key checks (Confluent's), aliases folded in."""
    config = source_config().parse(props)
    config[TABLE_WHITELIST] = config[TABLE_WHITELIST] or config[TABLE_INCLUDE_LIST]
    config[TABLE_BLACKLIST] = config[TABLE_BLACKLIST] or config[TABLE_EXCLUDE_LIST]
    mode = config[MODE]
    if config[TABLE_WHITELIST] and config[TABLE_BLACKLIST]:
        raise ConfigException(
            TABLE_BLACKLIST,
            "table.whitelist and table.blacklist exclude each other: set at most one",
        )
    if config[QUERY] and (config[TABLE_WHITELIST] or config[TABLE_BLACKLIST]):
        raise ConfigException(QUERY, "a query copies its own rows: do not list tables with it")
    if mode in (INCREMENTING, TIMESTAMP_INCREMENTING) and not config[INCREMENTING_COLUMN]:
        raise ConfigException(INCREMENTING_COLUMN, f"mode={mode} needs the incrementing column")
    if mode in (TIMESTAMP, TIMESTAMP_INCREMENTING) and not config[TIMESTAMP_COLUMN]:
        raise ConfigException(TIMESTAMP_COLUMN, f"mode={mode} needs the timestamp column")
    return config


class SqlSourceConnector(SourceConnector):
    """Lists the tables at start and splits them among the tasks; a thread of its own lists
    them again every ``table.poll.interval.ms`` and asks for new task configs when they
    change (a table created or dropped)."""

    def version(self) -> str:
        return version()

    def config(self) -> ConfigDef:
        return source_config()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        return validate_with(self.config().validate(props), props, parse)

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        self._config = config = parse(props)
        self._lock = threading.Lock()  # _tables, between the monitor and task_configs
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._tables: list[str] = []
        if config[QUERY]:
            return
        self._engine = create_engine(config)
        try:
            self._tables = self._find_tables()
        except sa.exc.SQLAlchemyError as e:
            self._engine.dispose()
            raise ConnectError(f"cannot list the tables of the database: {e}") from e
        self._monitor = threading.Thread(
            target=self._watch_tables, name="sql-source-table-monitor", daemon=True
        )
        self._monitor.start()

    def _find_tables(self) -> list[str]:
        existing = sa.inspect(self._engine).get_table_names()
        whitelist = self._config[TABLE_WHITELIST]
        blacklist = set(self._config[TABLE_BLACKLIST])
        if whitelist:
            return [t for t in whitelist if split_name(t)[1] in existing]
        return [t for t in sorted(existing) if t not in blacklist]

    def _watch_tables(self) -> None:
        interval_s = self._config[TABLE_POLL_INTERVAL_MS] / 1000
        while not self._stopping.wait(interval_s):
            try:
                tables = self._find_tables()
            except sa.exc.SQLAlchemyError as e:
                log.warning("cannot list the tables of the database (will retry): %s", e)
                continue
            with self._lock:
                changed, self._tables = tables != self._tables, tables
            if changed:
                log.info("the tables to copy are now %s", tables)
                self.context.request_task_reconfiguration()

    def task_class(self) -> type[Task]:
        return SqlSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self._config[QUERY]:
            return [dict(self._props)]
        with self._lock:
            tables = list(self._tables)
        if not tables:
            log.warning("no tables to copy: the connector runs no task until one appears")
        return [
            {**self._props, TASK_TABLES: ",".join(g)} for g in _contiguous_groups(tables, max_tasks)
        ]

    def stop(self) -> None:
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(MONITOR_JOIN_TIMEOUT_S)
            if self._monitor.is_alive():
                log.warning("the table monitor did not stop within %s s", MONITOR_JOIN_TIMEOUT_S)
            else:
                self._engine.dispose()
            self._monitor = None


def _contiguous_groups(items: Sequence[str], count: int) -> list[list[str]]:
    """``items`` in at most ``count`` contiguous groups whose sizes differ by at most one."""
    count = min(count, len(items))
    groups, start = [], 0
    for i in range(count):
        size = len(items) // count + (1 if i < len(items) % count else 0)
        groups.append(list(items[start : start + size]))
        start += size
    return groups


@dataclass
class _Querier:
    """One table's (or the query's) reading position and schedule."""

    topic: str
    partition: dict[str, str]
    selectable: Any  # a Table, or the query as a text subquery
    columns: dict[str, data.Schema] | None  # reflected columns; None in query mode
    schema_name: str | None
    next_poll_s: float = 0.0
    incrementing: int | None = None
    timestamp: datetime.datetime | None = None
    bulk_offset: int = 0
    inferred: dict[str, data.Schema] = field(default_factory=dict)


class SqlSourceTask(SourceTask):
    """Polls its tables in turn; not thread-safe except ``stop``."""

    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time

    def version(self) -> str:
        return version()

    def start(self, props: Mapping[str, str]) -> None:
        config = parse(props)
        self._mode: str = config[MODE]
        self._inc_column: str = config[INCREMENTING_COLUMN]
        self._ts_columns: list[str] = config[TIMESTAMP_COLUMN]
        self._poll_interval_s = config[POLL_INTERVAL_MS] / 1000
        self._batch_max_rows: int = config[BATCH_MAX_ROWS]
        self._delay = datetime.timedelta(milliseconds=config[TIMESTAMP_DELAY_INTERVAL_MS])
        self._stopping = threading.Event()
        self._engine = create_engine(config)
        prefix = config[TOPIC_PREFIX]
        if config[QUERY]:
            subquery = sa.text(f"({config[QUERY]}) AS odradek_query")
            self._queriers = [_Querier(prefix, QUERY_PARTITION, subquery, None, None)]
        else:
            tables = config[TASK_TABLES]
            if not tables:
                raise ConnectError(f"the task has no tables ({TASK_TABLES} is empty)")
            self._queriers = [self._table_querier(prefix, name) for name in tables]
        for q in self._queriers:
            self._resume(q)

    def _table_querier(self, prefix: str, name: str) -> _Querier:
        schema, table_name = split_name(name)
        try:
            table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=self._engine)
        except sa.exc.NoSuchTableError:
            raise ConnectError(f"table {name} does not exist") from None
        except sa.exc.SQLAlchemyError as e:
            raise RetriableError(f"cannot read the columns of {name}: {e}") from e
        columns = {c.name: typemap.column_schema(c.type, bool(c.nullable)) for c in table.columns}
        for needed in [self._inc_column] * (INCREMENTING in self._mode) + (
            self._ts_columns if TIMESTAMP in self._mode else []
        ):
            if needed not in columns:
                raise ConnectError(f"table {name} has no column {needed}")
        return _Querier(prefix + table_name, {"table": name}, table, columns, table_name)

    def _resume(self, q: _Querier) -> None:
        stored = self.context.offset_storage_reader.offset(q.partition) or {}
        if INCREMENTING_FIELD in stored:
            q.incrementing = int(stored[INCREMENTING_FIELD])
        if TIMESTAMP_FIELD in stored:
            ms = int(stored[TIMESTAMP_FIELD])
            nanos = int(stored.get(TIMESTAMP_NANOS_FIELD, (ms % 1000) * 1_000_000))
            q.timestamp = EPOCH + datetime.timedelta(seconds=ms // 1000, microseconds=nanos // 1000)
        if stored:
            log.info("%s: resuming after %s", q.partition, stored)

    # ---------------------------------------------------------------- polling

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set():
            self._engine.dispose()
            return None
        q = min(self._queriers, key=lambda q: q.next_poll_s)
        wait_s = q.next_poll_s - self.clock()
        if wait_s > 0:
            self._stopping.wait(min(wait_s, WAIT_MAX_S))
            return None
        try:
            rows = self._read(q)
        except sa.exc.OperationalError as e:
            raise RetriableError(f"reading {q.partition}: {e}") from e
        except sa.exc.SQLAlchemyError as e:
            raise ConnectError(f"reading {q.partition}: {e}") from e
        if len(rows) < self._batch_max_rows:
            q.next_poll_s = self.clock() + self._poll_interval_s
            q.bulk_offset = 0
        return [self._record(q, row) for row in rows] or None

    def _column(self, q: _Querier, name: str) -> Any:
        return q.selectable.c[name] if q.columns is not None else sa.column(name)

    def _timestamp_expr(self, q: _Querier) -> Any:
        cols = [self._column(q, c) for c in self._ts_columns]
        expr = cols[0] if len(cols) == 1 else sa.func.coalesce(*cols)
        return sa.type_coerce(expr, sa.DateTime())

    def _read(self, q: _Querier) -> list[dict[str, Any]]:
        if q.columns is not None:
            stmt = sa.select(q.selectable)
        else:
            stmt = sa.select(sa.literal_column("*")).select_from(q.selectable)
        limit = self._batch_max_rows
        if self._mode == BULK:
            stmt = stmt.offset(q.bulk_offset)
            if q.columns is not None and q.selectable.primary_key.columns:
                stmt = stmt.order_by(*q.selectable.primary_key.columns)
            rows = self._fetch(stmt.limit(limit))
            q.bulk_offset += len(rows)
            return rows
        inc = self._column(q, self._inc_column) if INCREMENTING in self._mode else None
        ts = self._timestamp_expr(q) if TIMESTAMP in self._mode else None
        if ts is not None:
            upper = self._now() - self._delay
            last = q.timestamp if q.timestamp is not None else EPOCH
            if inc is not None:
                last_inc = q.incrementing if q.incrementing is not None else -1
                after = sa.or_(ts > last, sa.and_(ts == last, inc > last_inc))
                stmt = stmt.where(after, ts < upper).order_by(ts, inc)
                rows = self._fetch(stmt.limit(limit))
            else:
                rows = self._fetch(stmt.where(ts > last, ts < upper).order_by(ts).limit(limit))
                if len(rows) == limit:
                    rows = self._whole_timestamp_runs(q, rows, stmt.where(ts < upper), ts)
        else:
            last_inc = q.incrementing if q.incrementing is not None else -1
            rows = self._fetch(stmt.where(inc > last_inc).order_by(inc).limit(limit))
        return rows

    def _whole_timestamp_runs(
        self, q: _Querier, rows: list[dict[str, Any]], stmt: Any, ts: Any
    ) -> list[dict[str, Any]]:
        """``rows`` without the trailing run of rows sharing the last timestamp (the next poll
        starts after the last timestamp sent); if one run fills the batch, the whole run."""
        last = self._row_timestamp(rows[-1])
        cut = [r for r in rows if self._row_timestamp(r) != last]
        if cut:
            return cut
        return self._fetch(stmt.where(ts == last))

    def _fetch(self, stmt: Any) -> list[dict[str, Any]]:
        with self._engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(stmt)]

    def _now(self) -> datetime.datetime:
        return EPOCH + datetime.timedelta(seconds=self.wall_clock())

    def _row_timestamp(self, row: Mapping[str, Any]) -> datetime.datetime | None:
        for name in self._ts_columns:
            value = row.get(name)
            if value is not None:
                return typemap.to_connect(data.TIMESTAMP_SCHEMA, value).replace(tzinfo=None)
        return None

    def _record(self, q: _Querier, row: dict[str, Any]) -> SourceRecord:
        if q.columns is not None:
            columns = q.columns
        else:
            for name, value in row.items():
                if value is not None and name not in q.inferred:
                    q.inferred[name] = typemap.value_schema(value)
            columns = {n: q.inferred.get(n, data.OPTIONAL_STRING) for n in row}
        schema = data.struct(*columns.items(), name=q.schema_name)
        value = {n: typemap.to_connect(s, row.get(n)) for n, s in columns.items()}
        offset: dict[str, Any] = {}
        if INCREMENTING in self._mode:
            q.incrementing = int(row[self._inc_column])
            offset[INCREMENTING_FIELD] = q.incrementing
        if TIMESTAMP in self._mode:
            stamp = self._row_timestamp(row)
            if stamp is not None:
                q.timestamp = stamp
            if q.timestamp is not None:
                since = q.timestamp - EPOCH
                seconds = since.days * 86400 + since.seconds
                offset[TIMESTAMP_FIELD] = seconds * 1000 + since.microseconds // 1000
                offset[TIMESTAMP_NANOS_FIELD] = since.microseconds * 1000
        return SourceRecord(
            topic=q.topic,
            partition=None,
            key_schema=None,
            key=None,
            value_schema=schema,
            value=value,
            source_partition=q.partition,
            source_offset=offset,
        )

    def stop(self) -> None:
        self._stopping.set()
        # The engine is disposed by the task's own thread (its next poll): it may be in use now.
