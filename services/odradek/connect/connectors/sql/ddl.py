"""The SQL sink's tables: reflected, created (auto.create) and widened (auto.evolve).

Tables are named ``schema.table`` or ``table``. Creating and widening tolerate another task
doing the same at the same time: on failure the table is reflected again and the result checked.
Thread-safe (each call uses its own connection); the callers cache the ``Table`` objects.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from odradek.connect.connectors.sql import typemap
from odradek.connect.connectors.sql.common import split_name
from odradek.connect.data import Schema

log = logging.getLogger(__name__)


class DdlError(Exception):
    """A table that cannot be created or widened as asked; the message says why."""


def reflect(engine: sa.Engine, name: str) -> sa.Table | None:
    """The table as the database has it, or None if there is none."""
    schema, table_name = split_name(name)
    try:
        return sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=engine)
    except sa.exc.NoSuchTableError:
        return None


def _column_type(name: str, column: str, schema: Schema) -> sa.types.TypeEngine:
    try:
        return typemap.column_type(schema)
    except typemap.UnsupportedSchema as e:
        raise DdlError(f"table {name}, column {column}: {e}") from None


def create_table(
    engine: sa.Engine, name: str, fields: dict[str, Schema], pk: tuple[str, ...]
) -> sa.Table:
    """``CREATE TABLE`` with a column per field (the ``pk`` ones NOT NULL PRIMARY KEY)."""
    schema, table_name = split_name(name)
    columns = [
        sa.Column(
            column,
            _column_type(name, column, field_schema),
            primary_key=column in pk,
            nullable=column not in pk and field_schema.optional,
            autoincrement=False,
        )
        for column, field_schema in fields.items()
    ]
    table = sa.Table(table_name, sa.MetaData(), *columns, schema=schema)
    try:
        table.create(engine, checkfirst=True)
    except sa.exc.DBAPIError:
        theirs = reflect(engine, name)  # another task may have created it first
        if theirs is None:
            raise
        return theirs
    log.info("created table %s with columns %s (primary key %s)", name, list(fields), pk)
    return table


def add_columns(
    engine: sa.Engine, table: sa.Table, name: str, fields: dict[str, Schema]
) -> sa.Table:
    """``ALTER TABLE ... ADD COLUMN`` for each of ``fields`` (optional ones only: rows already
    in the table have no value); the table reflected again."""
    preparer = engine.dialect.identifier_preparer
    statements = []
    for column, field_schema in fields.items():
        if not field_schema.optional:
            raise DdlError(
                f"cannot add column {column} to {name}: the field is not optional "
                "(the rows already there have no value for it)"
            )
        sql_type = _column_type(name, column, field_schema).compile(dialect=engine.dialect)
        statements.append(
            f"ALTER TABLE {preparer.format_table(table)} "
            f"ADD COLUMN {preparer.quote(column)} {sql_type}"
        )
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
        log.info("added columns %s to table %s", list(fields), name)
    except sa.exc.DBAPIError as e:
        log.info("adding columns %s to %s failed (another task's?): %s", list(fields), name, e)
    widened = reflect(engine, name)
    missing = [c for c in fields if widened is None or c not in widened.c]
    if missing or widened is None:
        raise DdlError(f"could not add columns {missing} to {name}")
    return widened
