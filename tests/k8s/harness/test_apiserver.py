"""The test API server (tests/support/k8s/apiserver.py) through the ``kubernetes`` client."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import kubernetes
import pytest
from kubernetes.client import ApiException

pytestmark = pytest.mark.k8s


def call(client, method, path, body=None, content_type="application/json", query=()):
    """``ApiClient.call_api`` on a raw path, as the operator's adapter does: (status, JSON)."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    m, url, h, b, _ = client.param_serialize(
        method, path, query_params=list(query), header_params=headers, body=body
    )
    try:
        response = client.call_api(m, url, h, b)
        response.read()
        return response.status, json.loads(response.data or b"null")
    except ApiException as e:
        return e.status, json.loads(e.body)


def cm(name, labels=None, **data):
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


def test_crud_with_generated_fields(kube_client, namespace):
    core = kubernetes.client.CoreV1Api(kube_client)
    created = core.create_namespaced_config_map(namespace, cm("a", k="v"))
    meta = created.metadata
    assert meta.namespace == namespace and meta.uid and meta.resource_version
    assert meta.creation_timestamp is not None and meta.generation == 1

    status, body = call(kube_client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", cm("a"))
    assert status == 409 and body["kind"] == "Status" and body["reason"] == "AlreadyExists"

    # merge patch, strategic merge patch, JSON patch, PUT
    path = f"/api/v1/namespaces/{namespace}/configmaps/a"
    status, body = call(
        kube_client, "PATCH", path, {"data": {"k2": "v2"}}, "application/merge-patch+json"
    )
    assert status == 200 and body["data"] == {"k": "v", "k2": "v2"}
    status, body = call(
        kube_client, "PATCH", path, {"data": {"k": None}}, "application/strategic-merge-patch+json"
    )
    assert body["data"] == {"k2": "v2"}
    ops = [{"op": "add", "path": "/data/k3", "value": "v3"}]
    status, body = call(kube_client, "PATCH", path, ops, "application/json-patch+json")
    assert body["data"] == {"k2": "v2", "k3": "v3"}
    stale = dict(body, data={"x": "y"})
    stale["metadata"] = dict(body["metadata"], resourceVersion="1")
    status, conflict = call(kube_client, "PUT", path, stale)
    assert status == 409 and conflict["reason"] == "Conflict"
    status, body = call(kube_client, "PUT", path, dict(body, data={"x": "y"}))
    assert status == 200 and body["data"] == {"x": "y"} and body["metadata"]["uid"] == meta.uid

    status, body = call(kube_client, "DELETE", path)
    assert status == 200
    status, body = call(kube_client, "GET", path)
    assert status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    status, body = call(kube_client, "DELETE", path)
    assert status == 404


def test_label_selectors_and_generation(kube_client, namespace):
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(namespace, cm("a", {"app": "x", "tier": "1"}))
    core.create_namespaced_config_map(namespace, cm("b", {"app": "x", "tier": "2"}))
    core.create_namespaced_config_map(namespace, cm("c", {"app": "y"}))

    def names(selector):
        items = core.list_namespaced_config_map(namespace, label_selector=selector).items
        return sorted(i.metadata.name for i in items)

    assert names("app=x") == ["a", "b"]
    assert names("app=x,tier!=1") == ["b"]
    assert names("app in (x,y),!tier") == ["c"]
    assert names("tier") == ["a", "b"]
    assert names("app notin (x)") == ["c"]

    apps = kubernetes.client.AppsV1Api(kube_client)
    sts = {
        "metadata": {"name": "s"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "s"}},
            "serviceName": "s",
            "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": []}},
        },
    }
    apps.create_namespaced_stateful_set(namespace, sts)
    path = f"/apis/apps/v1/namespaces/{namespace}/statefulsets/s"
    _, body = call(
        kube_client,
        "PATCH",
        path,
        {"metadata": {"labels": {"a": "b"}}},
        "application/merge-patch+json",
    )
    assert body["metadata"]["generation"] == 1  # metadata only
    _, body = call(
        kube_client, "PATCH", path, {"spec": {"replicas": 2}}, "application/merge-patch+json"
    )
    assert body["metadata"]["generation"] == 2
    # status goes through the subresource only
    _, body = call(
        kube_client, "PATCH", path, {"status": {"replicas": 7}}, "application/merge-patch+json"
    )
    assert "status" not in body or body["status"].get("replicas") != 7
    _, body = call(
        kube_client,
        "PATCH",
        path + "/status",
        {"status": {"replicas": 7}},
        "application/merge-patch+json",
    )
    assert body["status"]["replicas"] == 7 and body["metadata"]["generation"] == 2


