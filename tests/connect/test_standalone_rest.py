"""``odradek connect standalone`` as a real process against a real 3-broker cluster, driven over
its REST API: file source -> topic -> file sink; status and tasks; pause/resume; restart; stop;
KIP-875 offsets of a source and a sink (GET, PATCH, DELETE); delete; bad bodies and configs get
400/404/409 JSON naming the field; SIGTERM stops the worker cleanly.

One worker process serves the whole module (a start costs a Python interpreter and a cluster
round trip); each test uses connectors, topics and files of its own. Connector and converter
classes are named as Kafka names them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.connect_workers import http
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.connect]

START_TIMEOUT_S = 60
WAIT_TIMEOUT_S = 30
STOP_TIMEOUT_S = 30
POLL_S = 0.1
HTTP_TIMEOUT_S = 30

SOURCE_CLASS = "FileStreamSource"  # Kafka's alias
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"  # and its full name
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
LOG_TAIL_CHARS = 4000
SERVICES = Path(__file__).resolve().parents[2] / "services"


class Worker:
    def __init__(self, process: subprocess.Popen, url: str, log_path: Path) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None):
        """(status, decoded JSON body or None)."""
        return http(method, self.url + path, body, raw=raw, timeout_s=HTTP_TIMEOUT_S)

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        got, answer = self.call(method, path, body)
        assert got == status, (method, path, got, answer)
        return answer


LOG_PATH: list[Path] = []  # the module's worker log, shown when a wait times out


def worker_log() -> str:
    """The end of the module's worker log, shown when a wait times out."""
    tail = LOG_PATH[0].read_text()[-LOG_TAIL_CHARS:] if LOG_PATH else ""
    return f"the worker's log ends:\n{tail}"


def worker_properties(work: Path, bootstrap_servers: str) -> Path:
    properties = work / "worker.properties"
    properties.write_text(
        "\n".join(
            [
                f"bootstrap.servers={bootstrap_servers}",
                f"key.converter={STRING_CONVERTER}",
                f"value.converter={STRING_CONVERTER}",
                f"offset.storage.file.filename={work / 'offsets.json'}",
                "offset.flush.interval.ms=200",
                "task.shutdown.graceful.timeout.ms=3000",
                "listeners=http://127.0.0.1:0",
                "rest.advertised.host.name=127.0.0.1",
            ]
        )
        + "\n"
    )
    return properties


@contextlib.contextmanager
def standalone(work: Path, bootstrap_servers: str, *connector_files: Path) -> Iterator[Worker]:
    """``odradek connect standalone`` in its own process group, until SIGTERM (by PID), which
    must stop it gracefully: exit code 0 and "stopped" logged last."""
    properties = worker_properties(work, bootstrap_servers)
    log_path = work / "worker.log"
    previous_log = LOG_PATH[:]
    LOG_PATH[:] = [log_path]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SERVICES), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "odradek.cli", "connect", "standalone", str(properties)]
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [*command, *map(str, connector_files)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: a stray signal never reaches pytest
        )
    try:

        def advertised() -> str | None:
            assert process.poll() is None, log_path.read_text()
            found = re.search(r"serving the REST API at (http://\S+)", log_path.read_text())
            return found.group(1) if found else None

        url = wait_until(
            advertised, "the REST API", START_TIMEOUT_S, poll_s=POLL_S, explain=worker_log
        )
        yield Worker(process, url, log_path)
    finally:
        LOG_PATH[:] = previous_log
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT_S)
                pytest.fail(
                    f"the worker ignored SIGTERM:\n{log_path.read_text()[-LOG_TAIL_CHARS:]}"
                )
    assert process.returncode == 0, log_path.read_text()[-LOG_TAIL_CHARS:]
    assert "stopped" in log_path.read_text().splitlines()[-1]


