"""Connect workers configured with the Java client's security keys only (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.*``) move records on a SASL_SSL
cluster: a standalone worker file source -> topic -> file sink, a distributed worker (group
membership and internal topics secured too) a file source; a wrong password stops a worker
with a clear error instead of hanging; under the Principal override policy a connector produces
as its own principal; two distributed workers serve their REST API over HTTPS with basic
authentication (Kafka's BasicAuthSecurityRestExtension) and forward to each other."""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.pki import LocalPki
from support.clusters import running_cluster
from support.connect_workers import WorkerProcess, free_port, http, wait_for
from support.consuming import poll_messages
from support.waiting import wait_equal, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.connect]

WAIT_S = 60.0
FAIL_WITHIN_S = 45.0  # a refused worker exits within this (its start is bounded)
STOP_S = 30.0
HTTP_TIMEOUT_S = 30.0
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
SERVICES = Path(__file__).resolve().parents[2] / "services"
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
}


def java_security(data_dir: Path) -> dict[str, str]:
    """The cluster's credentials as a Java client's settings: ``security.protocol`` and
    ``sasl.mechanism`` (one name in both clients) and the keys after the comment line of
    ``client.properties`` (``sasl.jaas.config``, ``ssl.truststore.*``)."""
    shared, java, after_comment = {}, {}, False
    for line in (data_dir / "client.properties").read_text().splitlines():
        if line.startswith("#"):
            after_comment = True
            continue
        key, _, value = line.partition("=")
        if after_comment:
            java[key] = value
        elif key in ("security.protocol", "sasl.mechanisms", "sasl.mechanism"):
            shared["sasl.mechanism" if key.startswith("sasl.") else key] = value
    assert "sasl.jaas.config" in java and "ssl.truststore.location" in java
    return {**shared, **java}


def librdkafka_settings(data_dir: Path) -> dict[str, str]:
    settings = {}
    for line in (data_dir / "client.properties").read_text().splitlines():
        if line.startswith("#"):
            break
        key, _, value = line.partition("=")
        settings[key] = value
    return settings


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[object, Path]]:
    data_dir = tmp_path_factory.mktemp("secured-connect")
    with running_cluster(
        data_dir, brokers=1, broker_overrides=GROUP_OVERRIDES, security="sasl_ssl"
    ) as state:
        yield state, data_dir


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def worker_settings(state, data_dir: Path, work: Path, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": state.bootstrap_servers,
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        "offset.flush.interval.ms": "200",
        "task.shutdown.graceful.timeout.ms": "3000",
        "listeners": "http://127.0.0.1:0",
        "rest.advertised.host.name": "127.0.0.1",
        **java_security(data_dir),
        **extra,
    }


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SERVICES), os.environ.get("PYTHONPATH", "")]),
    }


def start_standalone(properties: Path, log: Path, *connectors: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", "connect", "standalone", str(properties),
             *map(str, connectors)],
            stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True,
        )  # fmt: skip


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(STOP_S)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def create_topic(data_dir: Path, topic: str) -> None:
    admin = AdminClient(librdkafka_settings(data_dir))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)


def test_a_standalone_worker_moves_records_file_to_topic_to_file(secured, tmp_path):
    state, data_dir = secured
    create_topic(data_dir, "secured-lines")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i}" for i in range(20)]
    source_file.write_text("\n".join(lines) + "\n")
    source = write_properties(
        tmp_path / "source.properties",
        {
            "name": "secured-source",
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": "secured-lines",
        },
    )
    sink = write_properties(
        tmp_path / "sink.properties",
        {
            "name": "secured-sink",
            "connector.class": "FileStreamSink",
            "file": str(sink_file),
            "topics": "secured-lines",
        },
    )
    settings = worker_settings(
        state, data_dir, tmp_path, **{"offset.storage.file.filename": str(tmp_path / "off.json")}
    )
    log = tmp_path / "worker.log"
    process = start_standalone(
        write_properties(tmp_path / "w.properties", settings), log, source, sink
    )
    try:

        def sunk() -> list[str]:
            assert process.poll() is None, log.read_text()[-4000:]
            return lines_of(sink_file)

        wait_equal(
            sunk, lines, "the sink file's lines", WAIT_S, explain=lambda: log.read_text()[-4000:]
        )
    finally:
        stop(process)
    assert process.returncode == 0, log.read_text()[-4000:]