def test_watch_from_resource_version(kube_client, namespace):
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(namespace, cm("before"))
    listed = core.list_namespaced_config_map(namespace)
    rv = listed.metadata.resource_version

    def later():
        time.sleep(0.2)
        core.create_namespaced_config_map(namespace, cm("after", {"w": "1"}))
        core.patch_namespaced_config_map("after", namespace, {"data": {"a": "b"}})
        core.delete_namespaced_config_map("after", namespace)

    thread = threading.Thread(target=later)
    thread.start()
    seen = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(
        core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=3
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            watch.stop()
    thread.join()
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]

    # without a resourceVersion: the current objects as ADDED first; selectors apply
    watch = kubernetes.watch.Watch()
    events = list(watch.stream(core.list_namespaced_config_map, namespace, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "before")]
    events = list(
        watch.stream(
            core.list_namespaced_config_map, namespace, label_selector="w=1", timeout_seconds=1
        )
    )
    assert events == []


def test_finalizers_hold_the_deletion(kube_client, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    call(kube_client, "POST", path, {"metadata": {"name": "f", "finalizers": ["x/y"]}})
    status, body = call(kube_client, "DELETE", path + "/f")
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    status, body = call(kube_client, "GET", path + "/f")
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    status, body = call(
        kube_client,
        "PATCH",
        path + "/f",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert status == 200
    status, _ = call(kube_client, "GET", path + "/f")
    assert status == 404


def test_owner_references_background_and_orphan(kube_client, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"

    def owned(name, owner):
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        _, body = call(
            kube_client, "POST", path, {"metadata": {"name": name, "ownerReferences": [ref]}}
        )
        return body

    _, owner = call(kube_client, "POST", path, {"metadata": {"name": "owner"}})
    child = owned("child", owner)
    owned("grandchild", child)
    call(kube_client, "DELETE", path + "/owner", {"propagationPolicy": "Background"})
    for name in ("owner", "child", "grandchild"):
        assert call(kube_client, "GET", f"{path}/{name}")[0] == 404

    _, owner = call(kube_client, "POST", path, {"metadata": {"name": "owner2"}})
    owned("child2", owner)
    call(kube_client, "DELETE", path + "/owner2", query=[("propagationPolicy", "Orphan")])
    status, body = call(kube_client, "GET", path + "/child2")
    assert status == 200 and not body["metadata"].get("ownerReferences")


def test_scale_subresource_of_the_cluster_kind(kube_client, namespace):
    path = f"/apis/odradek.io/v1alpha1/namespaces/{namespace}/odradekclusters"
    status, body = call(
        kube_client,
        "POST",
        path,
        {
            "apiVersion": "odradek.io/v1alpha1",
            "kind": "OdradekCluster",
            "metadata": {"name": "demo"},
            "spec": {"brokers": {"replicas": 3}},
            "status": {"ignored": True},
        },
    )
    assert status == 201 and "status" not in body
    status, scale = call(kube_client, "GET", path + "/demo/scale")
    assert status == 200 and scale["kind"] == "Scale" and scale["spec"]["replicas"] == 3
    status, scale = call(
        kube_client,
        "PATCH",
        path + "/demo/scale",
        {"spec": {"replicas": 5}},
        "application/merge-patch+json",
    )
    assert scale["spec"]["replicas"] == 5
    _, body = call(kube_client, "GET", path + "/demo")
    assert body["spec"]["brokers"]["replicas"] == 5 and body["metadata"]["generation"] == 2
    scale["spec"]["replicas"] = 4
    status, scale = call(kube_client, "PUT", path + "/demo/scale", scale)
    assert status == 200 and scale["spec"]["replicas"] == 4


def test_discovery(kube_client):
    status, body = call(kube_client, "GET", "/apis/odradek.io/v1alpha1")
    names = {r["name"] for r in body["resources"]}
    assert {
        "odradekclusters",
        "odradekclusters/status",
        "odradekclusters/scale",
        "odradektopics",
    } <= names
    status, body = call(kube_client, "GET", "/api/v1")
    assert {"pods", "services", "configmaps", "persistentvolumeclaims", "events"} <= {
        r["name"] for r in body["resources"]
    }
    status, body = call(kube_client, "GET", "/apis")
    groups = {g["name"] for g in body["groups"]}
    assert {"apps", "policy", "odradek.io", "kopf.dev"} <= groups
    assert call(kube_client, "GET", "/apis/nothing.io/v1/things")[0] == 404


def test_dry_run_refused_and_initial_events_bookmark(kube_client, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, body = call(kube_client, "POST", path, cm("d"), query=[("dryRun", "All")])
    assert status == 400 and call(kube_client, "GET", f"{path}/d")[0] == 404
    call(kube_client, "POST", path, cm("d"))
    headers = {"Accept": "application/json"}
    query = [("watch", "true"), ("sendInitialEvents", "true"), ("timeoutSeconds", "1")]
    m, url, h, b, _ = kube_client.param_serialize(
        "GET", path, query_params=query, header_params=headers
    )
    response = kube_client.call_api(m, url, h, b)
    response.read()
    events = [json.loads(line) for line in response.data.splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_strategic_merge_patch_merges_containers_by_name_as_kubectl_apply_needs():
    from support.k8s.store import strategic_merge_patch

    live = {
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "command": ["run"],
                    "args": ["--x"],
                    "env": [{"name": "E", "value": "1"}],
                },
                {"name": "b", "image": "b"},
            ],
            "tolerations": [{"key": "t"}],
        }
    }
    patch = {  # kubectl apply's patch: only what changed, and directives
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [
                {"name": "a", "args": ["--y"], "env": [{"name": "F", "value": "2"}]},
                {"name": "c", "$patch": "delete"},
            ],
            "tolerations": [],
        }
    }
    merged = strategic_merge_patch(live, patch)["spec"]
    assert [c["name"] for c in merged["containers"]] == ["b", "a"]
    a = merged["containers"][1]
    assert a["command"] == ["run"] and a["args"] == ["--y"]  # args: a list that is replaced
    assert a["env"] == [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]
    assert merged["tolerations"] == []
    deleted = strategic_merge_patch(
        live, {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["a"]


def test_watch_over_websocket_new_pods_pending_and_audit(kube_api, kube_client, namespace):
    """What Spark's client (fabric8) needs: a watch as WebSocket messages, a new pod's phase, the
    NetworkPolicy kind (Spark 4 applies one per application); and the audit hook's verbs."""
    import asyncio

    import aiohttp

    from support.k8s.apiserver import ApiServerThread

    async def watch_one() -> dict:
        url = f"{kube_api.url}/api/v1/namespaces/{namespace}/pods?watch=true&timeoutSeconds=10"
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
            message = await asyncio.wait_for(ws.receive(), 10)
            assert message.type == aiohttp.WSMsgType.TEXT
            return json.loads(message.data)

    kube_api.store.create("pods", namespace, {"metadata": {"name": "p"}, "spec": {}})
    event = asyncio.run(watch_one())
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "p"
    assert event["object"]["status"] == {"phase": "Pending"}

    policy = {"metadata": {"name": "np"}, "spec": {"podSelector": {}}}
    path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
    status, _ = call(kube_client, "POST", path, policy)
    assert status == 201

    records = []
    with ApiServerThread(audit=records.append) as audited:
        other = path.replace(namespace, "x")
        for method, suffix, body in (
            ("POST", "", policy),
            ("GET", "/np", None),
            ("DELETE", "", None),
        ):
            request = urllib.request.Request(
                audited.url + other + suffix,
                data=json.dumps(body).encode() if body else None,
                method=method,
                headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status in (200, 201)
    verbs = [(r.verb, r.group, r.resource, r.token) for r in records]
    assert verbs == [
        ("create", "networking.k8s.io", "networkpolicies", "t"),
        ("get", "networking.k8s.io", "networkpolicies", "t"),
        ("deletecollection", "networking.k8s.io", "networkpolicies", "t"),
    ]
