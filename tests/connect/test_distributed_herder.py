"""Distributed herders in one process on the real cluster, over a recording worker (what the
runtime's Worker does is tested with it): three herders form a group, a connector's tasks spread
over them, a follower refuses writes with the leader's URL, pause/stop/resume and restarts reach
the workers running the work, KIP-875 offsets change only when stopped, a member that leaves has
its work moved after the scheduled delay, and a new herder replays the config topic."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping

import pytest

from odradek.connect.distributed.herder import DistributedHerder
from odradek.connect.distributed.stores import ConfigStore, StatusStore, TopicOffsetStore
from odradek.connect.herder import (
    BadRequestError,
    ConnectorTaskId,
    NotLeaderError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.worker_config import WorkerConfig
from support.waiting import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.connect]

WAIT_S = 40.0
POLL_S = 0.1
DELAY_MS = 1500


class RecordingWorker:
    """The Worker's interface: runs nothing, records what it is asked and reports statuses."""

    def __init__(self, status: StatusStore, worker_id: str):
        self.status = status
        self.worker_id = worker_id
        self.generation = 0
        self.lock = threading.Lock()
        self.connectors: dict[str, tuple[dict[str, str], TargetState]] = {}
        self.running_tasks: dict[ConnectorTaskId, TargetState] = {}
        self.log: list[tuple[str, object]] = []

    @property
    def tasks(self) -> frozenset[ConnectorTaskId]:
        with self.lock:
            return frozenset(self.running_tasks)

    def connector_class(self, config: Mapping[str, str]) -> type:
        from odradek.connect.api import SourceConnector

        return SourceConnector

    def _state(self, target: TargetState) -> State:
        return {TargetState.STARTED: State.RUNNING, TargetState.PAUSED: State.PAUSED}.get(
            target, State.STOPPED
        )

    def start_connector(self, name, config, target, on_reconfigure: Callable[[], None]) -> None:
        with self.lock:
            self.connectors[name] = (dict(config), target)
            self.log.append(("start_connector", name))
        self.status.connector(name, StatusEntry(self._state(target), self.worker_id))

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        config, _ = self.connectors[name]
        return [{"task": str(i), "v": config.get("v", "")} for i in range(max_tasks)]

    def set_target_state(self, name: str, target: TargetState) -> None:
        with self.lock:
            self.log.append(("target", (name, target)))
            if name in self.connectors:
                self.connectors[name] = (self.connectors[name][0], target)
            ids = [t for t in self.running_tasks if t.connector == name]
        if name in self.connectors:
            self.status.connector(name, StatusEntry(self._state(target), self.worker_id))
        if target is TargetState.STOPPED:
            self.stop_tasks(ids)
        for t in ids:
            with self.lock:
                if t in self.running_tasks:
                    self.running_tasks[t] = target
            self.status.task(t, StatusEntry(self._state(target), self.worker_id))

    def stop_connector(self, name: str) -> None:
        with self.lock:
            if self.connectors.pop(name, None) is None:
                return
            self.log.append(("stop_connector", name))
        self.status.connector(name, StatusEntry(State.UNASSIGNED, self.worker_id))

    def start_task(self, task_id, connector_config, task_config, target) -> None:
        with self.lock:
            assert task_id not in self.running_tasks, f"{task_id} started twice"
            self.running_tasks[task_id] = target
            self.log.append(("start_task", (task_id, dict(task_config))))
        self.status.task(task_id, StatusEntry(self._state(target), self.worker_id))

    def stop_tasks(self, ids) -> None:
        for t in list(ids):
            with self.lock:
                if self.running_tasks.pop(t, None) is None:
                    continue
                self.log.append(("stop_task", t))
            self.status.task(t, StatusEntry(State.UNASSIGNED, self.worker_id))

    def close(self) -> None:
        self.stop_tasks(list(self.running_tasks))
        for name in list(self.connectors):
            self.stop_connector(name)


def worker_config(bootstrap: str, prefix: str) -> WorkerConfig:
    return WorkerConfig(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{prefix}-group",
            "config.storage.topic": f"{prefix}-configs",
            "offset.storage.topic": f"{prefix}-offsets",
            "status.storage.topic": f"{prefix}-status",
            "offset.storage.partitions": "2",
            "status.storage.partitions": "2",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "scheduled.rebalance.max.delay.ms": str(DELAY_MS),
            "session.timeout.ms": "3000",
            "heartbeat.interval.ms": "300",
            "rebalance.timeout.ms": "10000",
        },
        distributed=True,
    )


async def make_herder(config: WorkerConfig, port: int) -> tuple[DistributedHerder, RecordingWorker]:
    worker_id = f"127.0.0.1:{port}"
    configs, statuses = ConfigStore(config), StatusStore(config, worker_id)
    offsets = TopicOffsetStore(config)
    for store in (configs, statuses, offsets):
        await asyncio.to_thread(store.start)
    worker = RecordingWorker(statuses, worker_id)
    herder = DistributedHerder(
        config,
        worker,
        configs,
        statuses,
        offsets,
        worker_id=worker_id,
        url=f"http://{worker_id}",
        validate=lambda c: {"error_count": 0},
        sink_offsets=None,
    )
    await herder.start()
    return herder, worker


def spread(workers) -> list[int]:
    return sorted(len(w.tasks) for w in workers)


