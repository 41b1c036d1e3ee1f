"""kopf 1.45 against the test API server, in-process and as ``kopf run`` with the kubeconfig:
it sees a custom resource and patches its status."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys

import kopf
import pytest

from support.waiting import wait_until

pytestmark = pytest.mark.k8s


@pytest.mark.asyncio
async def test_kopf_handles_a_cluster_resource(kube_api, kubeconfig, namespace, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs):
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.create("odradek.io", "v1alpha1", "odradekclusters", registry=registry)
    def created(spec, patch, **_):
        patch.status["seenBrokers"] = spec["brokers"]["replicas"]
        patch.metadata.annotations["handled"] = "yes"

    settings = kopf.OperatorSettings()
    settings.posting.level = logging.WARNING
    kube_api.store.create(
        "odradekclusters",
        namespace,
        {"metadata": {"name": "demo"}, "spec": {"brokers": {"replicas": 3}}},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=True,
            standalone=True,
            stop_flag=stop,
        )
    )
    try:
        obj = {}
        for _ in range(100):
            obj = kube_api.store.get("odradekclusters", namespace, "demo")
            if obj.get("status", {}).get("seenBrokers") == 3:
                break
            await asyncio.sleep(0.1)
        assert obj.get("status", {}).get("seenBrokers") == 3
        assert obj["metadata"]["annotations"]["handled"] == "yes"
        # kopf's own bookkeeping went through PATCH of metadata
        assert "kopf.zalando.org/last-handled-configuration" in obj["metadata"]["annotations"]
    finally:
        task.cancel()
        with pytest.raises((asyncio.CancelledError, Exception)):
            await asyncio.wait_for(task, 10)


OPERATOR = """
import kopf

@kopf.on.create("odradek.io", "v1alpha1", "odradekclusters")
def created(patch, **_):
    patch.status["seenBy"] = "kopf run"
"""


def test_kopf_run_process_reads_the_kubeconfig(kube_api, kubeconfig, namespace, tmp_path):
    script = tmp_path / "operator.py"
    script.write_text(OPERATOR)
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    log = tmp_path / "kopf.log"
    kube_api.store.create(
        "odradekclusters", namespace, {"metadata": {"name": "demo"}, "spec": {"brokers": {}}}
    )
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "-n", namespace, str(script)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def seen():
            obj = kube_api.store.get("odradekclusters", namespace, "demo")
            return obj.get("status", {}).get("seenBy") == "kopf run"

        try:
            wait_until(seen, "kopf run to patch the status", 30)
        except AssertionError:
            raise AssertionError(log.read_text()[-3000:]) from None
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