def test_a_distributed_worker_joins_and_runs_a_source(secured, tmp_path):
    state, data_dir = secured
    settings = worker_settings(
        state,
        data_dir,
        tmp_path,
        **{
            "group.id": "secured-connect",
            "config.storage.topic": "secured-connect-configs",
            "offset.storage.topic": "secured-connect-offsets",
            "status.storage.topic": "secured-connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "session.timeout.ms": "3000",
            "heartbeat.interval.ms": "500",
        },
    )
    del settings["listeners"]  # WorkerProcess gives its own
    port = free_port()
    worker = WorkerProcess(
        write_properties(tmp_path / "w.properties", settings), port, tmp_path / "worker.log"
    )
    try:
        wait_for(worker.ready, "the distributed worker's REST API", WAIT_S, [worker])
        source_file = tmp_path / "in.txt"
        source_file.write_text("".join(f"record {i}\n" for i in range(10)))
        connector = {
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": "secured-distributed",
        }
        wait_for(
            lambda: (
                http("PUT", f"{worker.url}/connectors/dsource/config", connector)[0] in (200, 201)
            ),
            "the connector to be created",
            WAIT_S,
            [worker],
        )
        consumer = Consumer(
            {
                **librdkafka_settings(data_dir),
                "group.id": "secured-check",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["secured-distributed"])
        try:
            seen = [m.value().decode() for m in poll_messages(consumer, 10, WAIT_S)]
        finally:
            consumer.close()
        assert seen == [f"record {i}" for i in range(10)], worker.log.read_text()[-4000:]
    finally:
        worker.stop()


def _wrong_password(settings: dict[str, str]) -> dict[str, str]:
    jaas = settings["sasl.jaas.config"]
    start = jaas.index('password="') + len('password="')
    end = jaas.index('"', start)
    return {**settings, "sasl.jaas.config": jaas[:start] + "not-the-password" + jaas[end:]}


@pytest.mark.parametrize("mode", ["standalone", "distributed"])
def test_a_wrong_password_stops_the_worker_with_a_clear_error(secured, tmp_path, mode):
    state, data_dir = secured
    settings = _wrong_password(
        worker_settings(
            state,
            data_dir,
            tmp_path,
            **(
                {"offset.storage.file.filename": str(tmp_path / "off.json")}
                if mode == "standalone"
                else {
                    "group.id": "wrong-password",
                    "config.storage.topic": "wrong-configs",
                    "offset.storage.topic": "wrong-offsets",
                    "status.storage.topic": "wrong-status",
                }
            ),
        )
    )
    log = tmp_path / "worker.log"
    properties = write_properties(tmp_path / "w.properties", settings)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", "connect", mode, str(properties)],
            stdout=out, stderr=subprocess.STDOUT, env=env(), start_new_session=True,
        )  # fmt: skip
    try:
        process.wait(FAIL_WITHIN_S)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail(f"the worker did not stop on a wrong password:\n{log.read_text()[-4000:]}")
    text = log.read_text()
    assert process.returncode == 1, text[-4000:]
    assert "the Kafka cluster refused the worker's credentials" in text, text[-4000:]
    assert "not-the-password" not in text


