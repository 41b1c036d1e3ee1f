"""apply: create when missing, patch only the fields we own that differ, never the immutable
or foreign ones; the kind table's paths."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.kube import apply, contains, kind_of
from support.operator_doubles import FakeKube


def sts(replicas=3, image="odradek:1", vct=("data-0",)):
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "demo-broker", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": [{"name": "broker", "image": image}]}},
            "volumeClaimTemplates": [{"metadata": {"name": v}} for v in vct],
        },
    }


def test_paths():
    assert kind_of("Pod").path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert kind_of("StatefulSet").path("ns") == "/apis/apps/v1/namespaces/ns/statefulsets"
    assert kind_of("OdradekCluster").path("ns", "demo") == (
        "/apis/odradek.io/v1alpha1/namespaces/ns/odradekclusters/demo"
    )


def test_contains_ignores_fields_added_by_others():
    live = {"a": 1, "b": [{"x": 1, "default": 2}], "c": "other"}
    assert contains(live, {"a": 1, "b": [{"x": 1}]})
    assert not contains(live, {"b": [{"x": 1}, {"x": 2}]})


def test_create_then_noop_then_patch_only_what_differs():
    kube = FakeKube()
    assert asyncio.run(apply(kube, sts())).action == "Created"
    live = kube.find("StatefulSet", "demo-broker")
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = "/dev/x"
    live["status"] = {"replicas": 3}
    assert asyncio.run(apply(kube, sts())).action == "Noop"
    result = asyncio.run(apply(kube, sts(image="odradek:2")))
    assert result.action == "Patched"
    patch = kube.actions[-1][4]
    assert set(patch) == {"spec"} and set(patch["spec"]) == {"template"}


def test_never_patches_claim_templates_nor_kept_replicas():
    kube = FakeKube()
    asyncio.run(apply(kube, sts()))
    result = asyncio.run(apply(kube, sts(replicas=5, vct=("data-0", "data-1")), keep_replicas=True))
    assert result.action == "Noop"
    assert asyncio.run(apply(kube, sts(replicas=5))).action == "Patched"


def test_a_call_the_operator_does_not_declare_is_refused_as_the_api_server_would():
    # kube.OPERATOR_VERBS is the chart's Role (tests/chart): a call outside it would be a 403.
    from odradek_operator.kube import OPERATOR_VERBS, KubeError, check_allowed

    check_allowed("Service", "patch")
    check_allowed("OdradekTopic", "patch", "status")
    for kind, verb in (("Service", "delete"), ("ConfigMap", "update"), ("Secret", "delete")):
        with pytest.raises(KubeError) as refused:
            check_allowed(kind, verb)
        assert refused.value.status == 403
    assert "delete" not in OPERATOR_VERBS["Deployment"]
