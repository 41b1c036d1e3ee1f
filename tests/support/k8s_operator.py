"""The operator in-process for tests: kopf's ``operator()`` in a thread with its own loop,
registered handlers from ``odradek_operator.handlers``, and a ``ClusterContext`` the test chooses
(the real ``ApiKube`` on the test API server, and a real or fake admin). Stopped by its flag.

``operator_session`` is the world the operator tests' module fixtures share: for its block,
``KUBECONFIG`` names the test API server (kopf logs in with it), a kubernetes client, the kubelet
stand-in running the pods, and the ``ClusterContext`` of the real ``ApiKube`` and ``OpsAdmin``;
after it, the kubelet stopped, the client closed, the environment as it was and a namespace
emptied if asked. The operator thread stays the caller's, so that it may run under the kubelet's
resolver or be stopped and restarted by a test. One session at a time per process (it sets
``os.environ``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import kopf

from odradek_operator.kube import ApiKube
from odradek_operator.reconcile.admin import OpsAdmin
from odradek_operator.reconcile.cluster import ClusterContext
from support.k8s.kubelet import KubeletStandIn
from support.waiting import wait_until

STOP_TIMEOUT_S = 15.0


class OperatorThread:
    def __init__(self, ctx: ClusterContext, namespace: str) -> None:
        self.ctx = ctx
        self.namespace = namespace  # watched alone: other tests' resources are not ours
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="operator", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        from odradek_operator import handlers  # noqa: F401  (registers the handlers)

        settings = kopf.OperatorSettings()
        settings.posting.level = logging.WARNING
        try:
            asyncio.run(
                kopf.operator(
                    namespaces=[self.namespace],
                    standalone=True,
                    settings=settings,
                    memo=kopf.Memo(ctx=self.ctx),
                    stop_flag=self._stop,
                    ready_flag=self._ready,
                )
            )
        except BaseException as e:  # reported by stop()
            self.error = e

    def __enter__(self) -> OperatorThread:
        self._thread.start()
        if not self._ready.wait(STOP_TIMEOUT_S):
            raise TimeoutError("the operator did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(STOP_TIMEOUT_S)


@dataclasses.dataclass
class OperatorSession:
    kubelet: KubeletStandIn
    ctx: ClusterContext


@contextlib.contextmanager
def operator_session(
    kube_api: Any,
    kubeconfig: Path,
    kubelet_dir: Path,
    *,
    namespaces: Sequence[str] | None = None,
    purge_namespace: str | None = None,
    restore_env: Sequence[str] = (),
) -> Iterator[OperatorSession]:
    """The session of the module docstring; ``namespaces``: the only ones the kubelet plays
    (all if None); ``restore_env``: more variables to put back as they were after the block."""
    import kubernetes

    saved = {key: os.environ.get(key) for key in ("KUBECONFIG", *restore_env)}
    os.environ["KUBECONFIG"] = str(kubeconfig)
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    kubelet = KubeletStandIn(kube_api.store, kubelet_dir, namespaces=namespaces).start()
    try:
        yield OperatorSession(kubelet, ClusterContext(ApiKube(client), OpsAdmin, "odradek:test"))
    finally:
        kubelet.stop()
        client.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if purge_namespace is not None:
            kube_api.store.purge_namespace(purge_namespace)


def wait_for(what: Callable[[], object], timeout_s: float, message: str, step_s: float = 0.2):
    """Poll ``what`` until truthy (returned), at most ``timeout_s`` (``support.waiting``)."""
    return wait_until(what, message, timeout_s, poll_s=step_s)


def condition(obj: dict | None, type_: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return {}


def ready(obj: dict | None) -> bool:
    """``obj`` (an Odradek resource) says Ready for the generation it has now."""
    return (
        condition(obj, "Ready").get("status") == "True"
        and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    )


SCRAM_PORT, MTLS_PORT = 9095, 9096  # the secured test cluster's two client listeners


def secured_one_broker_cluster(name: str, **broker_config: object) -> dict:
    """An OdradekCluster of one ZooKeeper, one controller and one broker whose clients use TLS
    with SCRAM-SHA-512 (``SCRAM_PORT``) or a clients-CA certificate (``MTLS_PORT``); the
    replication keys sized for one broker, ``broker_config`` added to them."""
    return {
        "apiVersion": "odradek.io/v1alpha1",
        "kind": "OdradekCluster",
        "metadata": {"name": name},
        "spec": {
            "image": "odradek:test",
            "zookeeper": {"replicas": 1, "storage": {"size": "1Gi"}},
            "controllers": {"replicas": 1},
            "brokers": {
                "replicas": 1,
                "config": {
                    "min.insync.replicas": 1,
                    "default.replication.factor": 1,
                    "offsets.topic.replication.factor": 1,
                    "transaction.state.log.replication.factor": 1,
                    "transaction.state.log.min.isr": 1,
                    **broker_config,
                },
            },
            "listeners": [
                {
                    "name": "scram",
                    "port": SCRAM_PORT,
                    "tls": True,
                    "authentication": {"type": "scram-sha-512"},
                },
                {"name": "mtls", "port": MTLS_PORT, "tls": True, "authentication": {"type": "tls"}},
            ],
        },
    }
