"""The shipped connectors with the real JSON converter between them, as the worker chains them:
a SQL source's records survive JsonConverter (schemas enabled) into the SQL sink's auto-created
table and into Parquet; a JSON envelope written by hand auto-creates a table."""

from __future__ import annotations

import decimal
import json

import pyarrow.parquet as pq
import sqlalchemy as sa

from odradek.connect.api import SinkRecord, TopicPartition
from odradek.connect.connectors.files_sink import FileSinkTask
from odradek.connect.converters.json_converter import JsonConverter
from support.connector_doubles import MemoryOffsets, SinkContext, drain
from support.sql_scenarios import create_orders, engine, select, sink_task, source_task


def through_json(records, topic: str) -> list[SinkRecord]:
    """What the worker does: serialise with the source's converter, consume, deserialise."""
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    out = []
    for offset, r in enumerate(records):
        wire = converter.from_connect(topic, r.value_schema, r.value)
        back = converter.to_connect(topic, wire)
        out.append(
            SinkRecord(topic=topic, partition=0, key_schema=None, key=None,
                       value_schema=back.schema, value=back.value, kafka_offset=offset)
        )  # fmt: skip
    return out


def test_sql_source_to_sql_sink_and_parquet(tmp_path):
    source_url = f"sqlite:///{tmp_path / 'source.sqlite'}"
    create_orders(source_url, 3)
    task = source_task(source_url, MemoryOffsets(), "orders", mode="incrementing",
                       **{"incrementing.column.name": "id"})  # fmt: skip
    records = through_json(drain(task), "db-orders")
    task.stop()

    sink_url = f"sqlite:///{tmp_path / 'sink.sqlite'}"
    sink = sink_task(sink_url, **{"insert.mode": "upsert", "pk.mode": "record_value",
                                  "pk.fields": "id", "auto.create": "true",
                                  "table.name.format": "copy_of_${topic}"})  # fmt: skip
    sink.put(records)
    sink.stop()
    assert select(sink_url, 'SELECT id, name, amount FROM "copy_of_db-orders" ORDER BY id') == [
        (i, f"o{i}", decimal.Decimal(f"{i}.25")) for i in (1, 2, 3)
    ]
    inspector = sa.inspect(engine(sink_url))
    columns = {c["name"]: c for c in inspector.get_columns("copy_of_db-orders")}
    assert isinstance(columns["amount"]["type"], sa.Numeric)
    assert isinstance(columns["created"]["type"], sa.DateTime)
    assert columns["name"]["nullable"] is False

    files = FileSinkTask()
    files.initialize(SinkContext())
    files.start({"path": str(tmp_path / "lake"), "flush.size": "3"})
    files.open([TopicPartition("db-orders", 0)])
    files.put(records)
    (parquet,) = (tmp_path / "lake").rglob("*.parquet")
    table = pq.read_table(parquet)
    assert table.column("amount").to_pylist() == [decimal.Decimal(f"{i}.25") for i in (1, 2, 3)]
    assert str(table.schema.field("created").type) == "timestamp[ms, tz=UTC]"


def test_a_hand_written_json_envelope_creates_its_table(tmp_path):
    envelope = {
        "schema": {"type": "struct", "name": "reading", "fields": [
            {"field": "sensor", "type": "string", "optional": False},
            {"field": "celsius", "type": "double", "optional": True},
        ]},
        "payload": {"sensor": "s-1", "celsius": 21.5},
    }  # fmt: skip
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true"}, is_key=False)
    back = converter.to_connect("readings", json.dumps(envelope).encode())
    record = SinkRecord(topic="readings", partition=0, key_schema=None, key=None,
                        value_schema=back.schema, value=back.value, kafka_offset=7)  # fmt: skip
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    sink = sink_task(url, **{"pk.mode": "kafka", "auto.create": "true"})
    sink.put([record])
    sink.stop()
    assert select(url, "SELECT __connect_offset, sensor, celsius FROM readings") == [
        (7, "s-1", 21.5)
    ]
