"""Connect's reconcilers against the in-memory Kubernetes and a fake REST API: the workers'
objects applied and counted; a connector's config put only when it differs, its target state
followed, its status (failed tasks with the trace's first line) reported; retry while workers
are unreachable or rebalancing, refusal with Kafka Connect's message for a bad config; delete."""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

import pytest

from odradek_operator.model import openapi
from odradek_operator.reconcile import connect
from odradek_operator.reconcile.connect_api import ConnectRefused, ConnectUnavailable
from odradek_operator.reconcile.status import Refused, Retry
from support.operator_doubles import FakeKube


def run(coro):
    return asyncio.run(coro)


CONNECT = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekConnect",
    "metadata": {"name": "sync", "namespace": "ns", "generation": 3},
    "spec": {"replicas": 2, "clusterRef": "demo"},
}
CLUSTER = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekCluster",
    "metadata": {"name": "demo", "namespace": "ns"},
    "spec": {},
    "status": {"bootstrap": "demo-bootstrap.ns.svc:9092"},
}


def worker(name: str, ip: str, ready: bool = True) -> dict:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {
                "app.kubernetes.io/name": "odradek-connect",
                "app.kubernetes.io/instance": "sync",
                "app.kubernetes.io/component": "connect",
            },
        },
        "status": {
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def ready_condition(obj: dict) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


def test_connect_waits_for_its_cluster_then_applies_and_counts_workers() -> None:
    kube = FakeKube()
    body = kube.put(CONNECT)
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert retry.value.reason == "ClusterNotFound"
    assert ready_condition(kube.find("OdradekConnect", "sync"))["status"] == "False"

    kube.put(CLUSTER)
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert retry.value.reason == "WorkersStarting"
    for kind, name in (
        ("ConfigMap", "sync-connect-config"),
        ("Service", "sync-connect-api"),
        ("Deployment", "sync-connect"),
    ):
        assert kube.find(kind, name) is not None, (kind, name)
    props = kube.find("ConfigMap", "sync-connect-config")["data"]["connect-distributed.properties"]
    assert "bootstrap.servers=demo-bootstrap.ns.svc\\:9092" in props or (
        "bootstrap.servers=demo-bootstrap.ns.svc:9092" in props
    )

    kube.put(worker("sync-connect-abc-1", "127.0.2.1"))
    kube.put(worker("sync-connect-abc-2", "127.0.2.2"))
    status = run(connect.reconcile_connect(kube, "odradek:1", body))
    assert status["replicas"] == 2 and status["readyReplicas"] == 2
    assert status["url"] == "http://sync-connect-api.ns.svc:8083"
    assert status["observedGeneration"] == 3
    assert status["bootstrapServers"] == "demo-bootstrap.ns.svc:9092"
    saved = kube.find("OdradekConnect", "sync")
    assert ready_condition(saved)["status"] == "True"
    assert ready_condition(saved)["reason"] == "WorkersReady"
    assert openapi.errors(saved) == []  # the status the CRD's schema describes


def test_a_refused_connect_spec_sets_the_error_condition() -> None:
    kube = FakeKube()
    bad = copy.deepcopy(CONNECT)
    bad["spec"]["config"] = {"listeners": "http://:1"}
    body = kube.put(bad)
    with pytest.raises(Refused) as refused:
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert refused.value.reason == "InvalidSpec"
    error = next(
        c
        for c in kube.find("OdradekConnect", "sync")["status"]["conditions"]
        if c["type"] == "Error"
    )
    assert error["status"] == "True" and "spec.config[listeners]" in error["message"]


class FakeApi:
    """Kafka Connect's REST API as the reconciler sees it, with a scripted status."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.targets: dict[str, str] = {}
        self.calls: list[tuple] = []
        self.fail: Exception | None = None
        self.refuse_put: str | None = None
        self.tasks_state: str | None = None
        self.trace: str | None = None
        self.closed = 0

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def config(self, name):
        self._check()
        config = self.configs.get(name)
        return None if config is None else {**config, "name": name}

    async def put_config(self, name, config):
        self._check()
        self.calls.append(("put", name, dict(config)))
        if self.refuse_put:
            raise ConnectRefused(400, self.refuse_put)
        self.configs[name] = dict(config)
        self.targets.setdefault(name, "STARTED")

    async def set_target_state(self, name, target):
        self.calls.append(("target", name, target))
        self.targets[name] = target

    async def status(self, name):
        self._check()
        if name not in self.configs:
            return None
        state = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[self.targets[name]]
        tasks_max = int(self.configs[name]["tasks.max"])
        tasks = (
            []
            if state == "STOPPED"
            else [
                {"id": i, "state": self.tasks_state or state, "worker_id": "127.0.2.1:8083"}
                for i in range(tasks_max)
            ]
        )
        if self.trace:
            tasks[-1]["trace"] = self.trace
        return {
            "name": name,
            "connector": {"state": state, "worker_id": "127.0.2.1:8083"},
            "tasks": tasks,
            "type": "source",
        }

    async def delete(self, name):
        self._check()
        self.calls.append(("delete", name))
        return self.configs.pop(name, None) is not None

    async def close(self):
        self.closed += 1


CONNECTOR = {
    "apiVersion": "odradek.io/v1alpha1",
    "kind": "OdradekConnector",
    "metadata": {"name": "lines", "namespace": "ns", "generation": 1},
    "spec": {
        "connectRef": "sync",
        "class": "FileStreamSource",
        "tasksMax": 2,
        "config": {"file": "/in.txt", "topic": "lines"},
    },
}


def setup(spec: dict[str, Any] | None = None) -> tuple[FakeKube, FakeApi, dict, list]:
    kube = FakeKube()
    kube.put(CONNECT)
    kube.put(worker("sync-connect-abc-1", "127.0.2.1"))
    kube.put(worker("sync-connect-abc-2", "127.0.2.2", ready=False))
    body = copy.deepcopy(CONNECTOR)
    body["spec"].update(spec or {})
    body = kube.put(body)
    api = FakeApi()
    asked: list = []

    def api_for(urls):
        asked.append(list(urls))
        return api

    return kube, api, body, asked


def sync(kube, api_for, body):
    return run(connect.sync_connector(kube, api_for, body))


def test_connector_is_created_running_and_reported() -> None:
    kube, api, body, asked = setup()
    status = sync(kube, lambda urls: asked.append(urls) or api, body)
    assert asked == [["http://127.0.2.1:8083"]]  # the ready worker only
    assert api.calls == [
        (
            "put",
            "lines",
            {
                "file": "/in.txt",
                "topic": "lines",
                "connector.class": "FileStreamSource",
                "tasks.max": "2",
            },
        )
    ]
    assert status["connectorStatus"] == {"state": "RUNNING", "worker": "127.0.2.1:8083"}
    assert [t["state"] for t in status["tasks"]] == ["RUNNING", "RUNNING"]
    saved = kube.find("OdradekConnector", "lines")
    assert ready_condition(saved)["status"] == "True"
    assert ready_condition(saved)["message"] == "connector RUNNING with 2 task(s)"
    assert api.closed == 1

    api.calls.clear()
    sync(kube, lambda urls: api, kube.find("OdradekConnector", "lines"))
    assert api.calls == []  # in sync: nothing written


def test_pause_resume_and_stop_follow_the_spec() -> None:
    kube, api, body, _ = setup()
    sync(kube, lambda urls: api, body)
    for state, target, reached in (
        ("paused", "PAUSED", "PAUSED"),
        ("running", "STARTED", "RUNNING"),
        ("stopped", "STOPPED", "STOPPED"),
    ):
        api.calls.clear()
        kube.objects["OdradekConnector", "ns", "lines"]["spec"]["state"] = state
        status = sync(kube, lambda urls: api, kube.find("OdradekConnector", "lines"))
        assert api.calls == [("target", "lines", target)]
        assert status["connectorStatus"]["state"] == reached
        assert ready_condition(kube.find("OdradekConnector", "lines"))["reason"] == (
            reached.capitalize()
        )


def test_a_changed_config_is_put_again() -> None:
    kube, api, body, _ = setup()
    sync(kube, lambda urls: api, body)
    api.calls.clear()
    kube.objects["OdradekConnector", "ns", "lines"]["spec"]["tasksMax"] = 1
    sync(kube, lambda urls: api, kube.find("OdradekConnector", "lines"))
    assert [c[0] for c in api.calls] == ["put"] and api.calls[0][2]["tasks.max"] == "1"


def test_failed_tasks_are_a_condition_with_the_traces_first_line() -> None:
    kube, api, body, _ = setup()
    api.tasks_state = "FAILED"
    api.trace = "org.apache.kafka.connect.errors.ConnectException: no such file\n  at line 2\n"
    status = sync(kube, lambda urls: api, body)
    assert status["tasks"][1]["trace"].startswith("org.apache")
    ready = ready_condition(kube.find("OdradekConnector", "lines"))
    assert ready["status"] == "False" and ready["reason"] == "TasksFailed"
    assert "2 of 2 task(s) failed" in ready["message"]
    first_line = "org.apache.kafka.connect.errors.ConnectException: no such file"
    assert f"task 1 failed on 127.0.2.1:8083: {first_line}" in ready["message"]
    assert "line 2" not in ready["message"]
    assert openapi.errors(kube.find("OdradekConnector", "lines")) == []


def test_a_python_traceback_is_summed_up_by_its_exception_line() -> None:
    kube, api, body, _ = setup()
    api.tasks_state = "FAILED"
    api.trace = (
        "Traceback (most recent call last):\n"
        '  File "file.py", line 193, in poll\n'
        "    self._file = open(self._filename)\n"
        "IsADirectoryError: [Errno 21] Is a directory: '/data'\n"
    )
    sync(kube, lambda urls: api, body)
    ready = ready_condition(kube.find("OdradekConnector", "lines"))
    assert "task 1 failed on 127.0.2.1:8083: IsADirectoryError: [Errno 21]" in ready["message"]
    assert "Traceback" not in ready["message"] and "line 193" not in ready["message"]


def test_tasks_not_started_yet_retry_soon() -> None:
    kube, api, body, _ = setup()
    api.tasks_state = "UNASSIGNED"
    with pytest.raises(Retry) as retry:
        sync(kube, lambda urls: api, body)
    assert retry.value.reason == "Transitioning"
    assert retry.value.delay_s <= 2
    assert kube.find("OdradekConnector", "lines")["status"]["tasks"][0]["state"] == "UNASSIGNED"


def test_unreachable_or_rebalancing_workers_retry() -> None:
    kube, api, body, _ = setup()
    api.fail = ConnectUnavailable("PUT /connectors/lines/config: 409 rebalance in progress")
    with pytest.raises(Retry) as retry:
        sync(kube, lambda urls: api, body)
    assert retry.value.reason == "WorkersUnavailable" and "409" in str(retry.value)
    assert api.closed == 1


def test_no_ready_worker_retries() -> None:
    kube, api, body, _ = setup()
    kube.objects.pop(("Pod", "ns", "sync-connect-abc-1"))
    with pytest.raises(Retry) as retry:
        sync(kube, lambda urls: api, body)
    assert retry.value.reason == "WorkersUnavailable"
    kube.objects.pop(("OdradekConnect", "ns", "sync"))
    with pytest.raises(Retry) as retry:
        sync(kube, lambda urls: api, body)
    assert retry.value.reason == "ConnectNotFound"


def test_a_refused_config_is_reported_with_kafka_connects_message() -> None:
    kube, api, body, _ = setup()
    api.refuse_put = (
        "Connector configuration is invalid and contains the following 1 error(s):\n"
        'Missing required configuration "topic" which has no default value.'
    )
    with pytest.raises(Refused) as refused:
        sync(kube, lambda urls: api, body)
    assert refused.value.reason == "InvalidConfig"
    error = next(
        c
        for c in kube.find("OdradekConnector", "lines")["status"]["conditions"]
        if c["type"] == "Error"
    )
    assert error["status"] == "True"
    assert 'Missing required configuration "topic"' in error["message"]


def test_delete_deletes_the_connector_unless_its_connect_is_gone() -> None:
    kube, api, body, _ = setup()
    sync(kube, lambda urls: api, body)
    said = run(connect.delete_connector(kube, lambda urls: api, body))
    assert said == "connector lines deleted" and "lines" not in api.configs
    said = run(connect.delete_connector(kube, lambda urls: api, body))
    assert said == "connector lines did not exist"
    api.fail = ConnectUnavailable("no worker answered")
    with pytest.raises(Retry):
        run(connect.delete_connector(kube, lambda urls: api, body))
    kube.objects.pop(("OdradekConnect", "ns", "sync"))
    said = run(connect.delete_connector(kube, lambda urls: api, body))
    assert "is gone" in said


SECURED_CLUSTER = {
    **CLUSTER,
    "spec": {
        "listeners": [
            {
                "name": "scram",
                "port": 9095,
                "tls": True,
                "authentication": {"type": "scram-sha-512"},
            }
        ]
    },
}
SCRAM_CONNECT = {
    **CONNECT,
    "spec": {
        **CONNECT["spec"],
        "authentication": {
            "type": "scram-sha-512",
            "username": "connect",
            "passwordSecret": {"secretName": "connect", "password": "password"},
        },
    },
}


def secret(name: str, **data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns"},
        "data": data,
    }


def template_hash(kube: FakeKube) -> str:
    deployment = kube.find("Deployment", "sync-connect")
    return deployment["spec"]["template"]["metadata"]["annotations"]["odradek.io/config-hash"]


def test_a_secured_connect_waits_for_its_secrets_and_follows_their_values() -> None:
    kube = FakeKube()
    kube.put(SECURED_CLUSTER)
    body = kube.put(SCRAM_CONNECT)
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body, "odradek"))
    assert retry.value.reason == "SecretNotFound" and "'connect'" in str(retry.value)
    assert kube.find("Deployment", "sync-connect") is None
    kube.put(secret("connect", password="cHcx"))
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body, "odradek"))
    assert retry.value.reason == "SecretNotFound" and "demo-cluster-ca-cert" in str(retry.value)
    kube.put(secret("demo-cluster-ca-cert", **{"ca.crt": "TkVX", "ca-2026-01-01.crt": "T0xE"}))
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body, "odradek"))
    assert retry.value.reason == "WorkersStarting"
    saved = kube.find("OdradekConnect", "sync")
    assert saved["status"]["bootstrapServers"] == "demo-bootstrap.ns.svc:9095"
    assert saved["status"]["securityProtocol"] == "SASL_SSL"
    assert openapi.errors(saved) == []
    props = kube.find("ConfigMap", "sync-connect-config")["data"]["connect-distributed.properties"]
    assert "cHcx" not in props and "${odradekenv:ODRADEK_CONNECT_SASL_PASSWORD}" in props
    assert kube.find("NetworkPolicy", "sync-connect-network-policy") is not None
    # The workers trust both CAs of the cluster CA's Secret (old and new, during a renewal).
    bundle = kube.find("Secret", "sync-connect-trusted-certs")["data"]["ca.crt"]
    assert base64.b64decode(bundle) == b"OLD\nNEW\n"
    before = template_hash(kube)
    kube.put(secret("connect", password="cHcy"))  # a new password: the workers are replaced
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", body, "odradek"))
    assert template_hash(kube) != before


def test_a_cluster_without_the_listener_is_waited_for() -> None:
    kube = FakeKube()
    kube.put(CLUSTER)  # one plaintext listener
    body = kube.put(SCRAM_CONNECT)
    with pytest.raises(Retry) as retry:
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert retry.value.reason == "NoMatchingListener"
    assert "scram-sha-512" in str(retry.value)


def test_network_policies_false_deletes_only_the_policy_it_made() -> None:
    kube = FakeKube()
    kube.put(CLUSTER)
    body = kube.put(CONNECT)
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert kube.find("NetworkPolicy", "sync-connect-network-policy") is not None
    off = copy.deepcopy(body)
    off["spec"]["networkPolicies"] = False
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", off))
    assert kube.deleted("NetworkPolicy") == ["sync-connect-network-policy"]
    theirs = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy"}
    kube.put({**theirs, "metadata": {"name": "sync-connect-network-policy", "namespace": "ns"}})
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", off))
    assert kube.find("NetworkPolicy", "sync-connect-network-policy") is not None


def test_a_renewed_cluster_ca_replaces_the_workers() -> None:
    kube = FakeKube()
    kube.put(SECURED_CLUSTER)
    kube.put(secret("connect", password="cHcx"))
    kube.put(secret("demo-cluster-ca-cert", **{"ca.crt": "T0xE"}))
    body = kube.put(SCRAM_CONNECT)
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", body))
    before = template_hash(kube)
    kube.put(secret("demo-cluster-ca-cert", **{"ca.crt": "TkVX", "ca-2027-01-01.crt": "T0xE"}))
    with pytest.raises(Retry):
        run(connect.reconcile_connect(kube, "odradek:1", body))
    assert template_hash(kube) != before
