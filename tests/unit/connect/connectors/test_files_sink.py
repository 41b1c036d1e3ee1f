"""The Parquet / JSON-lines sink on real directories (and fsspec's memory store): readable
files, and exactly once by offset across redeliveries and a task restart."""

from __future__ import annotations

import datetime
import decimal
import json

import fsspec
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from odradek.connect import data
from odradek.connect.api import ConfigException, ConnectError, TopicPartition
from odradek.connect.connectors.files_sink import FileSinkConnector, FileSinkTask
from support.connector_doubles import SinkContext, sink_record

TP = TopicPartition("orders", 0)
SCHEMA = data.struct(
    ("offset", data.INT64),
    ("name", data.OPTIONAL_STRING),
    ("price", data.decimal_schema(2)),
    ("at", data.TIMESTAMP_SCHEMA),
    ("tags", data.Schema(data.Type.ARRAY, value_schema=data.STRING)),
    name="order",
)
AT = datetime.datetime(2026, 3, 1, 10, 0, tzinfo=datetime.UTC)
HOUR_MS = 3_600_000


def order(offset: int, timestamp_ms: int | None = None):
    value = {"offset": offset, "name": f"n{offset}" if offset % 2 else None,
             "price": decimal.Decimal("9.99"), "at": AT, "tags": ["a", str(offset)]}  # fmt: skip
    return sink_record(TP.topic, TP.partition, offset, value, value_schema=SCHEMA,
                       timestamp=timestamp_ms)  # fmt: skip


def task_for(path, **config: str) -> tuple[FileSinkTask, SinkContext]:
    props = {"path": str(path), "flush.size": "3", "topics": TP.topic, **config}
    connector = FileSinkConnector()
    connector.start(props)
    (task_config,) = connector.task_configs(1)
    context = SinkContext(configs=task_config, assigned=frozenset({TP}))
    task = FileSinkTask()
    task.initialize(context)
    task.start(task_config)
    task.open([TP])
    return task, context


def committed_files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def offsets_in(root) -> list[int]:
    found = []
    for p in sorted(root.rglob("*.parquet")):
        found.extend(pq.read_table(p).column("offset").to_pylist())
    return sorted(found)


def test_parquet_files_hold_flush_size_records_with_their_types(tmp_path):
    task, _ = task_for(tmp_path)
    task.put([order(i) for i in range(7)])
    assert task.pre_commit({TP: 7}) == {TP: 6}  # offset 6 is buffered, not committed
    assert committed_files(tmp_path) == [
        "topic=orders/partition=0/orders+0+0000000000+0000000002.parquet",
        "topic=orders/partition=0/orders+0+0000000003+0000000005.parquet",
    ]
    table = pq.read_table(tmp_path / committed_files(tmp_path)[1])
    assert table.schema.field("price").type.scale == 2
    assert not table.schema.field("offset").nullable and table.schema.field("name").nullable
    assert table.to_pylist()[0] == {
        "offset": 3, "name": "n3", "price": decimal.Decimal("9.99"), "at": AT,
        "tags": ["a", "3"],
    }  # fmt: skip
    task.stop()


def test_exactly_once_across_redelivery_and_restart(tmp_path):
    task, _ = task_for(tmp_path)
    task.put([order(i) for i in range(5)])
    task.put([order(i) for i in range(2, 7)])  # redelivered after a retriable error
    assert task.pre_commit({TP: 7}) == {TP: 6}
    task.put([order(7), order(8)])  # file 6..8 is committed; the group's commit of 9 is lost
    task.stop()  # and the task dies with nothing buffered... or with something:
    stale = tmp_path / "topic=orders/partition=0/.orders+0+9.0123abcd.tmp"
    stale.write_bytes(b"half a file")

    restarted, context = task_for(tmp_path)
    assert context.rewinds == {TP: 9}  # the files, not the group's offset 6, say where to go on
    assert not stale.exists()
    # A worker that redelivers from the group's offset anyway writes nothing twice.
    restarted.put([order(i) for i in range(6, 12)])
    assert restarted.pre_commit({TP: 12}) == {TP: 12}
    assert offsets_in(tmp_path) == list(range(12))
    restarted.close([TP])
    restarted.stop()