def _call(method: str, url: str, context, auth: str | None, body: object | None = None):
    """(status, body text) of an HTTPS request; an HTTP error status is an answer."""
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_distributed_workers_serve_https_with_basic_auth_and_forward_to_each_other(
    secured, tmp_path
):
    state, data_dir = secured
    pki = LocalPki.create(tmp_path / "rest-pki", ("127.0.0.1", "localhost"))
    keystore = pki.issue("connect-rest")
    credentials = tmp_path / "rest.credentials"
    credentials.write_text("operator=rest-secret\n")
    jaas = tmp_path / "connect.jaas"
    jaas.write_text(
        "KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension."
        f'PropertyFileLoginModule required file="{credentials}";\n}};\n'
    )
    settings = worker_settings(
        state,
        data_dir,
        tmp_path,
        **{
            "group.id": "secured-rest",
            "config.storage.topic": "secured-rest-configs",
            "offset.storage.topic": "secured-rest-offsets",
            "status.storage.topic": "secured-rest-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "session.timeout.ms": "3000",
            "heartbeat.interval.ms": "500",
            "rest.extension.classes": "org.apache.kafka.connect.rest.basic.auth.extension."
            "BasicAuthSecurityRestExtension",
            "listeners.https.ssl.keystore.type": "PEM",
            "listeners.https.ssl.keystore.location": str(keystore),
            "listeners.https.ssl.truststore.type": "PEM",
            "listeners.https.ssl.truststore.location": str(pki.ca_path),
            "listeners.https.ssl.client.auth": "required",  # forwarding shows its certificate
        },
    )
    properties = write_properties(tmp_path / "w.properties", settings)
    worker_env = {**env(), "KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    context = ssl.create_default_context(cafile=str(pki.ca_path))
    context.load_cert_chain(str(pki.issue("rest-client")))
    auth = "Basic " + base64.b64encode(b"operator:rest-secret").decode()
    workers = []
    try:
        for i in range(2):
            port = free_port()
            log = tmp_path / f"worker-{i}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "odradek.cli", "connect", "distributed",
                     str(properties), "--override", f"listeners=https://127.0.0.1:{port}"],
                    stdout=out, stderr=subprocess.STDOUT, env=worker_env, start_new_session=True,
                )  # fmt: skip
            workers.append((process, f"https://127.0.0.1:{port}", log))

        def ready(url: str, process, log: Path) -> bool:
            assert process.poll() is None, log.read_text()[-4000:]
            try:
                return _call("GET", f"{url}/connectors", context, auth)[0] == 200
            except OSError:
                return False

        for process, url, log in workers:
            wait_until(
                functools.partial(ready, url, process, log),
                f"the worker at {url} serving",
                WAIT_S,
                poll_s=0.3,
                explain=lambda log=log: log.read_text()[-4000:],
            )
        url = workers[0][1]
        assert _call("GET", f"{url}/connectors", context, None) == (
            401,
            "User cannot access the resource.",
        )
        wrong = "Basic " + base64.b64encode(b"operator:guess").decode()
        assert _call("GET", f"{url}/connectors", context, wrong)[0] == 401
        no_certificate = ssl.create_default_context(cafile=str(pki.ca_path))
        with pytest.raises(OSError):  # ssl.client.auth=required: the handshake fails
            _call("GET", f"{url}/connectors", no_certificate, auth)
        # Only the leader writes configs: one of the two workers forwards its request, over
        # HTTPS, with the client's credentials.
        source = tmp_path / "in.txt"
        source.write_text("a\n")
        for i, (_, url, log) in enumerate(workers):
            config = {"connector.class": "FileStreamSource", "file": str(source), "topic": "r"}
            deadline = time.monotonic() + WAIT_S
            while True:
                status, body = _call(
                    "PUT", f"{url}/connectors/rest-{i}/config", context, auth, config
                )
                if status in (200, 201) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)  # 409 while the group rebalances
            assert status in (200, 201), (status, body, log.read_text()[-4000:])
        status, listed = _call("GET", f"{workers[1][1]}/connectors", context, auth)
        assert status == 200 and {"rest-0", "rest-1"} <= set(json.loads(listed))
        forwarded = 0.0
        for _, url, _ in workers:
            status, metrics = _call("GET", f"{url}/metrics", context, auth)
            assert status == 200
            forwarded += sum(
                float(line.rsplit(" ", 1)[1])
                for line in metrics.splitlines()
                if line.startswith("odradek_connect_rest_forwarded_requests_total")
            )
        assert forwarded >= 1, "no request was forwarded to the leader"
    finally:
        for process, _, _ in workers:
            stop(process)


