"""What the SQL source and sink share: the connection keys and the engine built from them."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from odradek.connect.api import ConfigDef, ConfigException, ConfigType, Importance
from odradek.connect.config_def import non_empty_string

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"

SQLITE_BUSY_TIMEOUT_S = 10.0
"""How long a SQLite connection waits for another's write lock before failing (retriable)."""


def define_connection(config: ConfigDef) -> ConfigDef:
    return (
        config.define(
            CONNECTION_URL,
            ConfigType.STRING,
            importance=Importance.HIGH,
            documentation="An SQLAlchemy URL (sqlite:///path, postgresql+psycopg://host/db); "
            "JDBC URLs are refused.",
            validator=_sqlalchemy_url,
        )
        .define(
            CONNECTION_USER,
            ConfigType.STRING,
            None,
            importance=Importance.HIGH,
            documentation="The user, if not in the URL.",
        )
        .define(
            CONNECTION_PASSWORD,
            ConfigType.PASSWORD,
            None,
            importance=Importance.HIGH,
            documentation="The password, if not in the URL.",
        )
    )


def _sqlalchemy_url(name: str, value: Any) -> None:
    non_empty_string(name, value)
    if str(value).lower().startswith("jdbc:"):
        raise ConfigException(
            name,
            f"{value} is a JDBC URL; use an SQLAlchemy URL instead, such as "
            "postgresql+psycopg://user@host:5432/db or sqlite:////path/to/file.db",
        )
    try:
        sa.engine.make_url(value)
    except sa.exc.ArgumentError as e:
        raise ConfigException(name, f"{value} is not an SQLAlchemy URL: {e}") from None


def create_engine(config: dict[str, Any]) -> sa.Engine:
    """An engine for ``config``'s connection keys. PostgreSQL sessions run in UTC, so naive
    timestamps mean UTC on both sides; ``postgresql://`` means the psycopg (3) driver."""
    url = sa.engine.make_url(config[CONNECTION_URL])
    if config.get(CONNECTION_USER):
        url = url.set(username=config[CONNECTION_USER])
    password = config.get(CONNECTION_PASSWORD)
    if password:
        url = url.set(password=str(password))
    connect_args: dict[str, Any] = {}
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() == "postgresql":
        connect_args["options"] = "-c timezone=UTC"
    elif url.get_backend_name() == "sqlite":
        connect_args["timeout"] = SQLITE_BUSY_TIMEOUT_S
    try:
        return sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as e:
        raise ConfigException(CONNECTION_URL, f"cannot use {url!r}: {e}") from e


def split_name(name: str) -> tuple[str | None, str]:
    """``schema.table`` -> (schema, table); a bare name has no schema."""
    schema, dot, table = name.rpartition(".")
    return (schema, table) if dot else (None, name)