def test_jsonl_with_the_time_partitioner_and_rotation(tmp_path):
    task, _ = task_for(tmp_path, format="jsonl", partitioner="time", **{"flush.size": "100",
                       "rotate.interval.ms": str(HOUR_MS // 2)})  # fmt: skip
    t0 = int(AT.timestamp() * 1000)
    stamps = [t0, t0 + 1000, t0 + HOUR_MS // 2, t0 + HOUR_MS, t0 + HOUR_MS + 5]
    task.put([order(i, ts) for i, ts in enumerate(stamps)])
    task.put([order(5, t0 + 2 * HOUR_MS)])  # commits the 11:00 file (a new directory)
    assert committed_files(tmp_path) == [
        "topic=orders/partition=0/dt=2026-03-01/hour=10/orders+0+0000000000+0000000001.jsonl",
        "topic=orders/partition=0/dt=2026-03-01/hour=10/orders+0+0000000002+0000000002.jsonl",
        "topic=orders/partition=0/dt=2026-03-01/hour=11/orders+0+0000000003+0000000004.jsonl",
    ]
    first = tmp_path / committed_files(tmp_path)[0]
    assert json.loads(first.read_text().splitlines()[1]) == {
        "offset": 1, "name": "n1", "price": "9.99", "at": "2026-03-01T10:00:00+00:00",
        "tags": ["a", "1"],
    }  # fmt: skip
    assert pajson.read_json(first).column("offset").to_pylist() == [0, 1]
    task.stop()


def test_schemaless_values_and_schema_changes(tmp_path):
    task, _ = task_for(tmp_path, **{"flush.size": "2"})
    task.put([sink_record(TP.topic, 0, 0, {"free": [1, 2]}),
              sink_record(TP.topic, 0, 1, {"form": "x"}),
              sink_record(TP.topic, 0, 2, "text", value_schema=data.STRING),
              order(3)])  # fmt: skip
    files = committed_files(tmp_path)
    assert [f.rsplit("/", 1)[1] for f in files] == [
        "orders+0+0000000000+0000000001.parquet",
        "orders+0+0000000002+0000000002.parquet",  # the schema changed at offset 3
    ]
    schemaless = pq.read_table(tmp_path / files[0]).column("value").to_pylist()
    assert [json.loads(v) for v in schemaless] == [{"free": [1, 2]}, {"form": "x"}]
    assert pq.read_table(tmp_path / files[1]).column("value").to_pylist() == ["text"]
    task.stop()


def test_null_values_fail_or_are_skipped(tmp_path):
    task, _ = task_for(tmp_path)
    with pytest.raises(ConnectError, match="behavior.on.null.values"):
        task.put([sink_record(TP.topic, 0, 0, None)])
    skipping, _ = task_for(tmp_path / "b", **{"behavior.on.null.values": "ignore"})
    skipping.put([sink_record(TP.topic, 0, 0, None)] + [order(i) for i in (1, 2, 3)])
    assert offsets_in(tmp_path / "b") == [1, 2, 3]


def test_any_fsspec_store():
    root = "memory://files-sink-test"
    task, _ = task_for(root, format="jsonl", **{"flush.size": "2"})
    task.put([order(i) for i in range(4)])
    fs = fsspec.filesystem("memory")
    names = sorted(p.rsplit("/", 1)[1] for p in fs.find("/files-sink-test"))
    assert names == ["orders+0+0000000000+0000000001.jsonl", "orders+0+0000000002+0000000003.jsonl"]
    _, context = task_for(root, format="jsonl")
    assert context.rewinds == {TP: 4}
    fs.rm("/files-sink-test", recursive=True)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigException) as e:
        FileSinkConnector().start({"path": str(tmp_path), "flush.size": "0"})
    assert e.value.name == "flush.size"
    with pytest.raises(ConfigException) as e:
        FileSinkConnector().start({"path": str(tmp_path), "flush.size": "1", "format": "csv"})
    assert e.value.name == "format"
