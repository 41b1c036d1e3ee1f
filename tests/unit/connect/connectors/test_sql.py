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
        ({"auto.evolve": "true"}, "auto.evolve"),
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
        {"connection.url": "jdbc:sqlite:x", "auto.evolve": "true"}) if v.errors}  # fmt: skip
    assert sorted(errors) == ["auto.evolve", "connection.url"]