@pytest.fixture(scope="module")
def worker(connect_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    work = tmp_path_factory.mktemp("standalone")
    with standalone(work, connect_cluster.bootstrap_servers) as running:
        yield running


def create_topic(bootstrap_servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(WAIT_TIMEOUT_S)
    wait_until(
        lambda: topic in admin.list_topics(timeout=WAIT_TIMEOUT_S).topics,
        topic,
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )


def high_watermark(cluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_TIMEOUT_S)[1]
    finally:
        consumer.close()


def state_of(worker: Worker, name: str) -> tuple[str, list[str]]:
    status = worker.ok("GET", f"/connectors/{name}/status")
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def wait_state(worker: Worker, name: str, connector: str, tasks: list[str]) -> None:
    wait_until(
        lambda: state_of(worker, name) == (connector, tasks),
        f"{name} {connector} {tasks}",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_pipeline_pause_resume_restart_stop_offsets_delete(
    worker: Worker, connect_cluster, unique, tmp_path
) -> None:
    topic, source, sink = unique("t"), unique("src"), unique("snk")
    create_topic(connect_cluster.bootstrap_servers, topic)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(5)))

    info = worker.ok(
        "POST",
        "/connectors",
        {
            "name": source,
            "config": {
                "connector.class": SOURCE_CLASS,
                "file": str(source_file),
                "topic": topic,
                "tasks.max": "1",
            },
        },
        status=201,
    )
    assert info["type"] == "source" and info["config"]["name"] == source
    worker.ok(
        "PUT",
        f"/connectors/{sink}/config",
        {"connector.class": SINK_CLASS, "file": str(sink_file), "topics": topic},
        status=201,
    )
    wait_until(
        lambda: len(lines_of(sink_file)) == 5,
        "5 lines in the sink file",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )
    assert lines_of(sink_file) == [f"line {i}" for i in range(5)]
    wait_state(worker, source, "RUNNING", ["RUNNING"])
    tasks = worker.ok("GET", f"/connectors/{source}/tasks")
    assert tasks[0]["id"] == {"connector": source, "task": 0}
    assert tasks[0]["config"]["topic"] == topic
    assert worker.ok("GET", f"/connectors/{source}/tasks/0/status")["state"] == "RUNNING"
    listing = worker.ok("GET", "/connectors?expand=status&expand=info")
    assert listing[sink]["info"]["type"] == "sink"

    # Pause, resume: lines written meanwhile arrive after the resume.
    worker.ok("PUT", f"/connectors/{source}/pause", status=202)
    wait_state(worker, source, "PAUSED", ["PAUSED"])
    with source_file.open("a") as f:
        f.write("line 5\n")
    worker.ok("PUT", f"/connectors/{source}/resume", status=202)
    wait_state(worker, source, "RUNNING", ["RUNNING"])
    wait_until(
        lambda: len(lines_of(sink_file)) == 6,
        "line 5",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )

    # Restarts: the legacy form (204), KIP-745's (202 with the plan), one task (204).
    worker.ok("POST", f"/connectors/{source}/restart", status=204)
    plan = worker.ok("POST", f"/connectors/{source}/restart?includeTasks=true", status=202)
    assert plan["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in plan["tasks"]] == ["RESTARTING"]
    worker.ok("POST", f"/connectors/{source}/tasks/0/restart", status=204)
    wait_state(worker, source, "RUNNING", ["RUNNING"])

    # Source offsets (KIP-875): only while STOPPED; rewinding replays the file.
    got, error = worker.call("DELETE", f"/connectors/{source}/offsets")
    assert got == 400 and "STOPPED" in error["message"]
    worker.ok("PUT", f"/connectors/{source}/stop", status=204)
    wait_until(
        lambda: state_of(worker, source) == ("STOPPED", []),
        "stopped",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )
    assert worker.ok("GET", f"/connectors/{source}/tasks") == []
    size = source_file.stat().st_size
    offsets = wait_until(
        lambda: worker.ok("GET", f"/connectors/{source}/offsets")["offsets"],
        "the source offset",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )
    assert offsets == [{"partition": {"filename": str(source_file)}, "offset": {"position": size}}]
    rewind = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 0}}]}
    wrong = {"offsets": [{"partition": {"file": str(source_file)}, "offset": {"position": 0}}]}
    got, error = worker.call("PATCH", f"/connectors/{source}/offsets", wrong)
    assert got == 400 and "'filename'" in error["message"], error  # the connector refused it
    assert "altered" in worker.ok("PATCH", f"/connectors/{source}/offsets", rewind)["message"]
    worker.ok("PUT", f"/connectors/{source}/resume", status=202)
    wait_until(
        lambda: len(lines_of(sink_file)) == 12,
        "the replayed lines",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )

    # Sink offsets: the consumer group connect-<name>.
    worker.ok("PUT", f"/connectors/{sink}/stop", status=204)
    sink_offsets = wait_until(
        lambda: [
            o
            for o in worker.ok("GET", f"/connectors/{sink}/offsets")["offsets"]
            if o["offset"]["kafka_offset"] == 12
        ],
        "the sink's committed offset",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )
    assert sink_offsets[0]["partition"] == {"kafka_topic": topic, "kafka_partition": 0}
    back = {
        "offsets": [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": 0},
                "offset": {"kafka_offset": 10},
            }
        ]
    }
    worker.ok("PATCH", f"/connectors/{sink}/offsets", back)
    assert worker.ok("GET", f"/connectors/{sink}/offsets")["offsets"][0]["offset"] == {
        "kafka_offset": 10
    }
    worker.ok("DELETE", f"/connectors/{sink}/offsets")
    assert worker.ok("GET", f"/connectors/{sink}/offsets")["offsets"] == []
    worker.ok("PUT", f"/connectors/{source}/stop", status=204)
    wait_until(
        lambda: state_of(worker, source) == ("STOPPED", []),
        "stopped",
        WAIT_TIMEOUT_S,
        poll_s=POLL_S,
        explain=worker_log,
    )
    assert "reset" in worker.ok("DELETE", f"/connectors/{source}/offsets")["message"]
    assert worker.ok("GET", f"/connectors/{source}/offsets")["offsets"] == []

    for name in (source, sink):
        worker.ok("DELETE", f"/connectors/{name}", status=204)
        assert worker.call("GET", f"/connectors/{name}")[0] == 404
    assert not {source, sink} & set(worker.ok("GET", "/connectors"))


