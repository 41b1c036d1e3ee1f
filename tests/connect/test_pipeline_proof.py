"""Issue 13's proof: three ``odradek connect distributed`` workers on the 3-broker cluster run a
file source into a topic and two PostgreSQL sinks out of it (upsert and insert). A worker is
killed with SIGKILL while lines flow; its tasks move to the others and every line of the file
reaches the database: exactly once in the upsert table, at least once in the insert table; and,
the source being exactly-once (KIP-618), exactly once in the topic for read_committed readers.
Then pause, resume and restart, an offsets reset (KIP-875) that replays the topic, and bad
configs and bodies answered with errors that name the field."""

from __future__ import annotations

import contextlib
import json
import time

import pytest
import sqlalchemy
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.connect_workers import START_TIMEOUT_S, WorkerProcess, free_port, http, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.connect, pytest.mark.crash]

DELAY_MS = 2000  # scheduled.rebalance.max.delay.ms: a dead worker's tasks wait this long
FLOW_TIMEOUT_S = 60.0
PAUSED_CHECK_S = 1.5  # how long nothing may arrive while the sink is paused
FIRST_LINES, MORE_LINES, PAUSED_LINES = 400, 400, 50
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"


def line(i: int) -> str:
    return json.dumps({"id": i, "name": f"name-{i}", "n": i * 7}) + "\n"


def append(path, start: int, count: int) -> None:
    with path.open("a") as f:
        f.write("".join(line(i) for i in range(start, start + count)))


def committed_values(bootstrap: str, topic: str, at_least: int) -> list[str]:
    """Every value of ``topic`` a read_committed consumer sees, read to the end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "proof-reader", "enable.auto.commit": False,
         "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        ends = {}
        for p in range(3):
            ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        values: list[str] = []
        positions = dict.fromkeys(range(3), 0)
        deadline = time.monotonic() + FLOW_TIMEOUT_S
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    values.append(message.value().decode())
            positions = {
                tp.partition: tp.offset
                for tp in consumer.position([TopicPartition(topic, p) for p in range(3)])
            }
        assert len(values) >= at_least, (len(values), positions, ends)
        return values
    finally:
        consumer.close()


def states(url: str, name: str) -> tuple[str, list[str], list[str]] | None:
    status, body = http("GET", f"{url}/connectors/{name}/status")
    if status != 200:
        return None
    tasks = body["tasks"]
    return (
        body["connector"]["state"],
        [t["state"] for t in tasks],
        [t["worker_id"] for t in tasks],
    )


def running(url: str, name: str, tasks: int, state: str = "RUNNING") -> list[str] | None:
    """The workers of ``name``'s tasks once the connector and all ``tasks`` are in ``state``."""
    got = states(url, name)
    if got is None or got[0] != state or got[1] != [state] * tasks:
        return None
    return got[2]


