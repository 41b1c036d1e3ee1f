"""Three ``odradek connect distributed`` processes on the real cluster: they form one group, a
connector created and paused through any of them (followers forward to the leader) has its
tasks spread over all three, concurrent requests are answered as by Kafka's one herder thread (10
concurrent creates of one name through one worker: one 201, nine 409; a PUT racing a DELETE never
404), ``kill -9`` of a worker moves its tasks to the others after
``scheduled.rebalance.max.delay.ms``, and after every worker is stopped and started again the
connector and its tasks come back from the internal topics."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from support.connect_workers import START_TIMEOUT_S, WorkerProcess, free_port, http, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.connect]

HERE = Path(__file__).parent
MOVE_TIMEOUT_S = 40.0
DELAY_MS = 2000
TASKS = 6
RACERS = 10
RACE_ROUNDS = 4


def task_owners(url: str, name: str, state: str = "RUNNING") -> Counter | None:
    status, body = http("GET", f"{url}/connectors/{name}/status")
    if status != 200 or len(body["tasks"]) != TASKS:
        return None
    if any(t["state"] != state for t in body["tasks"]):
        return None
    return Counter(t["worker_id"] for t in body["tasks"])


def concurrently(calls) -> list[tuple[int, object]]:
    """The answers of ``calls`` (each an ``http(...)`` thunk), started together on threads."""
    start = threading.Barrier(len(calls))
    answers: list[tuple[int, object] | BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        start.wait(10)
        try:
            answers[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 - reported by the assert below
            answers[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(isinstance(a, tuple) for a in answers), answers
    return answers  # type: ignore[return-value]


def race_creates_and_put_delete(workers, unique) -> None:
    """Kafka's herder runs each request on its one thread, so a check and its write are never
    interleaved with another request's: concurrent creates of one name give one 201 and
    ``already exists`` 409s, and a PUT (create or update) racing a DELETE never answers 404."""
    config = {"connector.class": "distributed_plugins:IdleSource", "tasks.max": "1"}

    names = []
    for w in workers:  # all through one worker: the leader, or a follower that forwards
        name = unique("race")
        names.append(name)
        body = {"name": name, "config": config}
        answers = concurrently(
            [lambda w=w, body=body: http("POST", f"{w.url}/connectors", body)] * RACERS
        )
        statuses = sorted(status for status, _ in answers)
        assert statuses == [201] + [409] * (RACERS - 1), answers
        assert all("already exists" in b["message"] for status, b in answers if status == 409), (
            answers
        )
    name = unique("put-delete")
    names.append(name)
    for _ in range(RACE_ROUNDS):
        calls = []
        for i in range(RACERS):
            url = f"{workers[i % len(workers)].url}/connectors/{name}"
            if i % 2:
                calls.append(lambda url=url: http("DELETE", url))
            else:
                calls.append(lambda url=url: http("PUT", f"{url}/config", config))
        answers = concurrently(calls)
        puts = [a for i, a in enumerate(answers) if i % 2 == 0]
        deletes = [a for i, a in enumerate(answers) if i % 2]
        assert all(status in (200, 201) for status, _ in puts), answers
        assert all(status in (204, 404) for status, _ in deletes), answers
    for n in names:
        assert http("DELETE", f"{workers[0].url}/connectors/{n}")[0] in (204, 404)


def test_workers_share_move_and_recover_tasks(connect_cluster, unique, tmp_path):
    prefix = unique("dist")
    properties = tmp_path / "worker.properties"
    properties.write_text(
        "\n".join(
            [
                f"bootstrap.servers={connect_cluster.bootstrap_servers}",
                f"group.id={prefix}",
                f"config.storage.topic={prefix}-configs",
                f"offset.storage.topic={prefix}-offsets",
                f"status.storage.topic={prefix}-status",
                "offset.storage.partitions=2",
                "status.storage.partitions=2",
                "key.converter=org.apache.kafka.connect.json.JsonConverter",
                "value.converter=org.apache.kafka.connect.json.JsonConverter",
                f"scheduled.rebalance.max.delay.ms={DELAY_MS}",
                "session.timeout.ms=3000",
                "heartbeat.interval.ms=500",
                "rebalance.timeout.ms=10000",
                "task.shutdown.graceful.timeout.ms=2000",
            ]
        )
    )
    ports = [free_port() for _ in range(3)]
    workers = [WorkerProcess(properties, p, tmp_path / f"worker-{p}.log", HERE) for p in ports]
    try:
        for w in workers:
            wait_for(w.ready, f"worker {w.port} serving", START_TIMEOUT_S, workers)
        name = unique("idle")
        body = {
            "name": name,
            "config": {
                "connector.class": "distributed_plugins:IdleSource",
                "tasks.max": str(TASKS),
            },
        }
        # Sent to every worker in turn until one answers 201: followers forward to the leader,
        # a worker still joining answers 409 (retried).
        status, answer = wait_for(
            lambda: (r := http("POST", f"{workers[1].url}/connectors", body))[0] != 409 and r,
            "the connector created",
            START_TIMEOUT_S,
            workers,
        )
        assert status == 201, answer
        owners = wait_for(
            lambda: (o := task_owners(workers[0].url, name)) and len(o) == 3 and o,
            "tasks spread over three workers",
            START_TIMEOUT_S,
            workers,
        )
        assert sorted(owners.values()) == [2, 2, 2]

        race_creates_and_put_delete(workers, unique)
        wait_for(
            lambda: http("GET", f"{workers[0].url}/connectors") == (200, [name]),
            "the race's connectors deleted",
            30,
            workers,
        )
        owners = wait_for(
            lambda: (o := task_owners(workers[0].url, name)) and len(o) == 3 and o,
            "tasks spread over three workers again",
            START_TIMEOUT_S,
            workers,
        )

        # Pause through every worker: two of them are followers and forward to the leader.
        for w in workers:
            assert http("PUT", f"{w.url}/connectors/{name}/pause")[0] == 202
        wait_for(lambda: task_owners(workers[0].url, name, "PAUSED"), "paused", 30, workers)
        assert http("PUT", f"{workers[2].url}/connectors/{name}/resume")[0] == 202
        wait_for(lambda: task_owners(workers[1].url, name), "resumed", 30, workers)

        victim = workers[2]
        killed_at = time.monotonic()
        victim.kill()
        survivors = {f"127.0.0.1:{w.port}" for w in workers[:2]}
        owners = wait_for(
            lambda: (o := task_owners(workers[0].url, name)) and set(o) == survivors and o,
            "the killed worker's tasks moved",
            MOVE_TIMEOUT_S,
            workers,
        )
        assert sorted(owners.values()) == [3, 3]
        assert time.monotonic() - killed_at >= DELAY_MS / 1000

        # A full restart: the connector and its tasks come back from the topics.
        for w in workers[:2]:
            w.stop()
        # New ports: the status topic still holds the old workers' entries, under their ids.
        ports = [free_port() for _ in range(3)]
        workers = [WorkerProcess(properties, p, tmp_path / f"worker-{p}.log", HERE) for p in ports]
        for w in workers:
            wait_for(w.ready, f"worker {w.port} serving again", START_TIMEOUT_S, workers)
        restarted = {f"127.0.0.1:{p}" for p in ports}
        status, names = http("GET", f"{workers[2].url}/connectors")
        assert (status, names) == (200, [name])
        wait_for(
            lambda: (o := task_owners(workers[2].url, name)) and set(o) == restarted,
            "tasks running again after the restart",
            START_TIMEOUT_S,
            workers,
        )
    finally:
        for w in workers:
            with contextlib.suppress(AssertionError):
                w.stop()