def test_bad_bodies_and_configs_get_json_errors_naming_the_field(worker: Worker, unique) -> None:
    name = unique("bad")

    def error(method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple:
        got, answer = worker.call(method, path, body, raw)
        assert answer["error_code"] == got, answer
        return got, answer["message"]

    config = {"connector.class": SOURCE_CLASS, "file": "/nonexistent", "topic": "t"}
    got, message = error("POST", "/connectors", raw=b"{oops")
    assert got == 400 and "not valid JSON" in message
    got, message = error(
        "POST", "/connectors", {"name": name, "config": {**config, "tasks.max": [1]}}
    )
    assert got == 400 and '"tasks.max"' in message
    got, message = error(
        "POST", "/connectors", {"name": name, "config": {**config, "connector.class": "NoSuch"}}
    )
    assert got == 400 and "connector.class" in message and "NoSuch" in message
    got, message = error("POST", "/connectors", {"name": name, "config": {**config, "name": "x"}})
    assert got == 400 and "does not match" in message
    got, message = error("GET", f"/connectors/{name}")
    assert got == 404 and name in message
    got, message = error("GET", "/nope")
    assert got == 404
    got, message = error("DELETE", "/connector-plugins")
    assert got == 405
    path = "/connector-plugins/FileStreamSink/config/validate"
    got, message = error("PUT", path, {**config})
    assert got == 400 and "FileStreamSink" in message

    worker.ok("POST", "/connectors", {"name": name, "config": config}, status=201)
    got, message = error("POST", "/connectors", {"name": name, "config": config})
    assert got == 409 and name in message
    worker.ok("DELETE", f"/connectors/{name}", status=204)


def test_root_and_plugins(worker: Worker) -> None:
    root = worker.ok("GET", "/")
    assert set(root) == {"version", "commit", "kafka_cluster_id"} and root["kafka_cluster_id"]
    plugins = worker.ok("GET", "/connector-plugins?connectorsOnly=false")
    assert isinstance(plugins, list)
    keys = worker.ok("GET", f"/connector-plugins/{SOURCE_CLASS}/config")
    assert {"file", "topic"} <= {k["name"] for k in keys}
    infos = worker.ok(
        "PUT",
        "/connector-plugins/FileStreamSourceConnector/config/validate",
        {"connector.class": SOURCE_CLASS, "topic": "t"},
    )
    assert infos["error_count"] >= 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}
    assert errors["file"], errors
    got, error = worker.call(
        "POST", "/connectors", {"name": "no-file", "config": {"connector.class": SOURCE_CLASS}}
    )
    assert got == 400 and '"file"' in error["message"], error


def test_connectors_from_files_and_sigterm_flushes_offsets(connect_cluster, unique, tmp_path):
    """Connectors given on the command line start with the worker; SIGTERM while a task runs
    stops it within the bound, exit code 0, with its last offset in the offsets file."""
    topic, name = unique("t"), unique("src")
    create_topic(connect_cluster.bootstrap_servers, topic)
    source_file = tmp_path / "in.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(3)))
    connector_file = tmp_path / "source.properties"
    connector_file.write_text(
        f"name={name}\nconnector.class={SOURCE_CLASS}\ntasks.max=1\n"
        f"file={source_file}\ntopic={topic}\n"
    )
    with standalone(tmp_path, connect_cluster.bootstrap_servers, connector_file) as running:
        # the REST API answers before the files' connectors are created (as Kafka's does)
        wait_until(
            lambda: running.ok("GET", "/connectors") == [name],
            f"{name} listed",
            WAIT_TIMEOUT_S,
            poll_s=POLL_S,
            explain=worker_log,
        )
        wait_state(running, name, "RUNNING", ["RUNNING"])
        # RUNNING is reported before the first poll: stop once the lines are in the topic
        wait_until(
            lambda: high_watermark(connect_cluster, topic) == 3,
            f"3 records in {topic}",
            WAIT_TIMEOUT_S,
            poll_s=POLL_S,
            explain=worker_log,
        )
        started = time.monotonic()
    assert time.monotonic() - started < STOP_TIMEOUT_S
    stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
    assert [json.loads(v) for _, v in stored] == [{"position": source_file.stat().st_size}]
