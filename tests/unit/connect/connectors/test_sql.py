"""The SQL source and sink against SQLite files: every scenario of support.sql_scenarios, and
the configuration checks."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException
from odradek.connect.connectors.sql import SqlSinkConnector, SqlSourceConnector
from support import sql_scenarios


@pytest.mark.parametrize("scenario", list(sql_scenarios.all_scenarios()), ids=lambda s: s.__name__)
def test_sqlite(scenario, tmp_path):
    scenario(f"sqlite:///{tmp_path / 'db.sqlite'}")


def test_jdbc_urls_are_refused_with_the_way_out(tmp_path):
    with pytest.raises(ConfigException) as e:
        SqlSourceConnector().start(
            {"connection.url": "jdbc:postgresql://h/db", "mode": "bulk", "topic.prefix": "p"}
        )
    assert e.value.name == "connection.url" and "SQLAlchemy URL" in e.value.message


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"mode": "incrementing"}, "incrementing.column.name"),
        ({"mode": "timestamp"}, "timestamp.column.name"),
        ({"mode": "bulk", "table.whitelist": "a", "table.blacklist": "b"}, "table.blacklist"),
        ({"mode": "sometimes"}, "mode"),
    ],
)
def test_source_config_errors_name_the_key(config, key, tmp_path):
    props = {"connection.url": f"sqlite:///{tmp_path}/db", "topic.prefix": "p", **config}
    with pytest.raises(ConfigException) as e:
        SqlSourceConnector().start(props)
    assert e.value.name == key


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"insert.mode": "upsert"}, "pk.mode"),
        ({"delete.enabled": "true", "pk.mode": "kafka"}, "delete.enabled"),
        ({"insert.mode": "sometimes"}, "insert.mode"),
    ],
)
def test_sink_config_errors_name_the_key(config, key, tmp_path):
    with pytest.raises(ConfigException) as e:
        SqlSinkConnector().start({"connection.url": f"sqlite:///{tmp_path}/db", **config})
    assert e.value.name == key


def test_validate_reports_cross_key_errors_on_their_key(tmp_path):
    props = {"connection.url": f"sqlite:///{tmp_path}/db", "topic.prefix": "p",
             "mode": "incrementing"}  # fmt: skip
    errors = {v.name: v.errors for v in SqlSourceConnector().validate(props) if v.errors}
    assert list(errors) == ["incrementing.column.name"]
    errors = {v.name: v.errors for v in SqlSinkConnector().validate(
        {"connection.url": "jdbc:sqlite:x", "pk.mode": "value"}) if v.errors}  # fmt: skip
    assert sorted(errors) == ["connection.url", "pk.mode"]


def test_sink_retries_connection_errors_and_fails_on_data_errors(tmp_path):
    from odradek.connect.api import ConnectError, RetriableError
    from support.sql_scenarios import product, sink_task

    unreachable = sink_task("postgresql+psycopg://nobody@127.0.0.1:1/none",
                            **{"max.retries": "1", "retry.backoff.ms": "5"})  # fmt: skip
    with pytest.raises(RetriableError, match="will retry"):
        unreachable.put([product(0, 1, "one")])
    with pytest.raises(ConnectError) as e:
        unreachable.put([product(0, 1, "one")])  # the retries are used up
    assert not isinstance(e.value, RetriableError)
    unreachable.stop()

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    task = sink_task(url, **{"pk.mode": "record_key", "auto.create": "true"})
    task.put([product(0, 1, "one")])
    with pytest.raises(ConnectError, match="UNIQUE") as e:  # insert mode, the same key
        task.put([product(1, 1, "again")])
    assert not isinstance(e.value, RetriableError)
    task.stop()


def test_source_offsets_and_exactly_once_support(tmp_path):
    from odradek.connect.api import ConnectError, ExactlyOnceSupport

    connector = SqlSourceConnector()
    props = {"connection.url": f"sqlite:///{tmp_path}/db", "topic.prefix": "p",
             "mode": "incrementing", "incrementing.column.name": "id"}  # fmt: skip
    assert connector.exactly_once_support(props) is ExactlyOnceSupport.SUPPORTED
    bulk = {**props, "mode": "bulk"}
    assert connector.exactly_once_support(bulk) is ExactlyOnceSupport.UNSUPPORTED
    assert connector.alter_offsets(props, {(("table", "orders"),): {"incrementing": 5},
                                           (("query", "query"),): None})  # fmt: skip
    with pytest.raises(ConnectError, match="source partitions"):
        connector.alter_offsets(props, {(("filename", "x"),): {"incrementing": 5}})
    with pytest.raises(ConnectError, match="integers"):
        connector.alter_offsets(props, {(("table", "orders"),): {"incrementing": "5"}})


def test_numeric_mapping_and_db_timezone(tmp_path):
    from odradek.connect import data
    from support.connector_doubles import MemoryOffsets
    from support.sql_scenarios import execute, source_task

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    execute(url, "CREATE TABLE n (id INTEGER PRIMARY KEY, small NUMERIC(4, 0), "
                 "big NUMERIC(15, 0), frac NUMERIC(8, 3))")  # fmt: skip
    execute(url, "INSERT INTO n VALUES (1, 1234, 123456789012345, 12.345)")
    expected = {
        "none": (data.decimal_schema(0, True), data.decimal_schema(0, True),
                 data.decimal_schema(3, True)),
        "precision_only": (data.optional(data.INT16), data.optional(data.INT64),
                           data.decimal_schema(3, True)),
        "best_fit": (data.optional(data.INT16), data.optional(data.INT64),
                     data.optional(data.FLOAT64)),
    }  # fmt: skip
    for mapping, schemas in expected.items():
        task = source_task(url, MemoryOffsets(), "n", mode="bulk", **{"numeric.mapping": mapping})
        (record,) = task.poll()
        task.stop()
        assert tuple(record.value_schema.field(f).schema for f in ("small", "big", "frac")) == (
            schemas
        ), mapping
        data.validate(record.value_schema, record.value)
        assert record.value["big"] == 123456789012345
    with pytest.raises(ConfigException) as e:
        SqlSourceConnector().start({"connection.url": url, "topic.prefix": "p", "mode": "bulk",
                                    "db.timezone": "Europe/Paris"})  # fmt: skip
    assert e.value.name == "db.timezone"