def test_the_principal_policy_lets_a_connector_produce_as_its_own_principal(secured, tmp_path):
    """Under ``connector.client.config.override.policy=Principal`` a connector's
    ``producer.override.sasl.jaas.config`` is its producer's principal: a user with no ACL
    cannot write where the worker's super user can; any other override is refused (400)."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    state, data_dir = secured
    admin = AdminClient(librdkafka_settings(data_dir))
    upsert = UserScramCredentialUpsertion(
        "no-acl", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"no-acl-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(WAIT_S)
    create_topic(data_dir, "principal-lines")
    settings = worker_settings(
        state,
        data_dir,
        tmp_path,
        **{
            "offset.storage.file.filename": str(tmp_path / "off.json"),
            "connector.client.config.override.policy": "Principal",
        },
    )
    log = tmp_path / "worker.log"
    process = start_standalone(write_properties(tmp_path / "w.properties", settings), log)
    try:

        def serving() -> re.Match[str] | None:
            assert process.poll() is None, log.read_text()[-4000:]
            return re.search(r"serving the REST API at (http://\S+)", log.read_text())

        found = wait_until(
            serving,
            "the REST API's address in the log",
            WAIT_S,
            explain=lambda: log.read_text()[-4000:],
        )
        url = found.group(1)
        (tmp_path / "worker.txt").write_text("by the worker\n")
        (tmp_path / "no-acl.txt").write_text("by no-acl\n")

        def source(file: str, **overrides: str) -> dict[str, str]:
            return {
                "connector.class": "FileStreamSource",
                "file": str(tmp_path / file),
                "topic": "principal-lines",
                **overrides,
            }

        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="no-acl" password="no-acl-secret";'
        )
        status, body = http(
            "PUT",
            f"{url}/connectors/linger/config",
            source("worker.txt", **{"producer.override.linger.ms": "1"}),
        )
        assert status == 400 and "The 'Principal' policy does not allow" in body["message"]
        assert http("PUT", f"{url}/connectors/as-worker/config", source("worker.txt"))[0] == 201
        assert (
            http(
                "PUT",
                f"{url}/connectors/as-no-acl/config",
                source("no-acl.txt", **{"producer.override.sasl.jaas.config": jaas}),
            )[0]
            == 201
        )

        def task_state(name: str) -> str | None:
            status, body = http("GET", f"{url}/connectors/{name}/status")
            tasks = body.get("tasks", []) if status == 200 else []
            return tasks[0]["state"] if tasks else None

        wait_equal(
            lambda: task_state("as-no-acl"),
            "FAILED",
            "as-no-acl's task state",
            WAIT_S,
            poll_s=0.5,
            explain=lambda: log.read_text()[-4000:],
        )
        trace = http("GET", f"{url}/connectors/as-no-acl/status")[1]["tasks"][0]["trace"]
        assert "AUTHORIZATION" in trace.upper(), trace
        assert task_state("as-worker") == "RUNNING"
        consumer = Consumer(
            {**librdkafka_settings(data_dir), "group.id": "principal-check",
             "auto.offset.reset": "earliest"}
        )  # fmt: skip
        consumer.subscribe(["principal-lines"])
        seen: list[str] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while "by the worker" not in seen and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.append(message.value().decode())
        finally:
            consumer.close()
        assert seen == ["by the worker"]
    finally:
        stop(process)
