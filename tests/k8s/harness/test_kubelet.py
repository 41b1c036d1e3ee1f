"""The kubelet stand-in: a StatefulSet of two ``python -m http.server`` pods on loopback."""

from __future__ import annotations

import http.client
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from support.k8s.kubelet import KubeletStandIn, PathMap, expand
from support.waiting import wait_until

pytestmark = pytest.mark.k8s

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def module_standin(kube_api, tmp_path_factory):
    # only the namespaces of this module's tests (the server is shared by the session)
    kubelet = KubeletStandIn(kube_api, tmp_path_factory.mktemp("kubelet"), namespaces=())
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
        assert not kubelet.errors, kubelet.errors[-1]


@pytest.fixture
def standin(module_standin, namespace):
    module_standin.manage(namespace)
    return module_standin


def web(replicas=2, env=()):
    container = {
        "name": "http",
        "image": "python:3.11-slim",
        "command": ["python", "-m", "http.server", "--bind", "$(POD_IP)"],
        "args": ["--directory", "/srv", "8080"],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {
                "name": "POD_INDEX",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
                },
            },
            *env,
        ],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
        "volumeMounts": [{"name": "data", "mountPath": "/srv"}],
    }
    return {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web-nodes",
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [container]},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def headless(name, selector):
    return {
        "metadata": {"name": name},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "http", "port": 8080}],
        },
    }


def ready_pods(store, namespace, n):
    pods, _ = store.list("pods", namespace)
    ready = [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions", [])
        )
    ]
    return ready if len(ready) == n == len(pods) else None


