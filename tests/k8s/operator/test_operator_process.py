"""``odradek-operator`` as a process (the entry point the chart's Deployment runs) against the
test API server: it creates a cluster's objects, reports progress in status, and serves its
Prometheus metrics on --metrics-port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from support.k8s_operator import condition, wait_for

pytestmark = pytest.mark.k8s

STOP_TIMEOUT_S = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def test_the_entry_point_reconciles_and_serves_metrics(kube_api, kubeconfig, namespace, tmp_path):
    port = free_port()
    root = Path(__file__).parents[3]
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PYTHONPATH": os.pathsep.join([str(root / "services"), str(root / "operator")]),
        "ODRADEK_IMAGE": "odradek:process",
    }
    log = (tmp_path / "operator.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek_operator",
            "--namespace",
            namespace,
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        kube_api.store.create(
            "odradekclusters",
            namespace,
            {
                "metadata": {"name": "demo"},
                "spec": {"zookeeper": {"replicas": 1}, "controllers": {"replicas": 1}},
            },
        )
        sts = wait_for(
            lambda: kube_api.store.try_get("statefulsets", namespace, "demo-broker"),
            30,
            "the brokers' StatefulSet",
        )
        image = sts["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == "odradek:process"
        reconciling = wait_for(
            lambda: condition(
                kube_api.store.try_get("odradekclusters", namespace, "demo"), "Reconciling"
            ),
            30,
            "status",
        )
        assert reconciling["reason"] == "PodsNotReady"
        text = wait_for(
            lambda: "odradek_operator_reconciliations_total" in metrics(port) and metrics(port),
            15,
            "metrics",
        )
        assert 'odradek_operator_errors_total{kind="OdradekCluster",reason="PodsNotReady"}' in text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)
        log.close()
