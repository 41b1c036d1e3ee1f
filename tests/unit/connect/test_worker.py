"""The Worker refuses or fails what it cannot run, without a cluster: an unknown connector class
names connector.class, a sink without topics is refused, a bad errors.* key fails the task with a
trace that names it, and stopping what does not run is a no-op."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from odradek.connect.api import ConfigDef, ConfigException, ConnectError, SinkConnector, SinkTask
from odradek.connect.herder import ConnectorTaskId, State, TargetState
from odradek.connect.plugins import Plugins
from odradek.connect.runtime.offsets import MemoryOffsetStore
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.runtime.worker import Worker
from odradek.connect.worker_config import WorkerConfig


class NullSink(SinkConnector):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = props

    def task_class(self) -> type:
        return NullTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{} for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class NullTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        pass

    def put(self, records) -> None:
        pass

    def stop(self) -> None:
        pass


def never(config):
    raise AssertionError("no client may be created")


@pytest.fixture
def worker():
    config = WorkerConfig(
        {
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": "/nonexistent/offsets",
        },
        distributed=False,
    )
    status = MemoryStatusListener()
    w = Worker(
        config,
        Plugins(),
        MemoryOffsetStore(),
        status,
        worker_id="w:1",
        producer_factory=never,
        consumer_factory=never,
        admin_factory=never,
    )
    yield w, status
    w.close()


CLASS = f"{__name__}:NullSink"


def test_unknown_connector_class_names_the_key(worker):
    w, _ = worker
    with pytest.raises(ConfigException) as e:
        w.start_connector("c", {"connector.class": "NoSuchConnector"}, TargetState.STARTED, print)
    assert e.value.name == "connector.class"


def test_a_sink_needs_topics(worker):
    w, _ = worker
    with pytest.raises(ConnectError, match="topics"):
        w.start_connector("c", {"connector.class": CLASS}, TargetState.STARTED, print)


def test_task_configs_carry_task_class_and_topics(worker):
    w, status = worker
    config = {"connector.class": CLASS, "topics": "a,b"}
    w.start_connector("c", config, TargetState.STARTED, print)
    configs = w.connector_task_configs("c", 2)
    assert configs == [{"task.class": f"{__name__}:NullTask", "topics": "a,b"}] * 2
    assert status.get_connector("c").state is State.RUNNING
    w.set_target_state("c", TargetState.STOPPED)
    with pytest.raises(ConnectError, match="not started"):
        w.connector_task_configs("c", 1)
    assert status.get_connector("c").state is State.STOPPED
    w.stop_connector("c")
    assert w.connectors == frozenset()
    w.stop_connector("c")  # not running: nothing to do


def test_a_bad_errors_key_fails_the_task_naming_it(worker):
    w, status = worker
    config = {"connector.class": CLASS, "topics": "a", "errors.tolerance": "most"}
    task = ConnectorTaskId("c", 0)
    w.start_task(task, config, {}, TargetState.STARTED)
    entry = status.get_task(task)
    assert entry.state is State.FAILED and "errors.tolerance" in entry.trace
    assert task not in w.tasks