def get(ip, path, port=8080):
    conn = http.client.HTTPConnection(ip, port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_expansion_and_path_rewriting(tmp_path):
    assert expand("a=$(A) b=$(B) $$(A)", {"A": "1"}) == "a=1 b=$(B) $(A)"
    paths = PathMap({"/data": tmp_path / "d", "/var/lib/odradek/data-0": tmp_path / "x"})
    assert paths.rewrite("/data/log") == f"{tmp_path}/d/log"
    assert paths.rewrite("dataDir=/data") == f"dataDir={tmp_path}/d"
    assert paths.rewrite("/data-1 /database") == "/data-1 /database"
    assert paths.rewrite("log.dirs=/var/lib/odradek/data-0/log,/x") == (
        f"log.dirs={tmp_path}/x/log,/x"
    )


def test_statefulset_pods_ready_with_their_own_addresses_and_dns(kube_api, standin, namespace):
    store = kube_api.store
    store.create("services", namespace, headless("web-nodes", {"app": "web"}))
    store.create("statefulsets", namespace, web())
    pods = wait_until(lambda: ready_pods(store, namespace, 2), "2 ready pods", TIMEOUT_S)
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert set(by_name) == {"web-0", "web-1"}
    ips = {name: p["status"]["podIP"] for name, p in by_name.items()}
    assert len(set(ips.values())) == 2 and "127.0.0.1" not in ips.values()
    assert by_name["web-1"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert standin.pod_ip(f"{namespace}/web-0") == ips["web-0"]
    for name, ip in ips.items():
        assert get(ip, "/")[0] == 200
        assert standin.pid(f"{namespace}/{name}") is not None
    claims, _ = store.list("persistentvolumeclaims", namespace)
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-web-0", "data-web-1"]
    sts = wait_until(
        lambda: (
            s
            if (s := store.get("statefulsets", namespace, "web"))
            .get("status", {})
            .get("readyReplicas")
            == 2
            else None
        ),
        "the StatefulSet's status",
        TIMEOUT_S,
    )
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]

    # cluster DNS: in a child Python process (sitecustomize) and in this one (resolver())
    fqdn = f"web-1.web-nodes.{namespace}.svc.cluster.local"
    code = (
        "import os, socket, sys; "
        "print(socket.gethostbyname(sys.argv[1]), sorted({a[4][0] for a in "
        "socket.getaddrinfo(sys.argv[2], 8080)}))"
    )
    env = {
        "PYTHONPATH": str(standin.dns_dir),
        "ODRADEK_STANDIN_HOSTS": str(standin.dns_dir / f"hosts-{namespace}"),
    }
    out = subprocess.run(
        [sys.executable, "-c", code, fqdn, "web-nodes"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert out.split(" ", 1)[0] == ips["web-1"]
    assert sorted(ips.values()) == eval(out.split(" ", 1)[1])
    with standin.resolver():
        import socket

        assert socket.gethostbyname(fqdn) == ips["web-1"]
        with pytest.raises(socket.gaierror):
            socket.gethostbyname(f"nothing.{namespace}.svc.cluster.local")


def test_pvc_survives_ondelete_recreation_and_scale_down(kube_api, standin, namespace):
    store = kube_api.store
    store.create("services", namespace, headless("web-nodes", {"app": "web"}))
    store.create("statefulsets", namespace, web())
    pods = wait_until(lambda: ready_pods(store, namespace, 2), "2 ready pods", TIMEOUT_S)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    (standin.pvc_dir(namespace, "data-web-0") / "marker").write_text("kept")

    # OnDelete: a new template restarts nothing ...
    new = web(env=[{"name": "FLAVOUR", "value": "new"}])
    old = store.get("statefulsets", namespace, "web")
    store.replace("statefulsets", namespace, "web", dict(old, spec=new["spec"]))
    sts = wait_until(
        lambda: (
            s
            if (s := store.get("statefulsets", namespace, "web"))["status"].get("updateRevision")
            != s["status"].get("currentRevision")
            else None
        ),
        "a new update revision",
        TIMEOUT_S,
    )
    assert {p["metadata"]["uid"] for p in store.list("pods", namespace)[0]} == set(uids.values())

    # ... until the pod is deleted: SIGTERM, then recreated from the new template
    store.delete("pods", namespace, "web-0")
    wait_until(
        lambda: (
            (p := store.try_get("pods", namespace, "web-0")) is not None
            and p["metadata"]["uid"] != uids["web-0"]
            and ready_pods(store, namespace, 2)
        ),
        "web-0 recreated and ready",
        TIMEOUT_S,
    )
    pod = store.get("pods", namespace, "web-0")
    revision = sts["status"]["updateRevision"]
    assert pod["metadata"]["labels"]["controller-revision-hash"] == revision
    assert store.get("pods", namespace, "web-1")["metadata"]["uid"] == uids["web-1"]
    assert get(pod["status"]["podIP"], "/marker") == (200, b"kept")

    # scale down through the scale subresource: the highest ordinal goes, its PVC stays
    store.patch("statefulsets", namespace, "web", {"spec": {"replicas": 1}}, subresource="scale")
    wait_until(lambda: ready_pods(store, namespace, 1), "1 pod left", TIMEOUT_S)
    assert [p["metadata"]["name"] for p in store.list("pods", namespace)[0]] == ["web-0"]
    assert store.try_get("persistentvolumeclaims", namespace, "data-web-1") is not None
    assert standin.pods(namespace) == [f"{namespace}/web-0"]


def test_killed_container_restarts(kube_api, standin, namespace):
    store = kube_api.store
    store.create("statefulsets", namespace, web(replicas=1))
    wait_until(lambda: ready_pods(store, namespace, 1), "a ready pod", TIMEOUT_S)
    first = standin.pid(f"{namespace}/web-0")
    standin.kill(f"{namespace}/web-0", signal.SIGKILL)

    def restarted():
        pod = store.get("pods", namespace, "web-0")
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        return statuses[0].get("restartCount") == 1 and ready_pods(store, namespace, 1)

    wait_until(restarted, "the container restarted and ready", TIMEOUT_S)
    assert standin.pid(f"{namespace}/web-0") not in (None, first)
    assert "start" in standin.log(f"{namespace}/web-0")


def test_slow_starter_is_not_restarted_before_its_liveness_window(kube_api, standin, namespace):
    """A server answering only 3 s after it starts, its liveness probe allowing 1 + 1 x 10 s:
    the kubelet leaves it alone (the stand-in once probed every second and killed it at 2 s)."""
    store = kube_api.store
    slow = web(replicas=1)
    container = slow["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", SLOW_SERVER]
    container["args"] = ["$(POD_IP)", "/srv"]
    container["livenessProbe"] = {
        "httpGet": {"path": "/", "port": 8080},
        "initialDelaySeconds": 1,
        "periodSeconds": 10,
        "failureThreshold": 2,
    }
    store.create("statefulsets", namespace, slow)

    def restarts():
        pod = store.try_get("pods", namespace, "web-0") or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        return statuses[0].get("restartCount", 0)

    wait_until(
        lambda: restarts() > 0 or ready_pods(store, namespace, 1),
        "the slow server ready or restarted",
        TIMEOUT_S,
    )
    assert restarts() == 0, standin.log(f"{namespace}/web-0")[-2000:]


SLOW_SERVER = """
import runpy, sys, time
time.sleep(3)
host, directory = sys.argv[1:3]
sys.argv = ["http.server", "--bind", host, "--directory", directory, "8080"]
runpy.run_module("http.server", run_name="__main__")
"""


def test_orphaned_pods_adopted_then_collected_with_their_statefulset(kube_api, standin, namespace):
    store = kube_api.store
    store.create("statefulsets", namespace, web(replicas=1))
    (pod,) = wait_until(lambda: ready_pods(store, namespace, 1), "a ready pod", TIMEOUT_S)
    uid = pod["metadata"]["uid"]

    store.delete("statefulsets", namespace, "web", propagation="Orphan")
    orphan = store.get("pods", namespace, "web-0")
    assert not orphan["metadata"].get("ownerReferences")
    sts = store.create("statefulsets", namespace, web(replicas=1))
    wait_until(
        lambda: (
            [
                r["uid"]
                for r in store.get("pods", namespace, "web-0")["metadata"].get(
                    "ownerReferences", []
                )
            ]
            == [sts["metadata"]["uid"]]
        ),
        "the pod adopted",
        TIMEOUT_S,
    )
    assert store.get("pods", namespace, "web-0")["metadata"]["uid"] == uid

    # background deletion: the pod is terminated and goes, the claim stays (Retain)
    store.delete("statefulsets", namespace, "web")
    wait_until(lambda: not store.list("pods", namespace)[0], "the pod collected", TIMEOUT_S)
    assert store.try_get("persistentvolumeclaims", namespace, "data-web-0") is not None
    wait_until(lambda: not standin.pods(namespace), "the kubelet forgot the pod", TIMEOUT_S)


def test_downward_api_files_follow_the_pods_annotations(kube_api, standin, namespace):
    store = kube_api.store
    sts = web(replicas=1)
    pod_spec = sts["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    container["args"] = ["--directory", "/etc/pod", "8080"]
    container["volumeMounts"].append({"name": "info", "mountPath": "/etc/pod"})
    rack = {"fieldPath": "metadata.annotations['odradek.io/rack']"}
    pod_spec["volumes"] = [
        {
            "name": "info",
            "downwardAPI": {
                "items": [
                    {"path": "rack", "fieldRef": rack},
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                ]
            },
        }
    ]
    store.create("statefulsets", namespace, sts)
    (pod,) = wait_until(lambda: ready_pods(store, namespace, 1), "a ready pod", TIMEOUT_S)
    ip = pod["status"]["podIP"]
    assert get(ip, "/rack") == (200, b"")  # the annotation is not there yet: an empty file
    assert b'app="web"' in get(ip, "/labels")[1].split(b"\n")
    store.patch(
        "pods", namespace, "web-0", {"metadata": {"annotations": {"odradek.io/rack": "z1"}}}
    )
    wait_until(lambda: get(ip, "/rack") == (200, b"z1"), "the rack file written", TIMEOUT_S)


def test_pod_log_subresource_serves_the_current_run(kube_api, standin, namespace):
    """`kubectl logs`: GET pods/<name>/log gives the container's last run only (a run that
    failed and was restarted by restartPolicy OnFailure is not in it); unknown pods are 404."""
    script = (
        "import os, sys; mark = os.path.join(sys.argv[1], 'ran')\n"
        "if not os.path.exists(mark):\n"
        "    open(mark, 'w').close(); print('first run fails', flush=True); sys.exit(1)\n"
        "print('second run', flush=True)\n"
    )
    pod = {
        "metadata": {"name": "once"},
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [
                {
                    "name": "job",
                    "image": "python:3.11-slim",
                    "command": ["python", "-c", script, "/scratch"],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }
    kube_api.store.create("pods", namespace, pod)
    wait_until(
        lambda: (
            (kube_api.store.get("pods", namespace, "once").get("status") or {}).get("phase")
            == "Succeeded"
        ),
        "the pod Succeeded on its second run",
        TIMEOUT_S,
    )

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"{kube_api.url}{path}", timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    assert get(f"/api/v1/namespaces/{namespace}/pods/once/log") == (200, "second run\n")
    assert get(f"/api/v1/namespaces/{namespace}/pods/once/log?container=job")[0] == 200
    code, body = get(f"/api/v1/namespaces/{namespace}/pods/once/log?container=nope")
    assert code == 400 and "nope" in body
    assert get(f"/api/v1/namespaces/{namespace}/pods/missing/log")[0] == 404
    assert get(f"/api/v1/namespaces/{namespace}/pods/once/log?follow=true")[0] == 400
    assert "first run fails" in standin.log(f"{namespace}/once")  # the file keeps every run


def test_c_code_in_a_pod_resolves_cluster_names(kube_api, standin, namespace):
    """glibc's getaddrinfo in a pod (what librdkafka calls; here `getent ahostsv4`) finds the
    pods and Services of the stand-in's hosts file, short and qualified, and fails an unknown
    .svc name instead of asking the real DNS (libc_dns.py)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the stand-in preloads no resolver")
    store = kube_api.store
    store.create("services", namespace, headless("web-nodes", {"app": "web"}))
    store.create("statefulsets", namespace, web(replicas=1))
    (pod,) = wait_until(lambda: ready_pods(store, namespace, 1), "a ready pod", TIMEOUT_S)
    ip = pod["status"]["podIP"]
    names = [
        f"web-0.web-nodes.{namespace}.svc.cluster.local",
        f"WEB-0.web-nodes.{namespace}.svc.",  # any case, a trailing dot
        "web-0.web-nodes",  # a short form of the pod's own namespace
        f"web-nodes.{namespace}.svc",
    ]
    script = "".join(f"getent ahostsv4 {n} | head -1; " for n in names)
    script += f"getent ahostsv4 nothing.{namespace}.svc || echo unknown-fails; "
    script += "getent ahostsv4 127.0.0.9 | head -1"  # numeric: glibc's own answer
    resolver_pod = {
        "metadata": {"name": "resolve"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "sh", "image": "busybox", "command": ["sh", "-c", script]}],
        },
    }
    store.create("pods", namespace, resolver_pod)
    wait_until(
        lambda: (
            (store.get("pods", namespace, "resolve").get("status") or {}).get("phase")
            in ("Succeeded", "Failed")
        ),
        "the resolving pod done",
        TIMEOUT_S,
    )
    lines = standin.current_log(namespace, "resolve").splitlines()
    assert [line.split()[0] for line in lines[: len(names)]] == [ip] * len(names), lines
    assert lines[len(names)] == "unknown-fails", lines
    assert lines[len(names) + 1].split()[0] == "127.0.0.9", lines
