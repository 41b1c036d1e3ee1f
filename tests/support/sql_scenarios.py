"""The SQL connectors' scenarios, run against SQLite (tests/unit) and a real PostgreSQL
(tests/connect): each takes an SQLAlchemy URL of an empty database and drives the tasks
directly, through the test doubles of ``connector_doubles``."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator

import sqlalchemy as sa

from odradek.connect import data
from odradek.connect.api import TopicPartition
from odradek.connect.connectors.sql import (
    SqlSinkConnector,
    SqlSinkTask,
    SqlSourceConnector,
    SqlSourceTask,
)
from support.connector_doubles import (
    ConnectorContext,
    MemoryOffsets,
    SinkContext,
    SourceContext,
    drain,
    sink_record,
)
from support.waiting import wait_until

UTC = datetime.UTC
T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)
SECOND = datetime.timedelta(seconds=1)


def engine(url: str) -> sa.Engine:
    return sa.create_engine(url)


def execute(url: str, sql: str, rows: list[dict] | None = None) -> None:
    e = engine(url)
    with e.begin() as conn:
        conn.execute(sa.text(sql), rows or {})
    e.dispose()


def insert(url: str, table: str, rows: list[dict]) -> None:
    """Rows written as an SQLAlchemy application writes them (its SQLite timestamp format)."""
    e = engine(url)
    with e.begin() as conn:
        conn.execute(sa.Table(table, sa.MetaData(), autoload_with=conn).insert(), rows)
    e.dispose()


def select(url: str, sql: str) -> list[tuple]:
    e = engine(url)
    with e.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.text(sql))]
    e.dispose()
    return rows


def source_task(url: str, offsets: MemoryOffsets, tables: str | None = None, **config: str):
    props = {"connection.url": url, "topic.prefix": "db-", "poll.interval.ms": "0", **config}
    if tables is not None:
        props["tables"] = tables
    task = SqlSourceTask()
    task.initialize(SourceContext(configs=props, offset_storage_reader=offsets))
    task.start(props)
    return task


def create_orders(url: str, count: int, first_id: int = 1) -> None:
    execute(
        url,
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL,"
        " amount NUMERIC(10, 2), created TIMESTAMP, day DATE)",
    )
    rows = [
        {"id": i, "name": f"o{i}", "amount": decimal.Decimal(f"{i}.25"),
         "created": T0 + datetime.timedelta(minutes=i), "day": datetime.date(2026, 1, i)}
        for i in range(first_id, first_id + count)
    ]  # fmt: skip
    insert(url, "orders", rows)


# ------------------------------------------------------------------ source


def incrementing_mode_resumes(url: str) -> None:
    create_orders(url, 5)
    offsets = MemoryOffsets()
    config = {"mode": "incrementing", "incrementing.column.name": "id", "batch.max.rows": "2"}
    task = source_task(url, offsets, "orders", **config)
    records = drain(task)  # nothing committed: the worker "loses" the acknowledgements
    assert [r.value["id"] for r in records] == [1, 2, 3, 4, 5]
    first = records[0]
    assert first.topic == "db-orders"
    assert first.source_partition == {"table": "orders"}
    assert first.source_offset == {"incrementing": 1}
    schema = first.value_schema
    assert schema.name == "orders"
    assert schema.field("id").schema.type is data.Type.INT32
    assert schema.field("name").schema == data.STRING  # NOT NULL: required
    assert schema.field("amount").schema == data.decimal_schema(2, optional=True)
    assert schema.field("created").schema.name == data.TIMESTAMP
    assert schema.field("day").schema.name == data.DATE
    assert first.value == {
        "id": 1, "name": "o1", "amount": decimal.Decimal("1.25"),
        "created": datetime.datetime(2026, 1, 1, 12, 1, tzinfo=UTC),
        "day": datetime.date(2026, 1, 1),
    }  # fmt: skip
    data.validate(schema, first.value)
    create_orders(url, 2, first_id=6)  # new rows are picked up by the running task
    assert [r.value["id"] for r in drain(task)] == [6, 7]
    task.stop()
    offsets.commit(records[:3])  # a restarted task resumes after what was acknowledged
    again = source_task(url, offsets, "orders", **config)
    assert [r.value["id"] for r in drain(again)] == [4, 5, 6, 7]
    again.stop()


def timestamp_mode_keeps_equal_timestamps_together(url: str) -> None:
    execute(url, "CREATE TABLE events (id INTEGER PRIMARY KEY, ts TIMESTAMP, v VARCHAR(10))")
    stamps = [0, 1, 1, 1, 2, 3]  # seconds after T0: a run of three equal timestamps
    rows = [{"id": i, "ts": T0 + datetime.timedelta(seconds=s), "v": f"v{i}"}
            for i, s in enumerate(stamps)]  # fmt: skip
    insert(url, "events", rows)
    offsets = MemoryOffsets()
    config = {"mode": "timestamp", "timestamp.column.name": "ts", "batch.max.rows": "2"}
    task = source_task(url, offsets, "events", **config)
    batches = []
    for _ in range(10):
        batch = task.poll()
        if not batch:
            break
        batches.append(sorted(r.value["id"] for r in batch))
        offsets.commit(batch)
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4, 5]
    assert [1, 2, 3] in batches  # the run came whole
    last = T0 + datetime.timedelta(seconds=3)
    assert offsets.offset({"table": "events"}) == {
        "timestamp": int(last.replace(tzinfo=UTC).timestamp() * 1000),
        "timestamp_nanos": 0,
    }
    # An update that moves the timestamp is seen; a row newer than now - delay waits.
    e = engine(url)
    with e.begin() as conn:
        events = sa.Table("events", sa.MetaData(), autoload_with=conn)
        conn.execute(events.update().where(events.c.id == 0).values(ts=T0 + 5 * SECOND))
    e.dispose()
    future = datetime.datetime.now(UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
    insert(url, "events", [{"id": 6, "ts": future, "v": "later"}])
    assert [r.value["id"] for r in drain(task, offsets)] == [0]
    task.stop()
    resumed = source_task(url, offsets, "events", **config)
    assert drain(resumed) == []
    resumed.wall_clock = lambda: future.replace(tzinfo=UTC).timestamp() + 1
    assert [r.value["id"] for r in drain(resumed)] == [6]
    resumed.stop()


def timestamp_incrementing_mode_is_exact(url: str) -> None:
    execute(url, "CREATE TABLE items (id INTEGER PRIMARY KEY, changed TIMESTAMP NOT NULL)")
    rows = [{"id": i, "changed": T0} for i in range(5)]  # all equal: only the id orders them
    insert(url, "items", rows)
    offsets = MemoryOffsets()
    config = {"mode": "timestamp+incrementing", "timestamp.column.name": "changed",
              "incrementing.column.name": "id", "batch.max.rows": "2"}  # fmt: skip
    task = source_task(url, offsets, "items", **config)
    batch = task.poll()
    assert [r.value["id"] for r in batch] == [0, 1]
    offsets.commit(batch)
    assert batch[-1].source_offset["incrementing"] == 1
    assert "timestamp" in batch[-1].source_offset
    task.stop()
    again = source_task(url, offsets, "items", **config)
    assert [r.value["id"] for r in drain(again)] == [2, 3, 4]
    again.stop()


def query_mode(url: str) -> None:
    create_orders(url, 4)
    offsets = MemoryOffsets()
    query = "SELECT id, name, amount * 2 AS doubled FROM orders WHERE id % 2 = 0"
    config = {"mode": "incrementing", "incrementing.column.name": "id", "topic.prefix": "big",
              "query": query, "poll.interval.ms": "0"}  # fmt: skip
    connector = SqlSourceConnector()
    connector.initialize(ConnectorContext())
    connector.start({"connection.url": url, **config})
    (task_config,) = connector.task_configs(4)
    connector.stop()
    task = SqlSourceTask()
    task.initialize(SourceContext(configs=task_config, offset_storage_reader=offsets))
    task.start(task_config)
    records = drain(task, offsets)
    assert [r.value["id"] for r in records] == [2, 4]
    assert records[0].topic == "big"
    assert records[0].source_partition == {"query": "query"}
    assert records[1].value["doubled"] == decimal.Decimal("8.50")
    assert records[0].value_schema.field("name").schema == data.OPTIONAL_STRING
    create_orders(url, 2, first_id=5)
    assert [r.value["id"] for r in drain(task, offsets)] == [6]
    task.stop()


def bulk_mode_and_task_split(url: str) -> None:
    for table in ("a", "b", "c"):
        execute(url, f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)")
        execute(url, f"INSERT INTO {table} VALUES (1), (2), (3)")
    connector = SqlSourceConnector()
    connector.initialize(ConnectorContext())
    base = {"connection.url": url, "topic.prefix": "p-", "mode": "bulk"}
    connector.start({**base, "table.blacklist": "b"})
    configs = connector.task_configs(5)
    assert [c["tables"] for c in configs] == ["a", "c"]
    connector.stop()
    connector.start({**base, "table.include.list": "c,a,b,absent"})
    assert [c["tables"] for c in connector.task_configs(2)] == ["c,a", "b"]
    connector.stop()
    config = {"batch.max.rows": "2", "poll.interval.ms": "60000"}
    task = source_task(url, MemoryOffsets(), "a,c", mode="bulk", **config)
    now = [1000.0]
    task.clock = lambda: now[0]

    def one_pass() -> list:
        return [r for _ in range(4) for r in task.poll()]

    first_pass = one_pass()
    assert sorted((r.topic, r.value["id"]) for r in first_pass) == sorted(
        [("db-a", i) for i in (1, 2, 3)] + [("db-c", i) for i in (1, 2, 3)]
    )
    assert all(r.source_offset == {} for r in first_pass)
    now[0] += 60  # the next pass sends the tables again
    assert len(one_pass()) == 6
    task.stop()


# ------------------------------------------------------------------ sink

KEY = data.struct(("id", data.INT64))
VALUE = data.struct(
    ("id", data.INT64),
    ("name", data.STRING),
    ("price", data.decimal_schema(2, optional=True)),
    ("at", data.optional(data.TIMESTAMP_SCHEMA)),
    name="product",
)


def product(offset: int, id_: int, name: str | None, topic: str = "products"):
    value = None
    if name is not None:
        value = {"id": id_, "name": name, "price": decimal.Decimal("1.50"),
                 "at": datetime.datetime(2026, 2, 1, 8, 30, tzinfo=UTC)}  # fmt: skip
    return sink_record(topic, 0, offset, value, value_schema=VALUE if value else None,
                       key={"id": id_}, key_schema=KEY)  # fmt: skip


def sink_task(url: str, **config: str) -> SqlSinkTask:
    props = {"connection.url": url, "topics": "products", **config}
    connector = SqlSinkConnector()
    connector.start(props)
    (task_config,) = connector.task_configs(1)
    task = SqlSinkTask()
    task.initialize(SinkContext(configs=task_config))
    task.start(task_config)
    return task


def sink_upserts_idempotently_and_deletes(url: str) -> None:
    task = sink_task(url, **{"insert.mode": "upsert", "pk.mode": "record_key",
                             "auto.create": "true", "delete.enabled": "true"})  # fmt: skip
    batch = [product(0, 1, "one"), product(1, 2, "two"), product(2, 1, "uno")]
    task.put(batch)
    task.put(batch)  # redelivered after a lost commit: the same rows
    assert select(url, "SELECT id, name, price FROM products ORDER BY id") == [
        (1, "uno", decimal.Decimal("1.50")),
        (2, "two", decimal.Decimal("1.50")),
    ]
    (at,) = select(url, "SELECT at FROM products WHERE id = 1")[0]
    at = at if isinstance(at, datetime.datetime) else datetime.datetime.fromisoformat(at)
    assert at == datetime.datetime(2026, 2, 1, 8, 30)  # UTC, naive
    task.put([product(3, 2, None), product(4, 3, "three")])  # a tombstone deletes key 2
    assert select(url, "SELECT id, name FROM products ORDER BY id") == [(1, "uno"), (3, "three")]
    task.put([product(5, 9, None)])  # a tombstone for a key never written: nothing to do
    task.flush({TopicPartition("products", 0): 6})
    task.stop()


def sink_inserts_with_kafka_coordinates(url: str) -> None:
    task = sink_task(url, **{"pk.mode": "kafka", "auto.create": "true",
                             "table.name.format": "kafka_${topic}"})  # fmt: skip
    task.put([product(10, 1, "a"), product(11, 1, "b")])
    assert select(url, "SELECT __connect_topic, __connect_partition, __connect_offset, name "
                  "FROM kafka_products ORDER BY __connect_offset") == [
        ("products", 0, 10, "a"), ("products", 0, 11, "b")]  # fmt: skip
    task.stop()


def sink_updates_and_refuses_schemaless_auto_create(url: str) -> None:
    execute(url, "CREATE TABLE plain (id BIGINT PRIMARY KEY, name TEXT)")
    execute(url, "INSERT INTO plain VALUES (1, 'old'), (2, 'keep')")
    task = sink_task(url, **{"insert.mode": "update", "pk.mode": "record_value",
                             "pk.fields": "id", "table.name.format": "plain"})  # fmt: skip
    task.put([sink_record("products", 0, 0, {"id": 1, "name": "new"})])  # schemaless map
    assert select(url, "SELECT id, name FROM plain ORDER BY id") == [(1, "new"), (2, "keep")]
    task.stop()
    task = sink_task(url, **{"auto.create": "true", "table.name.format": "absent"})
    try:
        task.put([sink_record("products", 0, 0, {"id": 1})])
    except Exception as e:  # noqa: BLE001 (the message is what is checked)
        assert "schemas.enable=true" in str(e), e
    else:
        raise AssertionError("auto.create without a schema was accepted")
    task.stop()


def new_tables_reconfigure_the_tasks(url: str) -> None:
    execute(url, "CREATE TABLE first (id INTEGER PRIMARY KEY)")
    context = ConnectorContext()
    connector = SqlSourceConnector()
    connector.initialize(context)
    connector.start({"connection.url": url, "topic.prefix": "p-", "mode": "bulk",
                     "table.poll.interval.ms": "20"})  # fmt: skip
    assert [c["tables"] for c in connector.task_configs(2)] == ["first"]
    execute(url, "CREATE TABLE second (id INTEGER PRIMARY KEY)")
    wait_until(lambda: context.reconfigurations, "a reconfiguration request", 10, poll_s=0.02)
    connector.stop()
    assert [c["tables"] for c in connector.task_configs(2)] == ["first", "second"]
    assert context.reconfigurations == 1


def all_scenarios() -> Iterator:
    yield from (
        incrementing_mode_resumes,
        timestamp_mode_keeps_equal_timestamps_together,
        timestamp_incrementing_mode_is_exact,
        query_mode,
        bulk_mode_and_task_split,
        new_tables_reconfigure_the_tasks,
        sink_upserts_idempotently_and_deletes,
        sink_inserts_with_kafka_coordinates,
        sink_updates_and_refuses_schemaless_auto_create,
    )
