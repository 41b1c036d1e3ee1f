"""The operator's Kubernetes port (ApiKube over the kubernetes client) against the test API
server: create, get, list by labels, merge patch of the object and its status, apply, delete
with a propagation policy."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.kube import ApiKube, KubeError, apply

pytestmark = pytest.mark.k8s


def config_map(namespace, name="c", data=None, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": "x"}},
        "data": data or {"a": "1"},
    }


# The port's own test makes calls the operator never does (it creates clusters, deletes
# ConfigMaps): it widens the port's table of allowed calls.
EVERY_VERB = frozenset({"get", "list", "create", "patch", "delete"})
ALL_CALLS = {k: EVERY_VERB for k in ("ConfigMap", "OdradekCluster", "OdradekCluster/status")}


def test_crud_and_apply(kube_client, namespace):
    kube = ApiKube(kube_client, allowed=ALL_CALLS)

    async def scenario():
        assert await kube.get("ConfigMap", "c", namespace) is None
        created = await kube.create(config_map(namespace))
        assert created["metadata"]["uid"]
        with pytest.raises(KubeError) as exists:
            await kube.create(config_map(namespace))
        assert exists.value.conflict
        await kube.create(config_map(namespace, "other", labels={"app": "y"}))
        listed = await kube.list("ConfigMap", namespace, {"app": "x"})
        assert [o["metadata"]["name"] for o in listed] == ["c"]
        assert listed[0]["kind"] == "ConfigMap"
        assert (await apply(kube, config_map(namespace))).action == "Noop"
        result = await apply(kube, config_map(namespace, data={"a": "2"}))
        assert result.action == "Patched" and result.obj["data"] == {"a": "2"}
        assert await kube.delete("ConfigMap", "c", namespace, propagation="Orphan")
        assert not await kube.delete("ConfigMap", "c", namespace)
        cluster = await kube.create(
            {
                "apiVersion": "odradek.io/v1alpha1",
                "kind": "OdradekCluster",
                "metadata": {"name": "demo", "namespace": namespace},
                "spec": {"brokers": {"replicas": 3}},
            }
        )
        await kube.merge_patch(
            "OdradekCluster", "demo", namespace, {"status": {"brokerIds": [0]}}, "status"
        )
        cluster = await kube.get("OdradekCluster", "demo", namespace)
        assert cluster["status"]["brokerIds"] == [0]
        await kube.delete("OdradekCluster", "demo", namespace)

    asyncio.run(scenario())


def test_the_operators_port_refuses_calls_it_does_not_declare(kube_client, namespace):
    kube = ApiKube(kube_client)  # the operator's table: the chart's Role
    with pytest.raises(KubeError) as refused:
        asyncio.run(kube.delete("ConfigMap", "c", namespace))
    assert refused.value.status == 403