def test_a_file_reaches_postgresql_through_a_killed_worker(
    connect_cluster, postgres_url, unique, tmp_path
):
    bootstrap = connect_cluster.bootstrap_servers
    prefix, topic = unique("proof"), unique("lines")
    upserts, inserts = f"upserts_{prefix[-6:]}", f"inserts_{prefix[-6:]}"
    engine = sqlalchemy.create_engine(postgres_url)
    with engine.begin() as db:
        for table, key in ((upserts, " PRIMARY KEY"), (inserts, "")):
            db.execute(sqlalchemy.text(f"CREATE TABLE {table} (id INT{key}, name TEXT, n INT)"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)

    def rows(table: str) -> list[tuple]:
        with engine.connect() as db:
            return list(db.execute(sqlalchemy.text(f"SELECT id, name, n FROM {table}")))

    source_file = tmp_path / "lines.jsonl"
    append(source_file, 0, FIRST_LINES)
    properties = tmp_path / "worker.properties"
    properties.write_text(
        "\n".join(
            [
                f"bootstrap.servers={bootstrap}",
                f"group.id={prefix}",
                f"config.storage.topic={prefix}-configs",
                f"offset.storage.topic={prefix}-offsets",
                f"status.storage.topic={prefix}-status",
                f"key.converter={JSON}",
                f"value.converter={JSON}",
                f"scheduled.rebalance.max.delay.ms={DELAY_MS}",
                "session.timeout.ms=3000",
                "heartbeat.interval.ms=500",
                "rebalance.timeout.ms=10000",
                "offset.flush.interval.ms=500",
                "task.shutdown.graceful.timeout.ms=2000",
                "exactly.once.source.support=enabled",
            ]
        )
        + "\n"
    )
    workers = [
        WorkerProcess(properties, port, tmp_path / f"worker-{port}.log")
        for port in (free_port(), free_port(), free_port())
    ]

    def sink(table: str, mode: str) -> dict[str, str]:
        return {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "tasks.max": "3",
            "topics": topic,
            "connection.url": postgres_url,
            "table.name.format": table,
            "insert.mode": mode,
            "pk.mode": "record_value" if mode == "upsert" else "none",
            **({"pk.fields": "id"} if mode == "upsert" else {}),
            "value.converter": JSON,
            "value.converter.schemas.enable": "false",
        }

    connectors = {
        f"{prefix}-source": {
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": topic,
            "value.converter": STRING,
            "exactly.once.support": "required",
        },
        f"{prefix}-upsert": sink(upserts, "upsert"),
        f"{prefix}-insert": sink(inserts, "insert"),
    }
    source, upsert, insert = connectors
    try:
        for w in workers:
            wait_for(w.ready, f"worker {w.port} serving", START_TIMEOUT_S, workers)
        for i, (name, config) in enumerate(connectors.items()):
            # through each worker in turn: followers forward to the leader; 409 while joining
            url = workers[i].url
            body = {"name": name, "config": config}
            status, answer = wait_for(
                lambda url=url, body=body: (
                    (r := http("POST", f"{url}/connectors", body))[0] != 409 and r
                ),
                f"{name} created",
                START_TIMEOUT_S,
                workers,
            )
            assert status == 201, answer
        owners = wait_for(
            lambda: running(workers[0].url, source, 1), "the source running", 30, workers
        )
        for name in (upsert, insert):
            wait_for(lambda n=name: running(workers[0].url, n, 3), f"{name} running", 30, workers)
        wait_for(lambda: len(rows(upserts)) >= FIRST_LINES // 4, "rows arriving", 30, workers)

        # SIGKILL the worker that runs the source task, while lines are still flowing
        (victim,) = [w for w in workers if w.worker_id == owners[0]]
        victim.kill()
        survivors = [w for w in workers if w is not victim]
        append(source_file, FIRST_LINES, MORE_LINES)
        total = FIRST_LINES + MORE_LINES
        live = {w.worker_id for w in survivors}
        for name, tasks in ((source, 1), (upsert, 3), (insert, 3)):
            wait_for(
                lambda n=name, t=tasks: set(running(survivors[0].url, n, t) or ["none"]) <= live,
                f"{name}'s tasks on the survivors",
                START_TIMEOUT_S,
                survivors,
            )
        expected = {(i, f"name-{i}", i * 7) for i in range(total)}
        wait_for(lambda: len(rows(upserts)) == total, "every line upserted", FLOW_TIMEOUT_S)
        assert set(rows(upserts)) == expected and len(rows(upserts)) == total
        wait_for(lambda: set(rows(inserts)) == expected, "every line inserted", FLOW_TIMEOUT_S)
        inserted = len(rows(inserts))
        assert inserted >= total  # at least once: a task moved may write a batch again
        # KIP-618: the source's records and offsets were committed in one transaction each, so
        # read_committed, the topic holds every line once, across the SIGKILL of its worker
        assert sorted(committed_values(bootstrap, topic, total)) == sorted(
            line(i).rstrip("\n") for i in range(total)
        )

        # pause (through a follower), nothing arrives; resume, it does; restart with its tasks
        a, b = survivors
        assert http("PUT", f"{b.url}/connectors/{upsert}/pause")[0] == 202
        wait_for(lambda: running(a.url, upsert, 3, "PAUSED"), "upsert paused", 30, survivors)
        append(source_file, total, PAUSED_LINES)
        wait_for(lambda: len(rows(inserts)) >= inserted + PAUSED_LINES, "insert goes on", 30)
        time.sleep(PAUSED_CHECK_S)
        assert len(rows(upserts)) == total
        assert http("PUT", f"{a.url}/connectors/{upsert}/resume")[0] == 202
        total += PAUSED_LINES
        expected = {(i, f"name-{i}", i * 7) for i in range(total)}
        wait_for(lambda: len(rows(upserts)) == total, "upserts after resume", FLOW_TIMEOUT_S)
        status, answer = http("POST", f"{b.url}/connectors/{upsert}/restart?includeTasks=true")
        assert status == 202 and answer["connector"]["state"] in ("RESTARTING", "RUNNING"), answer
        wait_for(lambda: running(a.url, upsert, 3), "upsert restarted", 30, survivors)

        # KIP-875: stop the insert sink, reset its offsets, resume: the topic is read again
        wait_for(lambda: set(rows(inserts)) == expected, "inserts caught up", FLOW_TIMEOUT_S)
        before = len(rows(inserts))
        assert http("PUT", f"{a.url}/connectors/{insert}/stop")[0] == 204
        wait_for(lambda: (states(a.url, insert) or ["?"])[0] == "STOPPED", "stopped", 30)
        status, answer = http("DELETE", f"{b.url}/connectors/{insert}/offsets")
        assert status == 200, answer
        assert http("GET", f"{a.url}/connectors/{insert}/offsets") == (200, {"offsets": []})
        assert http("PUT", f"{a.url}/connectors/{insert}/resume")[0] == 202
        wait_for(
            lambda: len(rows(inserts)) >= before + total, "the topic inserted again", FLOW_TIMEOUT_S
        )
        assert set(rows(upserts)) == expected  # the upserts are untouched by all this

        # bad configs and bodies: 400 naming the field, the workers keep serving
        bad = {**connectors[insert], "insert.mode": "sometimes"}
        status, answer = http("PUT", f"{a.url}/connectors/{prefix}-bad/config", bad)
        assert status == 400 and "insert.mode" in answer["message"], answer
        status, answer = http("POST", f"{b.url}/connectors", {"name": 7, "config": {}})
        assert status == 400 and '"name"' in answer["message"], answer
        status, answer = http("GET", f"{a.url}/connectors/{prefix}-nope/status")
        assert status == 404 and answer["error_code"] == 404, answer
        assert sorted(http("GET", f"{b.url}/connectors")[1]) == sorted(connectors)
    finally:
        for w in workers:
            with contextlib.suppress(AssertionError):
                w.stop()
        engine.dispose()
