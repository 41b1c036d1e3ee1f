"""``SqlSinkConnector``: records into tables, in the role of Confluent's ``JdbcSinkConnector``
and with its keys.

Each record's value is a row: a struct (JSON with the schema envelope, or any converter with
schemas), or a schemaless map when the table exists already. The table is ``table.name.format``
with ``${topic}`` replaced. Primary keys (``pk.mode``): ``none``; ``kafka`` (the columns
``__connect_topic``, ``__connect_partition``, ``__connect_offset``, or the three names in
``pk.fields``); ``record_key`` (a primitive key into the one column named in ``pk.fields``, or
the key struct's fields, all or those in ``pk.fields``); ``record_value`` (value fields, all or
those in ``pk.fields``). ``fields.whitelist`` limits the value fields written.

``insert.mode``: ``insert``; ``upsert`` (``INSERT ... ON CONFLICT (pk) DO UPDATE``, SQLite and
PostgreSQL); ``update`` (``UPDATE ... WHERE pk``). A tombstone (null value) deletes the key's
row when ``delete.enabled`` (which needs ``pk.mode=record_key``), and is skipped otherwise.

All of one ``put`` is one transaction, statements in record order (consecutive records of one
kind and table go in one executemany; in an upsert run only the last record of a key is sent,
which is what running them in order leaves): so a batch redelivered after a failure upserts the
same rows again. ``auto.create`` creates a missing table from the record schemas (the key
columns NOT NULL PRIMARY KEY); without schemas it fails naming the converter setting to use.
``auto.evolve`` (altering tables) is not implemented and refused. Database errors are retried
``max.retries`` times ``retry.backoff.ms`` apart (``RetriableError``), then fail the task.

Threading: a task's methods run in its thread; ``stop`` disposes the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from odradek.connect import data
from odradek.connect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConfigValue,
    ConnectError,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Task,
)
from odradek.connect.config_def import in_range, one_of
from odradek.connect.connectors._config import validate_with, version
from odradek.connect.connectors.sql import typemap
from odradek.connect.connectors.sql.common import create_engine, define_connection, split_name

log = logging.getLogger(__name__)

INSERT_MODE = "insert.mode"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
FIELDS_WHITELIST = "fields.whitelist"
AUTO_CREATE = "auto.create"
AUTO_EVOLVE = "auto.evolve"
DELETE_ENABLED = "delete.enabled"
TABLE_NAME_FORMAT = "table.name.format"
BATCH_SIZE = "batch.size"
MAX_RETRIES = "max.retries"
RETRY_BACKOFF_MS = "retry.backoff.ms"

KAFKA_PK_FIELDS = ("__connect_topic", "__connect_partition", "__connect_offset")
KAFKA_PK_SCHEMAS = (data.STRING, data.INT32, data.INT64)
UPSERT_DIALECTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}

JSON_WITH_SCHEMAS = (
    "value.converter=org.apache.kafka.connect.json.JsonConverter with "
    "value.converter.schemas.enable=true (and the schema envelope in the messages)"
)


def sink_config() -> ConfigDef:
    c = define_connection(ConfigDef())
    c.define(
        INSERT_MODE,
        ConfigType.STRING,
        "insert",
        validator=one_of("insert", "upsert", "update"),
        documentation="insert, upsert (ON CONFLICT, SQLite and PostgreSQL) or update.",
    )
    c.define(
        PK_MODE,
        ConfigType.STRING,
        "none",
        validator=one_of("none", "kafka", "record_key", "record_value"),
        documentation="Where the primary key comes from.",
    )
    c.define(PK_FIELDS, ConfigType.LIST, [], documentation="The primary key's field names.")
    c.define(
        FIELDS_WHITELIST,
        ConfigType.LIST,
        [],
        documentation="The value fields to write (default: all).",
    )
    c.define(
        AUTO_CREATE,
        ConfigType.BOOLEAN,
        False,
        documentation="Create missing tables from the record schemas.",
    )
    c.define(
        AUTO_EVOLVE,
        ConfigType.BOOLEAN,
        False,
        validator=_no_evolve,
        documentation="Not implemented: must be false.",
    )
    c.define(
        DELETE_ENABLED,
        ConfigType.BOOLEAN,
        False,
        documentation="Delete the key's row on a tombstone (pk.mode=record_key).",
    )
    c.define(
        TABLE_NAME_FORMAT,
        ConfigType.STRING,
        "${topic}",
        documentation="The table of a record; ${topic} is its topic.",
    )
    c.define(
        BATCH_SIZE,
        ConfigType.INT,
        3000,
        validator=in_range(1),
        documentation="The most rows in one statement execution.",
    )
    c.define(
        MAX_RETRIES,
        ConfigType.INT,
        10,
        validator=in_range(0),
        documentation="Retries of a failed put before the task fails.",
    )
    c.define(
        RETRY_BACKOFF_MS,
        ConfigType.INT,
        3000,
        validator=in_range(0),
        documentation="The wait before a retry.",
    )
    return c


def _no_evolve(name: str, value: Any) -> None:
    if value:
        raise ConfigException(name, "altering tables is not implemented: set it to false")


def parse(props: Mapping[str, str]) -> dict[str, Any]:
    config = sink_config().parse(props)
    pk_mode, insert_mode = config[PK_MODE], config[INSERT_MODE]
    if insert_mode != "insert" and pk_mode == "none":
        raise ConfigException(
            PK_MODE,
            f"insert.mode={insert_mode} needs a primary key: set "
            "pk.mode to kafka, record_key or record_value",
        )
    if config[DELETE_ENABLED] and pk_mode != "record_key":
        raise ConfigException(DELETE_ENABLED, "delete.enabled=true needs pk.mode=record_key")
    if pk_mode == "kafka" and config[PK_FIELDS] and len(config[PK_FIELDS]) != 3:
        raise ConfigException(
            PK_FIELDS, "pk.mode=kafka takes three names (topic, partition, offset columns) or none"
        )
    return config


class SqlSinkConnector(SinkConnector):
    def version(self) -> str:
        return version()

    def config(self) -> ConfigDef:
        return sink_config()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        return validate_with(self.config().validate(props), props, parse)

    def start(self, props: Mapping[str, str]) -> None:
        parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return SqlSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[Any, Any]) -> bool:
        return True  # offsets live in the consumer group only


@dataclass(frozen=True)
class _Op:
    """One statement run: ``kind`` (insert, upsert, update, delete) on ``table``."""

    kind: str
    table: sa.Table
    pk: tuple[str, ...]
    columns: tuple[str, ...]


class SqlSinkTask(SinkTask):
    """Writes each put in one transaction; not thread-safe except ``stop``."""

    def version(self) -> str:
        return version()

    def start(self, props: Mapping[str, str]) -> None:
        self._config = parse(props)
        self._engine = create_engine(self._config)
        self._dialect = self._engine.dialect.name
        if self._config[INSERT_MODE] == "upsert" and self._dialect not in UPSERT_DIALECTS:
            raise ConnectError(
                f"insert.mode=upsert is implemented for SQLite and PostgreSQL, not {self._dialect}"
            )
        self._tables: dict[str, sa.Table] = {}
        self._retries_left: int = self._config[MAX_RETRIES]

    def stop(self) -> None:
        self._engine.dispose()

    # ---------------------------------------------------------------- put

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        try:
            runs = self._runs(records)
            with self._engine.begin() as conn:
                for op, rows in runs:
                    self._execute(conn, op, rows)
        except sa.exc.DBAPIError as e:
            self._tables.clear()  # a table may have changed under us: reflect it again
            if self._retries_left > 0 and not isinstance(
                e, sa.exc.IntegrityError | sa.exc.DataError
            ):
                self._retries_left -= 1
                self.context.timeout(self._config[RETRY_BACKOFF_MS])
                raise RetriableError(f"writing {len(records)} records: {e}") from e
            raise ConnectError(f"writing {len(records)} records: {e}") from e
        self._retries_left = self._config[MAX_RETRIES]

    def _runs(self, records: Sequence[SinkRecord]) -> list[tuple[_Op, list[dict[str, Any]]]]:
        """Records as runs of rows with one statement each, in record order."""
        runs: list[tuple[_Op, list[dict[str, Any]]]] = []
        for record in records:
            table_name = self._config[TABLE_NAME_FORMAT].replace("${topic}", record.topic)
            if record.value is None:
                if not self._config[DELETE_ENABLED]:
                    continue
                table = self._table(table_name, record)
                if table is None:
                    continue  # nothing to delete in a table that does not exist
                key_row = self._key_columns(record)
                op = _Op("delete", table, tuple(key_row), tuple(key_row))
                row = key_row
            else:
                row = self._row(record)
                table = self._table(table_name, record, row)
                op = _Op(self._config[INSERT_MODE], table, self._pk_names(record), tuple(row))
                missing = set(row) - set(table.c.keys())
                if missing:
                    raise ConnectError(
                        f"table {table_name} has no columns {sorted(missing)} for "
                        f"{record.topic}-{record.partition}@{record.kafka_offset} "
                        "(auto.evolve is not implemented)"
                    )
            row = {k: typemap.to_sql(v) for k, v in row.items()}
            if runs and runs[-1][0] == op:
                runs[-1][1].append(row)
            else:
                runs.append((op, [row]))
        return runs

    def _execute(self, conn: sa.Connection, op: _Op, rows: list[dict[str, Any]]) -> None:
        table, pk = op.table, op.pk
        if op.kind == "upsert":
            rows = list({tuple(r[k] for k in pk): r for r in rows}.values())
        size = self._config[BATCH_SIZE]
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            if op.kind == "insert":
                conn.execute(table.insert(), chunk)
            elif op.kind == "upsert":
                stmt = UPSERT_DIALECTS[self._dialect](table)
                others = [c for c in chunk[0] if c not in pk]
                if others:
                    stmt = stmt.on_conflict_do_update(
                        index_elements=list(pk), set_={c: stmt.excluded[c] for c in others}
                    )
                else:
                    stmt = stmt.on_conflict_do_nothing(index_elements=list(pk))
                conn.execute(stmt, chunk)
            else:
                where = sa.and_(*(table.c[k] == sa.bindparam(f"pk_{k}") for k in pk))
                keyed = [{**{f"pk_{k}": r[k] for k in pk}, **r} for r in chunk]
                if op.kind == "update":
                    values = {c: sa.bindparam(c) for c in chunk[0] if c not in pk}
                    conn.execute(table.update().where(where).values(values), keyed)
                else:
                    conn.execute(
                        table.delete().where(where), [{f"pk_{k}": r[k] for k in pk} for r in keyed]
                    )

    # ---------------------------------------------------------------- rows and keys

    def _row(self, record: SinkRecord) -> dict[str, Any]:
        value = record.value
        if not isinstance(value, dict) or (
            record.value_schema is not None and record.value_schema.type is not data.Type.STRUCT
        ):
            raise ConnectError(
                f"{record.topic}-{record.partition}@{record.kafka_offset}: a row "
                f"needs a struct value, not {type(value).__name__} (use "
                f"{JSON_WITH_SCHEMAS})"
            )
        whitelist = self._config[FIELDS_WHITELIST]
        row = {k: v for k, v in value.items() if not whitelist or k in whitelist}
        pk_mode = self._config[PK_MODE]
        if pk_mode == "kafka":
            names = self._config[PK_FIELDS] or KAFKA_PK_FIELDS
            row.update(
                zip(names, (record.topic, record.partition, record.kafka_offset), strict=True)
            )
        elif pk_mode == "record_key":
            row.update(self._key_columns(record))
        elif pk_mode == "record_value":
            for name in self._pk_names(record):
                if name not in value:
                    raise ConnectError(f"pk.fields names {name}, which the value does not have")
                row[name] = value[name]
        return row

    def _key_columns(self, record: SinkRecord) -> dict[str, Any]:
        key, names = record.key, self._config[PK_FIELDS]
        where = f"{record.topic}-{record.partition}@{record.kafka_offset}"
        if key is None:
            raise ConnectError(f"{where}: pk.mode=record_key needs a key; this record has none")
        if isinstance(key, dict):
            names = names or list(key)
            missing = [n for n in names if n not in key]
            if missing:
                raise ConnectError(f"{where}: the key has no fields {missing} (pk.fields)")
            return {n: key[n] for n in names}
        if len(names) != 1:
            raise ConnectError(
                f"{where}: a primitive key fills one column: name it in "
                "pk.fields (exactly one name)"
            )
        return {names[0]: key}

    def _pk_names(self, record: SinkRecord) -> tuple[str, ...]:
        pk_mode, names = self._config[PK_MODE], self._config[PK_FIELDS]
        if pk_mode == "kafka":
            return tuple(names or KAFKA_PK_FIELDS)
        if pk_mode == "record_key":
            return tuple(self._key_columns(record))
        if pk_mode == "record_value":
            return tuple(names or (record.value or {}))
        return ()

    # ---------------------------------------------------------------- tables

    def _table(
        self, name: str, record: SinkRecord, row: dict[str, Any] | None = None
    ) -> sa.Table | None:
        table = self._tables.get(name)
        if table is not None:
            return table
        schema, table_name = split_name(name)
        try:
            table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=self._engine)
        except sa.exc.NoSuchTableError:
            if row is None:
                return None
            if not self._config[AUTO_CREATE]:
                raise ConnectError(
                    f"table {name} does not exist and auto.create is false"
                ) from None
            table = self._create(schema, table_name, record)
        self._tables[name] = table
        return table

    def _create(self, schema: str | None, name: str, record: SinkRecord) -> sa.Table:
        where = f"{record.topic}-{record.partition}@{record.kafka_offset}"
        value_schema = record.value_schema
        if value_schema is None or value_schema.type is not data.Type.STRUCT:
            raise ConnectError(
                f"{where}: auto.create builds table {name} from the record's "
                f"schema, and it has none: use {JSON_WITH_SCHEMAS}"
            )
        fields: dict[str, data.Schema] = {}
        pk_mode = self._config[PK_MODE]
        whitelist = self._config[FIELDS_WHITELIST]
        pk = self._pk_names(record)
        if pk_mode == "kafka":
            fields.update(zip(pk, KAFKA_PK_SCHEMAS, strict=True))
        elif pk_mode == "record_key":
            key_schema = record.key_schema
            if key_schema is None:
                raise ConnectError(
                    f"{where}: auto.create with pk.mode=record_key needs the key's "
                    "schema too (key.converter with schemas)"
                )
            for name_ in pk:
                f = key_schema.field(name_) if key_schema.type is data.Type.STRUCT else None
                fields[name_] = f.schema if f is not None else key_schema
        for f in value_schema.fields:
            if f.name in pk or not whitelist or f.name in whitelist:
                fields.setdefault(f.name, f.schema)
        columns = []
        for col_name, col_schema in fields.items():
            try:
                col_type = typemap.column_type(col_schema)
            except typemap.UnsupportedSchema as e:
                raise ConnectError(f"{where}: auto.create of {name}: column {col_name}: {e}") from e
            is_pk = col_name in pk
            columns.append(
                sa.Column(
                    col_name,
                    col_type,
                    primary_key=is_pk,
                    nullable=not is_pk and col_schema.optional,
                    autoincrement=False,
                )
            )
        table = sa.Table(name, sa.MetaData(), *columns, schema=schema)
        try:
            table.create(self._engine, checkfirst=True)
        except sa.exc.DBAPIError:
            # Another task may have created it first: use theirs if it is there now.
            try:
                return sa.Table(name, sa.MetaData(), schema=schema, autoload_with=self._engine)
            except sa.exc.NoSuchTableError:
                raise
        log.info("created table %s with columns %s (primary key %s)", name, list(fields), pk)
        return table
