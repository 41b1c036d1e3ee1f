"""The kubelet stand-in enforces readOnlyRootFilesystem: a container writes its emptyDir, claim
and /tmp volumes, and nothing else (not the host's /tmp, not its ConfigMap, not a readOnly
claim mount); without the flag the same writes succeed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support.k8s.kubelet import KubeletStandIn, readonly_root_argv
from support.waiting import wait_until

pytestmark = pytest.mark.k8s

TIMEOUT_S = 30
# Tries each write, prints {path: "ok" | error}; the paths come as arguments (rewritten by the
# stand-in to the pod's volume directories), the host's own /tmp is named literally.
PROBE = """
import json, os, sys, tempfile
results = {}
for path in sys.argv[1:]:
    try:
        with open(path, "w") as f:
            f.write("x")
        results[path] = "ok"
    except OSError as e:
        results[path] = e.strerror
try:
    with tempfile.NamedTemporaryFile(dir=None) as f:
        host_tmp = os.sep + "tmp"  # spelled so: the stand-in rewrites mount paths in args
        results["tempfile"] = "ok" if os.path.dirname(f.name) != host_tmp else "host /tmp"
except OSError as e:
    results["tempfile"] = e.strerror
print("RESULT " + json.dumps(results), flush=True)
"""


@pytest.fixture
def standin(kube_api, tmp_path, namespace):
    kubelet = KubeletStandIn(kube_api, tmp_path / "kubelet", namespaces=(namespace,))
    kubelet.start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
        assert not kubelet.errors, kubelet.errors[-1]


def pod(name: str, read_only: bool, host_file: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "probe",
                    "image": "python:3.11-slim",
                    "command": ["python", "-c", PROBE],
                    "args": [
                        "/scratch/a",
                        "/data/b",
                        "/etc/app/c",
                        "/frozen/d",
                        host_file,
                    ],
                    "securityContext": {"readOnlyRootFilesystem": read_only},
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "tmp", "mountPath": "/tmp"},
                        {"name": "data", "mountPath": "/data"},
                        {"name": "frozen", "mountPath": "/frozen", "readOnly": True},
                        {"name": "config", "mountPath": "/etc/app"},
                    ],
                }
            ],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "frozen", "persistentVolumeClaim": {"claimName": "frozen"}},
                {"name": "config", "configMap": {"name": "app"}},
            ],
        },
    }


def results(standin: KubeletStandIn, namespace: str, name: str) -> dict:
    def done():
        try:
            log = standin.log(f"{namespace}/{name}")
        except KeyError:  # not admitted yet
            return None
        for line in log.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
        return None

    return wait_until(done, f"{name}'s writes", TIMEOUT_S)


@pytest.fixture
def host_dir():
    """A host directory outside /tmp (a path under /tmp would be rewritten to the pod's /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="readonly-root-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_only_the_volumes_are_writable_under_a_read_only_root(
    kube_api, standin, namespace, host_dir
):
    store = kube_api.store
    store.create("configmaps", namespace, {"metadata": {"name": "app"}, "data": {"c": "y"}})
    for claim in ("data", "frozen"):
        body = {"metadata": {"name": claim}, "spec": {"accessModes": ["ReadWriteOnce"]}}
        store.create("persistentvolumeclaims", namespace, body)
    host_file = str(host_dir / "host-file")  # outside every volume: the host's filesystem
    store.create("pods", namespace, pod("sealed", True, host_file))
    store.create("pods", namespace, pod("open", False, host_file + "-open"))
    sealed = results(standin, namespace, "sealed")
    assert sealed[host_file] == "Read-only file system"
    assert sealed["tempfile"] == "ok"  # $TMPDIR is the pod's /tmp volume
    rewritten = {k: v for k, v in sealed.items() if k not in (host_file, "tempfile")}
    ok = {k for k, v in rewritten.items() if v == "ok"}
    refused = {k for k, v in rewritten.items() if v == "Read-only file system"}
    assert len(ok) == 2 and len(refused) == 2, sealed  # scratch, data; config, frozen claim
    assert any(k.endswith("/a") for k in ok) and any(k.endswith("/b") for k in ok)
    assert any(k.endswith("/c") for k in refused) and any(k.endswith("/d") for k in refused)
    opened = results(standin, namespace, "open")
    assert opened[host_file + "-open"] == "ok"
    assert (host_dir / "host-file-open").exists() and not (host_dir / "host-file").exists()


def test_the_seal_keeps_the_pid_and_leaves_the_host_writable(tmp_path):
    writable = tmp_path / "w"
    writable.mkdir()
    script = "import os, sys; print(os.getpid()); open(sys.argv[1] + '/x', 'w').write('1')"
    argv = readonly_root_argv([sys.executable, "-c", script, str(writable)], [writable])
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == 0
    assert int(out) == process.pid  # exec'd in place: the stand-in signals the same group
    assert (writable / "x").read_text() == "1"
    (tmp_path / "after").write_text("host still writable")
