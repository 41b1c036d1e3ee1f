"""StandaloneHerder's rules over a recording worker: create/update/delete, task configs
regenerated only when they change, KIP-745 restart plans, pause/resume/stop (KIP-875: tasks
stopped and configs emptied), offsets only when STOPPED, config errors as 400 naming the key."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.connect.api import ConfigException, ConnectError, SinkConnector, SourceConnector
from odradek.connect.herder import (
    AlreadyExistsError,
    BadRequestError,
    ConnectorTaskId,
    NotFoundError,
    ServiceUnavailableError,
    State,
    StatusEntry,
    TargetState,
)
from odradek.connect.runtime.offsets import MemoryOffsetStore
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.standalone import StandaloneHerder


class _Source(SourceConnector):
    """Made only to be asked about offsets (KIP-875); a "refuse" config refuses them."""

    def start(self, props):
        pass

    def task_class(self):
        raise NotImplementedError

    def stop(self):
        pass

    def config(self):
        raise NotImplementedError

    def task_configs(self, max_tasks):
        raise NotImplementedError

    def alter_offsets(self, props, offsets):
        if props.get("refuse"):
            raise ConnectError(f"cannot move {len(offsets)} partition(s)")
        return True


class _Sink(_Source, SinkConnector):
    def alter_offsets(self, props, offsets):
        return False


class RecordingWorker:
    def __init__(self, status: MemoryStatusListener) -> None:
        self.status = status
        self.calls: list[tuple[Any, ...]] = []
        self.running: dict[ConnectorTaskId, dict[str, str]] = {}
        self.generated = 0  # bumps the task configs' content when asked to
        self.broken = False  # connector_task_configs fails, as with a connector that failed

    @property
    def tasks(self) -> frozenset[ConnectorTaskId]:
        return frozenset(self.running)

    def connector_class(self, config):
        return _Sink if "Sink" in config["connector.class"] else _Source

    def start_connector(self, name, config, target, on_reconfigure):
        self.calls.append(("start_connector", name, target))
        state = {TargetState.STARTED: State.RUNNING, TargetState.PAUSED: State.PAUSED}
        self.status.connector(name, StatusEntry(state.get(target, State.STOPPED), "w:1"))

    def connector_task_configs(self, name, max_tasks):
        if self.broken:
            raise RuntimeError("the connector failed to start")
        return [{"n": str(i), "gen": str(self.generated)} for i in range(max_tasks)]

    def set_target_state(self, name, target):
        self.calls.append(("set_target_state", name, target))

    def stop_connector(self, name):
        self.calls.append(("stop_connector", name))

    def start_task(self, task_id, connector_config, task_config, target):
        self.calls.append(("start_task", task_id))
        self.running[task_id] = dict(task_config)
        self.status.task(task_id, StatusEntry(State.RUNNING, "w:1"))

    def stop_tasks(self, ids):
        ids = list(ids)
        self.calls.append(("stop_tasks", tuple(ids)))
        for i in ids:
            self.running.pop(i, None)

    def close(self):
        self.calls.append(("close",))


class FakeSinkOffsets:
    def __init__(self) -> None:
        self.groups: dict[str, list[tuple[str, int, int | None]]] = {}

    def get(self, group):
        return [
            {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
            for t, p, o in self.groups.get(group, [])
        ]

    def alter(self, group, offsets):
        self.groups[group] = list(offsets)

    def reset(self, group):
        self.groups.pop(group, None)


def validate(config):
    if config["connector.class"] == "NoSuch":  # as process._validator answers an unknown class
        raise BadRequestError(
            str(ConfigException("connector.class", "Failed to find any class ... NoSuch"))
        )
    errors = [] if config.get("topic") != "bad topic" else ["Invalid value bad topic"]
    return {
        "name": config["connector.class"],
        "error_count": len(errors),
        "groups": [],
        "configs": [{"definition": {}, "value": {"name": "topic", "errors": errors}}],
    }


def make() -> tuple[StandaloneHerder, RecordingWorker, MemoryStatusListener, FakeSinkOffsets]:
    status = MemoryStatusListener()
    worker = RecordingWorker(status)
    sinks = FakeSinkOffsets()
    herder = StandaloneHerder(
        worker,
        status,
        MemoryOffsetStore(),
        worker_id="w:1",
        validate=validate,
        sink_offsets=sinks,  # type: ignore[arg-type]
    )
    return herder, worker, status, sinks


SOURCE = {"connector.class": "FileStreamSource", "tasks.max": "2", "topic": "t"}
SINK = {"connector.class": "FileStreamSink", "tasks.max": "1", "topics": "t"}


def test_create_starts_connector_and_tasks_and_refuses_a_second_create() -> None:
    async def main():
        herder, worker, _, _ = make()
        created, info = await herder.put_connector_config("a", SOURCE, allow_replace=False)
        assert created and info.type.value == "source" and len(info.tasks) == 2
        assert set(worker.running) == {ConnectorTaskId("a", 0), ConnectorTaskId("a", 1)}
        with pytest.raises(AlreadyExistsError):
            await herder.put_connector_config("a", SOURCE, allow_replace=False)
        status = await herder.connector_status("a")
        assert status.connector.state is State.RUNNING and set(status.tasks) == {0, 1}

    asyncio.run(main())


def test_invalid_config_is_400_naming_the_key_and_nothing_starts() -> None:
    async def main():
        herder, worker, _, _ = make()
        with pytest.raises(BadRequestError, match='"topic": Invalid value'):
            await herder.put_connector_config(
                "a", {**SOURCE, "topic": "bad topic"}, allow_replace=False
            )
        with pytest.raises(BadRequestError, match="tasks.max"):
            await herder.put_connector_config("a", {**SOURCE, "tasks.max": "x"}, allow_replace=True)
        with pytest.raises(BadRequestError, match="connector.class: .*NoSuch"):
            await herder.put_connector_config(
                "a", {**SOURCE, "connector.class": "NoSuch"}, allow_replace=True
            )
        assert await herder.connectors() == [] and worker.calls == []

    asyncio.run(main())


def test_update_restarts_and_regenerates_tasks() -> None:
    async def main():
        herder, worker, _, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        created, info = await herder.put_connector_config(
            "a", {**SOURCE, "tasks.max": "1"}, allow_replace=True
        )
        assert not created and len(info.tasks) == 1
        assert set(worker.running) == {ConnectorTaskId("a", 0)}

    asyncio.run(main())


def test_initially_paused_connector_has_no_tasks_until_resumed() -> None:
    async def main():
        herder, worker, _, _ = make()
        await herder.put_connector_config(
            "a", SOURCE, allow_replace=False, initial_state=TargetState.PAUSED
        )
        assert worker.running == {}
        await herder.set_target_state("a", TargetState.STARTED)
        assert len(worker.running) == 2

    asyncio.run(main())


def test_stop_empties_tasks_resume_regenerates_them() -> None:
    async def main():
        herder, worker, _, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        await herder.set_target_state("a", TargetState.STOPPED)
        assert worker.running == {} and await herder.task_configs("a") == []
        assert ("set_target_state", "a", TargetState.STOPPED) in worker.calls
        await herder.set_target_state("a", TargetState.STARTED)
        assert len(await herder.task_configs("a")) == 2 and len(worker.running) == 2

    asyncio.run(main())


def test_reconfiguration_request_restarts_tasks_only_when_configs_change() -> None:
    async def main():
        herder, worker, _, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        starts = sum(1 for c in worker.calls if c[0] == "start_task")
        herder._schedule_reconfigure("a")
        await asyncio.sleep(0)
        async with herder._lock:  # the scheduled reconfiguration has run
            pass
        assert sum(1 for c in worker.calls if c[0] == "start_task") == starts
        worker.generated += 1
        herder._schedule_reconfigure("a")
        await asyncio.sleep(0)
        async with herder._lock:
            pass
        assert sum(1 for c in worker.calls if c[0] == "start_task") == starts + 2
        assert worker.running[ConnectorTaskId("a", 0)]["gen"] == "1"

    asyncio.run(main())


def test_restart_plans_as_kip745() -> None:
    async def main():
        herder, worker, status, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        status.task(ConnectorTaskId("a", 1), StatusEntry(State.FAILED, "w:1", "trace"))
        plan = await herder.restart_connector("a", include_tasks=True, only_failed=True)
        assert plan.connector.state is State.RUNNING  # not failed: not restarted
        assert plan.tasks[0].state is State.RUNNING and plan.tasks[1].state is State.RESTARTING
        assert ("stop_tasks", (ConnectorTaskId("a", 1),)) in worker.calls
        plan = await herder.restart_connector("a", include_tasks=False, only_failed=False)
        assert plan.connector.state is State.RESTARTING
        assert worker.calls[-2:] == [("stop_connector", "a"), ("start_connector", "a", "STARTED")]
        await herder.restart_task(ConnectorTaskId("a", 0))
        with pytest.raises(NotFoundError):
            await herder.restart_task(ConnectorTaskId("a", 5))

    asyncio.run(main())


def test_restarting_a_connector_that_failed_at_start_generates_its_tasks() -> None:
    async def main():
        herder, worker, _, _ = make()
        worker.broken = True
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        assert worker.running == {} and await herder.task_configs("a") == []
        worker.broken = False
        await herder.restart_connector("a", include_tasks=False, only_failed=False)
        assert len(worker.running) == 2

    asyncio.run(main())


def test_source_offsets_alter_and_reset_only_when_stopped() -> None:
    async def main():
        herder, _, _, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        entry = {"partition": {"filename": "f"}, "offset": {"position": 3}}
        with pytest.raises(BadRequestError, match="STOPPED"):
            await herder.alter_offsets("a", [entry])
        await herder.set_target_state("a", TargetState.STOPPED)
        assert "altered" in await herder.alter_offsets("a", [entry])
        assert await herder.connector_offsets("a") == [entry]
        assert "reset" in await herder.reset_offsets("a")
        assert await herder.connector_offsets("a") == []
        await herder.put_connector_config("a", {**SOURCE, "refuse": "1"}, allow_replace=True)
        with pytest.raises(BadRequestError, match="refused the offsets.*1 partition"):
            await herder.alter_offsets("a", [entry])
        assert await herder.connector_offsets("a") == []

    asyncio.run(main())


def test_sink_offsets_go_to_the_consumer_group_and_bad_entries_name_the_field() -> None:
    async def main():
        herder, _, _, sinks = make()
        await herder.put_connector_config("s", SINK, allow_replace=False)
        await herder.set_target_state("s", TargetState.STOPPED)
        entry = {
            "partition": {"kafka_topic": "t", "kafka_partition": 0},
            "offset": {"kafka_offset": 5},
        }
        message = await herder.alter_offsets("s", [entry])
        assert message.startswith("The Connect framework-managed offsets")  # not consulted
        assert sinks.groups["connect-s"] == [("t", 0, 5)]
        assert await herder.connector_offsets("s") == [entry]
        bad = {"partition": {"kafka_topic": "t", "kafka_partition": "0"}, "offset": None}
        with pytest.raises(BadRequestError, match="kafka_partition"):
            await herder.alter_offsets("s", [bad])
        await herder.reset_offsets("s")
        assert "connect-s" not in sinks.groups

    asyncio.run(main())


def test_delete_stops_everything_and_forgets_status() -> None:
    async def main():
        herder, worker, status, _ = make()
        await herder.put_connector_config("a", SOURCE, allow_replace=False)
        await herder.delete_connector("a")
        assert worker.running == {} and ("stop_connector", "a") in worker.calls
        assert status.get_connector("a") is None
        with pytest.raises(NotFoundError):
            await herder.connector_status("a")
        await herder.close()
        assert worker.calls[-1] == ("close",)
        with pytest.raises(ServiceUnavailableError, match="shutting down"):
            await herder.put_connector_config("b", SOURCE, allow_replace=False)

    asyncio.run(main())
