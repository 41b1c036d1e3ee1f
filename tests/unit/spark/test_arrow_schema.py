"""The executors' Arrow batches have exactly the schema Spark checks them against."""

from __future__ import annotations

import pytest

from odradek.spark.partition_read import arrow_schema, consumer_config
from odradek.spark.schema import read_schema


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_is_sparks(headers: bool) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert arrow_schema(headers).equals(to_arrow_schema(read_schema(headers), timezone="UTC"))


def test_consumer_config_keeps_user_settings_but_forces_the_sources() -> None:
    config = consumer_config(
        {"bootstrap.servers": "b", "fetch.max.bytes": "1000", "isolation.level": "read_committed"}
    )
    assert config["fetch.max.bytes"] == "1000"
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] == "false"
    assert config["auto.offset.reset"] == "error"
    assert consumer_config({"bootstrap.servers": "b"})["isolation.level"] == "read_uncommitted"
