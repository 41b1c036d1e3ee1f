"""The operator in-process for tests: kopf's ``operator()`` in a thread with its own loop,
registered handlers from ``odradek_operator.handlers``, and a ``ClusterContext`` the test chooses
(the real ``ApiKube`` on the test API server, and a real or fake admin). Stopped by its flag."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import kopf

from odradek_operator.reconcile.cluster import ClusterContext
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


def wait_for(what: Callable[[], object], timeout_s: float, message: str, step_s: float = 0.2):
    """Poll ``what`` until truthy (returned), at most ``timeout_s`` (``support.waiting``)."""
    return wait_until(what, message, timeout_s, poll_s=step_s)


def condition(obj: dict | None, type_: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return {}


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
