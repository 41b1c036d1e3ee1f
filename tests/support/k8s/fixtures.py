"""pytest fixtures of the Kubernetes test harness; a conftest imports them with ``*``.

- ``kube_api`` (session): the API server (``ApiServerThread``) with the odradek.io CRDs;
  ``kube_api.store`` is the in-memory object store, ``kube_api.url`` its address.
- ``kubeconfig`` (session): the path of its kubeconfig (pass it to kopf as ``KUBECONFIG`` and
  to ``kubernetes.config.new_client_from_config(config_file=...)``).
- ``kube_client``: a ``kubernetes.client.ApiClient`` on it.
- ``namespace``: a fresh namespace name per test (the server is shared by the session), purged
  after the test.
- ``kubelet``: a started ``KubeletStandIn`` on ``kube_api`` for the test's ``namespace`` only,
  always stopped (before the namespace is purged).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek_operator.model.crds import crds

from .apiserver import ApiServerThread

__all__ = ["kube_api", "kubeconfig", "kube_client", "namespace", "kubelet"]

_namespaces = itertools.count(1)


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerThread]:
    path = tmp_path_factory.mktemp("kube") / "kubeconfig"
    server = ApiServerThread(path)
    for crd in crds():  # the chart's CRDs, from their one source
        server.store.create("customresourcedefinitions", None, crd)
    with server:
        yield server


@pytest.fixture(scope="session")
def kubeconfig(kube_api: ApiServerThread) -> Path:
    assert kube_api.kubeconfig is not None
    return kube_api.kubeconfig


@pytest.fixture
def kube_client(kubeconfig: Path) -> Iterator[object]:
    import kubernetes

    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube_api: ApiServerThread) -> Iterator[str]:
    """A fresh namespace name; everything in it is removed at once after the test."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{next(_namespaces)}"
    yield name
    kube_api.store.purge_namespace(name)


@pytest.fixture
def kubelet(kube_api: ApiServerThread, namespace: str, tmp_path: Path) -> Iterator[object]:
    from .kubelet import KubeletStandIn

    standin = KubeletStandIn(kube_api.store, tmp_path / "kubelet", namespaces=[namespace])
    standin.start()
    try:
        yield standin
    finally:
        standin.stop()
