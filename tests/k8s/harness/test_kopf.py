"""kopf 1.45 in-process against the test API server: it sees a custom resource, patches status."""

from __future__ import annotations

import asyncio
import logging

import kopf
import pytest

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
