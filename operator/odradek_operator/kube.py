"""The operator's port to the Kubernetes API, its adapter on the ``kubernetes`` client, ``apply``.

``Kube`` is the small surface the reconcilers use (get, list by labels, create, JSON merge
patch, delete with a propagation policy); ``ApiKube`` implements it over the ``kubernetes``
client's ``ApiClient`` on raw paths, each blocking call in a worker thread, with the client's own
configuration ($KUBECONFIG or the pod's service account). The unit tests use an in-memory fake
(``FakeKube``, tests/support/operator_doubles.py).

``apply(kube, desired)`` is the one write path for the objects the operator owns: create the
object when missing, else merge-patch only the top-level fields of ``desired`` whose value is not
already contained in the live object (``contains``: dicts compared key by key, so defaults the
API server adds and fields other controllers own never cause a patch). A few fields are never
patched because Kubernetes forbids it or another piece owns them (``NEVER_PATCHED``): a
StatefulSet's selector, serviceName and volumeClaimTemplates (volumes.py recreates the
StatefulSet for those), and the brokers' replicas (scaling.py changes them). ``apply`` never
deletes anything; PersistentVolumeClaims are deleted only by an explicit call.

Least privilege: ``OPERATOR_VERBS`` lists every call the operator's code makes, by kind and verb;
``ApiKube`` refuses any other (as the API server would, given the chart's Role), and the chart's
Role is checked against it (tests/chart/test_chart.py).

Objects are plain dicts (Kubernetes' JSON). One ``ApiKube`` may be shared by tasks of one loop.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "KINDS",
    "KOPF_VERBS",
    "OPERATOR_VERBS",
    "ApiKube",
    "ApplyResult",
    "Kind",
    "Kube",
    "KubeError",
    "apply",
    "check_allowed",
    "contains",
    "kind_of",
]

REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("Pod", "", "v1", "pods"),
        Kind("Service", "", "v1", "services"),
        Kind("ConfigMap", "", "v1", "configmaps"),
        Kind("Secret", "", "v1", "secrets"),
        Kind("ServiceAccount", "", "v1", "serviceaccounts"),
        Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims"),
        Kind("Event", "", "v1", "events"),
        Kind("Namespace", "", "v1", "namespaces", namespaced=False),
        Kind("Node", "", "v1", "nodes", namespaced=False),
        Kind("StatefulSet", "apps", "v1", "statefulsets"),
        Kind("Deployment", "apps", "v1", "deployments"),
        Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets"),
        Kind("NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies"),
        Kind("Role", "rbac.authorization.k8s.io", "v1", "roles"),
        Kind("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings"),
        Kind(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            namespaced=False,
        ),  # fmt: skip
        Kind("OdradekCluster", "odradek.io", "v1alpha1", "odradekclusters"),
        Kind("OdradekTopic", "odradek.io", "v1alpha1", "odradektopics"),
        Kind("OdradekConnect", "odradek.io", "v1alpha1", "odradekconnects"),
        Kind("OdradekConnector", "odradek.io", "v1alpha1", "odradekconnectors"),
        Kind("OdradekUser", "odradek.io", "v1alpha1", "odradekusers"),
    )
}


# Least privilege, as data: every call the operator's own code makes, per kind ("Kind/status":
# the status subresource), in RBAC's verbs (get, list, create; merge_patch is "patch", delete is
# "delete"). ``ApiKube`` refuses any other call as the API server would (403), and so does the
# tests' FakeKube, so a new call fails its tests until it is declared here; tests/chart checks
# that the chart's Role grants exactly this plus ``KOPF_VERBS``. Node is granted by a ClusterRole
# of its own (rbac.readNodes).
OPERATOR_VERBS: Mapping[str, frozenset[str]] = {
    kind: frozenset(verbs)
    for kind, verbs in {
        # What the builders produce: apply() reads, creates, patches; never deletes.
        "Service": ("get", "create", "patch"),
        "ConfigMap": ("get", "create", "patch"),
        "ServiceAccount": ("get", "create", "patch"),
        "Deployment": ("get", "create", "patch"),
        "PodDisruptionBudget": ("get", "create", "patch"),
        # A secured cluster's CAs and certificates (reconcile/certificates.py; a CA the user
        # brings is only read) and OdradekUsers' Secrets (reconcile/users.py: created, put back
        # when edited; a given password's Secret read). Never listed, never deleted (GC).
        "Secret": ("get", "create", "patch"),
        # Deleted when spec.networkPolicies turns false (only those the cluster owns).
        "NetworkPolicy": ("get", "create", "patch", "delete"),
        # Scaled by a patch; deleted (orphaning its pods) to change volumeClaimTemplates.
        "StatefulSet": ("get", "create", "patch", "delete"),
        # Read by labels; a broker's rack annotation patched; deleted one at a time to restart.
        "Pod": ("list", "patch", "delete"),
        "PersistentVolumeClaim": ("delete",),  # only with deleteClaim: true
        "Node": ("get",),  # spec.brokers.rack
        "OdradekCluster": ("get",),
        "OdradekTopic": ("list",),  # who owns a topic name
        "OdradekConnect": ("get",),
        "OdradekCluster/status": ("patch",),
        "OdradekTopic/status": ("patch",),
        "OdradekConnect/status": ("patch",),
        "OdradekConnector/status": ("patch",),
        "OdradekUser/status": ("patch",),
    }.items()
}
# What kopf itself asks (it watches, and patches finalizers and its annotations on, the kinds it
# handles; posts events; elects the active replica through a peering object; cluster-wide it
# watches CRDs). "Kind/finalizers" update: creating objects whose ownerReferences set
# blockOwnerDeletion needs it on the owner (OdradekCluster's and OdradekConnect's objects).
KOPF_VERBS: Mapping[str, frozenset[str]] = {
    kind: frozenset(verbs)
    for kind, verbs in {
        "OdradekCluster": ("list", "watch", "patch"),
        "OdradekTopic": ("list", "watch", "patch"),
        "OdradekConnect": ("list", "watch", "patch"),
        "OdradekConnector": ("list", "watch", "patch"),
        "OdradekUser": ("list", "watch", "patch"),
        "OdradekCluster/finalizers": ("update",),
        "OdradekConnect/finalizers": ("update",),
        "OdradekUser/finalizers": ("update",),
        "Event": ("create",),
        # Peering: "KopfPeering" (kopfpeerings; ClusterKopfPeering cluster-wide); cluster-wide
        # only, kopf watches CustomResourceDefinitions.
        "KopfPeering": ("get", "list", "watch", "patch"),
        "CustomResourceDefinition": ("get", "list", "watch"),
    }.items()
}


def check_allowed(
    kind: str,
    verb: str,
    subresource: str | None = None,
    allowed: Mapping[str, frozenset[str]] = OPERATOR_VERBS,
) -> None:
    """KubeError(403) unless ``allowed`` (the operator's ``OPERATOR_VERBS``) declares this call."""
    key = f"{kind}/{subresource}" if subresource else kind
    if verb not in allowed.get(key, ()):
        raise KubeError(
            f"{verb} {key}: not in the operator's declared calls (kube.OPERATOR_VERBS), so the "
            "chart's Role does not grant it",
            403,
            "Forbidden",
        )


def kind_of(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"kind {kind!r} is not in the operator's kind table") from None


class KubeError(Exception):
    """A request the API server refused; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


class Kube(Protocol):
    """The Kubernetes API as the reconcilers use it."""

    async def get(self, kind: str, name: str, namespace: str | None) -> dict | None: ...

    async def list(
        self, kind: str, namespace: str | None, labels: Mapping[str, str] | None = None
    ) -> list[dict]: ...

    async def create(self, obj: dict) -> dict: ...

    async def merge_patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        patch: dict,
        subresource: str | None = None,
    ) -> dict: ...

    async def delete(
        self, kind: str, name: str, namespace: str | None, propagation: str = "Background"
    ) -> bool: ...


class ApiKube:
    """``Kube`` over ``kubernetes.client.ApiClient`` (raw paths, calls in a worker thread)."""

    def __init__(
        self, api_client: Any = None, allowed: Mapping[str, frozenset[str]] = OPERATOR_VERBS
    ) -> None:
        if api_client is None:
            api_client = _default_api_client()
        self._api = api_client
        self._allowed = allowed  # the calls it may make (a test of the port itself widens it)

    async def get(self, kind: str, name: str, namespace: str | None) -> dict | None:
        check_allowed(kind, "get", allowed=self._allowed)
        try:
            return await self._call("GET", kind_of(kind).path(namespace, name))
        except KubeError as e:
            if e.not_found:
                return None
            raise

    async def list(
        self, kind: str, namespace: str | None, labels: Mapping[str, str] | None = None
    ) -> list[dict]:
        check_allowed(kind, "list", allowed=self._allowed)
        query = {"labelSelector": selector(labels)} if labels else None
        answer = await self._call("GET", kind_of(kind).path(namespace), query=query)
        k = kind_of(kind)
        items = answer.get("items") or []
        for item in items:  # lists leave kind/apiVersion out of their items
            item.setdefault("kind", k.kind)
            item.setdefault("apiVersion", k.api_version)
        return items

    async def create(self, obj: dict) -> dict:
        check_allowed(obj["kind"], "create", allowed=self._allowed)
        meta = obj["metadata"]
        path = kind_of(obj["kind"]).path(meta.get("namespace"))
        return await self._call("POST", path, body=obj)

    async def merge_patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        patch: dict,
        subresource: str | None = None,
    ) -> dict:
        check_allowed(kind, "patch", subresource, allowed=self._allowed)
        path = kind_of(kind).path(namespace, name)
        if subresource:
            path += f"/{subresource}"
        return await self._call(
            "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )

    async def delete(
        self, kind: str, name: str, namespace: str | None, propagation: str = "Background"
    ) -> bool:
        check_allowed(kind, "delete", allowed=self._allowed)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            await self._call("DELETE", kind_of(kind).path(namespace, name), body=body)
        except KubeError as e:
            if e.not_found:
                return False
            raise
        return True

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict:
        return await asyncio.to_thread(self._call_sync, method, path, query, body, content_type)

    def _call_sync(self, method, path, query, body, content_type) -> dict:
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            method, url, headers, body, post = self._api.param_serialize(
                method,
                path,
                query_params=list(query.items()) if query else None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self._api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=REQUEST_TIMEOUT_S
            )
            data = response.read()
        except ApiException as e:
            raise KubeError(f"{method} {path}: {e.reason}", e.status or 0, str(e.reason)) from e
        except OSError as e:  # urllib3's connection errors are OSErrors
            raise KubeError(f"{method} {path}: {e}") from e
        status = int(response.status)
        answer = json.loads(data) if data else {}
        if status >= 400:
            message = answer.get("message") if isinstance(answer, dict) else None
            reason = answer.get("reason", "") if isinstance(answer, dict) else ""
            raise KubeError(f"{method} {path}: {status} {message or data[:200]!r}", status, reason)
        return answer


def _default_api_client():
    from kubernetes import client, config

    configuration = client.Configuration()
    path = os.environ.get("KUBECONFIG")  # read now: the client reads it once, at import
    if path:
        config.load_kube_config(config_file=path, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


# -- apply ---------------------------------------------------------------------------------------

# (kind, component label or None for any) -> top-level paths apply never patches on a live object.
NEVER_PATCHED: dict[str, tuple[tuple[str, ...], ...]] = {
    "StatefulSet": (
        ("spec", "selector"),
        ("spec", "serviceName"),
        ("spec", "volumeClaimTemplates"),
        ("spec", "podManagementPolicy"),
    ),
    "Deployment": (("spec", "selector"),),
    "Service": (("spec", "clusterIP"), ("spec", "clusterIPs")),
    "PodDisruptionBudget": (("spec", "selector"),),
}
COMPONENT = "app.kubernetes.io/component"


@dataclass(frozen=True)
class ApplyResult:
    kind: str
    name: str
    action: str  # "Created" | "Patched" | "Noop"
    obj: dict


def contains(live: Any, desired: Any) -> bool:
    """Whether ``live`` already holds ``desired``: dicts by their keys in ``desired``, lists
    element by element (same length), anything else by equality."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(contains(live.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(contains(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, (int, float)) and isinstance(live, (int, float)):
        return live == desired
    return live == desired


def owned_patch(live: dict, desired: dict, skip: tuple[tuple[str, ...], ...] = ()) -> dict:
    """The merge patch that makes ``live`` hold ``desired`` (empty: nothing to do). Two levels
    deep (metadata.labels, spec.template, ...): a field is replaced as a whole when it differs."""
    patch: dict = {}
    for section, value in desired.items():
        if section in ("apiVersion", "kind", "status"):
            continue
        if section == "metadata":
            meta = {
                k: v
                for k, v in value.items()
                if k in ("labels", "annotations", "ownerReferences")
                and not contains(live.get("metadata", {}).get(k), v)
            }
            if meta:
                patch["metadata"] = meta
            continue
        if not isinstance(value, dict):
            if not contains(live.get(section), value):
                patch[section] = value
            continue
        inner = {
            k: v
            for k, v in value.items()
            if (section, k) not in skip and not contains((live.get(section) or {}).get(k), v)
        }
        if inner:
            patch[section] = inner
    return patch


async def apply(kube: Kube, desired: dict, *, keep_replicas: bool = False) -> ApplyResult:
    """Create ``desired`` or patch the fields of it the live object lacks (module docstring).
    ``keep_replicas``: leave a live StatefulSet's replicas alone (scaling.py owns them)."""
    kind, meta = desired["kind"], desired["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    live = await kube.get(kind, name, namespace)
    if live is None:
        try:
            return ApplyResult(kind, name, "Created", await kube.create(desired))
        except KubeError as e:
            if not e.conflict:
                raise
            live = await kube.get(kind, name, namespace)  # created meanwhile: patch it below
            if live is None:
                raise
    skip = NEVER_PATCHED.get(kind, ())
    if keep_replicas:
        skip = (*skip, ("spec", "replicas"))
    patch = owned_patch(live, desired, skip)
    if not patch:
        return ApplyResult(kind, name, "Noop", live)
    return ApplyResult(kind, name, "Patched", await kube.merge_patch(kind, name, namespace, patch))