def test_three_herders_share_work_forward_writes_and_move_work_after_the_delay(
    connect_cluster, unique
):
    config = worker_config(connect_cluster.bootstrap_servers, unique("w"))
    connector = {"connector.class": "Idle", "tasks.max": "6", "v": "1"}

    async def scenario() -> None:
        made = [await make_herder(config, 18000 + i) for i in range(3)]
        herders = [h for h, _ in made]
        workers = [w for _, w in made]
        try:
            await wait_until_async(
                lambda: (
                    len({h.generation.generation_id for h in herders if h.generation}) == 1
                    and all(h.generation for h in herders)
                ),
                "one generation",
                WAIT_S,
                poll_s=POLL_S,
            )
            leader = next(h for h in herders if h.is_leader)
            follower = next(h for h in herders if not h.is_leader)
            with pytest.raises(NotLeaderError) as refused:
                await follower.put_connector_config("c", connector, allow_replace=False)
            assert refused.value.leader_url == leader.url
            with pytest.raises(BadRequestError):
                bad = {"connector.class": "X", "tasks.max": "x"}
                await leader.put_connector_config("c", bad, allow_replace=False)
            created, info = await leader.put_connector_config("c", connector, allow_replace=False)
            assert created and info.name == "c"

            await wait_until_async(
                lambda: spread(workers) == [2, 2, 2], "tasks spread 2/2/2", WAIT_S, poll_s=POLL_S
            )
            assert sum(1 for w in workers if "c" in w.connectors) == 1
            await wait_until_async(
                lambda: _all_running(follower, 6), "every task RUNNING", WAIT_S, poll_s=POLL_S
            )
            assert [t.task for t in (await follower.connector_info("c")).tasks] == list(range(6))

            # Pause, then stop (the tasks go), then resume (they come back).
            await leader.set_target_state("c", TargetState.PAUSED)
            await wait_until_async(
                lambda: all(
                    s is TargetState.PAUSED for w in workers for s in w.running_tasks.values()
                ),
                "tasks paused",
                WAIT_S,
                poll_s=POLL_S,
            )
            offsets = [{"partition": {"file": "/a"}, "offset": {"position": 5}}]
            with pytest.raises(BadRequestError, match="STOPPED"):
                await leader.alter_offsets("c", offsets)  # KIP-875: only when stopped
            await leader.set_target_state("c", TargetState.STOPPED)
            await wait_until_async(
                lambda: spread(workers) == [0, 0, 0], "tasks stopped", WAIT_S, poll_s=POLL_S
            )
            with pytest.raises(NotLeaderError):
                await follower.alter_offsets("c", offsets)
            await leader.alter_offsets("c", offsets)
            assert await follower.connector_offsets("c") == offsets
            await leader.reset_offsets("c")
            assert await follower.connector_offsets("c") == []
            await leader.set_target_state("c", TargetState.STARTED)
            await wait_until_async(
                lambda: spread(workers) == [2, 2, 2],
                "tasks back after resume",
                WAIT_S,
                poll_s=POLL_S,
            )

            # A config change restarts the connector and its tasks where they run.
            await leader.put_connector_config("c", {**connector, "v": "2"}, allow_replace=True)
            await wait_until_async(
                lambda: _task_values(workers) == ["2"] * 6,
                "tasks restarted with the new config",
                WAIT_S,
                poll_s=POLL_S,
            )

            # A member leaves: its tasks come back to the others after the delay, not before.
            leaving = next(h for h, w in made if h is not leader)
            gone = made[herders.index(leaving)][1]
            remaining = [w for w in workers if w is not gone]
            started = time.monotonic()
            await leaving.close()
            await wait_until_async(
                lambda: spread(remaining) == [3, 3], "the work moved", WAIT_S, poll_s=POLL_S
            )
            assert time.monotonic() - started >= DELAY_MS / 1000 * 0.8
            await wait_until_async(
                lambda: _all_running(leader, 6), "RUNNING again", WAIT_S, poll_s=POLL_S
            )

            # Restart (KIP-745) through the leader reaches the tasks wherever they run.
            before = sum(1 for w in remaining for kind, _ in w.log if kind == "start_task")
            await leader.restart_connector("c", include_tasks=True, only_failed=False)
            await wait_until_async(
                lambda: (
                    sum(1 for w in remaining for kind, _ in w.log if kind == "start_task")
                    >= before + 6
                ),
                "tasks restarted",
                WAIT_S,
                poll_s=POLL_S,
            )

            # A new herder replays the config topic.
            again, _ = await make_herder(config, 18010)
            herders.append(again)
            assert await again.connectors() == ["c"]
            assert (await again.connector_config("c"))["v"] == "2"
            await leader.delete_connector("c")
            await wait_until_async(
                lambda: spread(remaining) == [0, 0],
                "deleted connector stopped",
                WAIT_S,
                poll_s=POLL_S,
            )
            await wait_until_async(
                lambda: _no_status(leader), "statuses gone", WAIT_S, poll_s=POLL_S
            )
        finally:
            for herder in herders:
                await asyncio.wait_for(herder.close(), 30)

    asyncio.run(asyncio.wait_for(scenario(), 150))


def _all_running(herder: DistributedHerder, count: int) -> bool:
    try:
        tasks = herder._task_entries(herder._configs.snapshot(), "c")
    except Exception:  # noqa: BLE001
        return False
    return len(tasks) == count and all(e.state is State.RUNNING for e in tasks.values())


def _task_values(workers) -> list[str]:
    """The ``v`` each running task was last started with."""
    values = []
    for w in workers:
        with w.lock:
            last = {t: cfg for kind, what in w.log if kind == "start_task" for t, cfg in [what]}
            values += [last[t]["v"] for t in w.running_tasks]
    return values


def _no_status(herder: DistributedHerder) -> bool:
    return herder._statuses.get_connector("c") is None and not herder._statuses.tasks_of("c")
