"""An in-memory Kubernetes object store: the state behind the test API server (apiserver.py).

kmock 0.8's ``KubernetesEmulator`` keeps objects as plain dicts merged on PATCH, without
resourceVersions, uids, generations, selectors, PUT, subresources or garbage collection; filling
all of that in through its hooks would mean overriding nearly every method. So kmock stays the
HTTP server, router and discovery (``KubernetesScaffold``), and this store holds the objects:

- every change gets the next resourceVersion of one counter and is appended to an event log that
  watch streams replay from any resourceVersion still held (older ones: 410 Gone);
- create fills uid, resourceVersion, generation, creationTimestamp, namespace, generateName;
  409 AlreadyExists; status dropped on create when the kind has a status subresource (a pod's
  becomes ``{phase: Pending}``);
- replace (PUT) checks a given resourceVersion (409 Conflict); main-resource writes keep the
  status of kinds with a status subresource, and ``status`` writes touch only the status;
  generation is bumped when anything outside metadata and status changes; no-op writes change
  nothing (no new resourceVersion, no event), as on a real server;
- patch: JSON merge patch (merge-patch+json), strategic merge patch (a merge patch whose
  containers, volumes, env, ports, volumeMounts, ... lists merge by key, with the ``$patch``,
  ``$setElementOrder`` and ``$retainKeys`` directives: what kubectl apply sends, see
  ``strategic_merge_patch``), JSON patch (RFC 6902, incl. ``test``), and apply-patch+yaml
  treated as a merge patch that creates a missing object;
- delete: finalizers -> deletionTimestamp, removed when the last finalizer goes; pods bound to a
  node (``spec.nodeName``, set by the kubelet stand-in) are deleted gracefully: deletionTimestamp
  and deletionGracePeriodSeconds, until the kubelet deletes them with grace 0;
- garbage collection when an object is removed: dependents (ownerReferences by uid) whose owners
  are all gone are deleted (Background; Foreground is treated the same, the owner does not wait),
  with Orphan the references are stripped; deleting a namespace deletes what is in it;
- Services get a clusterIP (10.96.x.y, routed nowhere) unless headless, kept when an update
  omits it;
- the scale subresource of kinds that declare one (specReplicasPath, statusReplicasPath,
  labelSelectorPath), as autoscaling/v1 Scale.

Thread-safe: one lock; listeners (watch streams, the kubelet stand-in) are called after each
change, outside the lock, and must only schedule work.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import datetime
import json
import random
import string
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import yaml

__all__ = [
    "ApiError",
    "Kind",
    "ObjectStore",
    "BUILTIN_KINDS",
    "LabelSelector",
    "merge_patch",
    "now_iso",
]

Obj = dict[str, Any]
EVENTS_KEPT_MAX = 20_000  # older resourceVersions get 410 Gone (watchers re-list)


class ApiError(Exception):
    """An API failure rendered as a Kubernetes ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None):
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


@dataclass(frozen=True)
class Scale:
    spec_replicas_path: str  # ".spec.replicas"
    status_replicas_path: str  # ".status.replicas"
    label_selector_path: str | None = None  # ".status.selector"


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = False
    scale: Scale | None = None
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def __str__(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else self.plural


def _k(group: str, version: str, plural: str, kind: str, **kw: Any) -> Kind:
    return Kind(group, version, plural, kind, **kw)


BUILTIN_KINDS: tuple[Kind, ...] = (
    _k("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), status=True),
    _k("", "v1", "pods", "Pod", short_names=("po",), status=True),
    _k("", "v1", "services", "Service", short_names=("svc",), status=True),
    _k("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    _k("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _k("", "v1", "secrets", "Secret"),
    _k("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",)),
    _k("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _k("", "v1", "events", "Event", short_names=("ev",)),
    _k("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), status=True),
    _k(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short_names=("sts",),
        status=True,
        scale=Scale(".spec.replicas", ".status.replicas", ".spec.selector"),
    ),
    _k(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        status=True,
        scale=Scale(".spec.replicas", ".status.replicas", ".spec.selector"),
    ),
    _k("events.k8s.io", "v1", "events", "Event", short_names=("ev",)),
    _k(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        status=True,
    ),
    _k("coordination.k8s.io", "v1", "leases", "Lease"),
    # Spark 4's submission client applies one per application (the driver's ingress).
    _k("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",)),
    _k("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _k("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _k("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _k(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    _k(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        status=True,
    ),
    _k("kopf.dev", "v1", "kopfpeerings", "KopfPeering"),
    _k("kopf.dev", "v1", "clusterkopfpeerings", "ClusterKopfPeering", namespaced=False),
)


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Lists that a strategic merge patch merges element by element, and their merge keys (a subset
# of the built-in types' patchStrategy=merge fields); every other list is replaced, as in SMP.
SMP_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",  # a Service's: "port" (chosen below by what the elements hold)
    "conditions": "type",
}


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch as kubectl apply/patch sends it for built-in kinds: a merge patch,
    except that the lists of ``SMP_MERGE_KEYS`` merge by key, with the directives
    ``$patch: delete|replace``, ``$setElementOrder/<list>`` and ``$retainKeys``. Lists of other
    fields are replaced, like a merge patch. (Treating it as a plain merge patch would replace a
    pod template's ``containers`` with only the fields kubectl sends: the changed ones.)"""
    if isinstance(patch, list):
        key = SMP_MERGE_KEYS.get(field)
        if key == "containerPort" and not all("containerPort" in p for p in patch):
            key = "port"
        mergeable = key is not None and isinstance(target, list)
        elements = [*patch, *(target or [])]
        if not mergeable or not all(isinstance(e, dict) and key in e for e in elements):
            return [p for p in copy.deepcopy(patch) if not _smp_delete(p)]
        result = copy.deepcopy(target)
        for element in patch:
            index = next((i for i, e in enumerate(result) if e[key] == element[key]), None)
            if _smp_delete(element):
                if index is not None:
                    del result[index]
            elif index is None:
                result.append(strategic_merge_patch({}, element))
            else:
                result[index] = strategic_merge_patch(result[index], element)
        return result
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    orders = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    if "$retainKeys" in patch:
        result = {k: v for k, v in result.items() if k in patch["$retainKeys"]}
    for name, order in orders.items():
        key = SMP_MERGE_KEYS.get(name, "name")
        items = result.get(name)
        if isinstance(items, list) and all(isinstance(o, dict) and key in o for o in order):
            rank = {o[key]: i for i, o in enumerate(order)}
            items.sort(key=lambda e: rank.get(e.get(key), len(rank)))
    return result


def _smp_delete(element: Any) -> bool:
    return isinstance(element, dict) and element.get("$patch") == "delete"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (returns a new value; ``target`` is not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def get_path(obj: Obj, dotted: str) -> Any:
    """``.spec.brokers.replicas`` -> value or None."""
    node: Any = obj
    for part in dotted.strip(".").split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def set_path(obj: Obj, dotted: str, value: Any) -> None:
    parts = dotted.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


class LabelSelector:
    """The string form of a label selector: ``a=b,c!=d,e in (x,y),f notin (z),g,!h``."""

    def __init__(self, text: str | None):
        self.requirements: list[tuple[str, str, tuple[str, ...]]] = []
        for term in _split_selector(text or ""):
            self.requirements.append(_parse_term(term))

    @classmethod
    def from_dict(cls, selector: Obj | None) -> LabelSelector:
        """A ``LabelSelector`` object (matchLabels, matchExpressions) as used in specs."""
        sel = cls(None)
        selector = selector or {}
        for key, value in (selector.get("matchLabels") or {}).items():
            sel.requirements.append((key, "in", (value,)))
        for expr in selector.get("matchExpressions") or []:
            op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
            sel.requirements.append(
                (expr["key"], op[expr["operator"]], tuple(expr.get("values") or ()))
            )
        return sel

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            if op == "in" and labels.get(key) not in values:
                return False
            if op == "notin" and key in labels and labels[key] in values:
                return False
            if op == "exists" and key not in labels:
                return False
            if op == "!exists" and key in labels:
                return False
        return True


def _split_selector(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        terms.append(current.strip())
    return [t for t in terms if t]


def _parse_term(term: str) -> tuple[str, str, tuple[str, ...]]:
    for word, op in ((" notin ", "notin"), (" in ", "in")):
        if word in term:
            key, _, rest = term.partition(word)
            values = tuple(v.strip() for v in rest.strip().strip("()").split(",") if v.strip())
            return key.strip(), op, values
    if "!=" in term:
        key, _, value = term.partition("!=")
        return key.strip(), "notin", (value.strip(),)
    if "==" in term:
        key, _, value = term.partition("==")
        return key.strip(), "in", (value.strip(),)
    if "=" in term:
        key, _, value = term.partition("=")
        return key.strip(), "in", (value.strip(),)
    if term.startswith("!"):
        return term[1:].strip(), "!exists", ()
    return term.strip(), "exists", ()


def field_selector_matches(text: str | None, obj: Obj) -> bool:
    """``metadata.name=x,status.phase!=Running``: equality on dotted paths only."""
    for term in _split_selector(text or ""):
        negate = "!=" in term
        key, _, value = term.partition("!=" if negate else ("==" if "==" in term else "="))
        actual = get_path(obj, key.strip())
        actual_s = "" if actual is None else str(actual)
        if (actual_s == value.strip()) == negate:
            return False
    return True


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


@dataclass
class _Event:
    rv: int
    kind: tuple[str, str, str]
    type: str
    obj: Obj


class ObjectStore:
    """Objects by (kind key, namespace or "", name), with an event log for watches."""

    def __init__(self, kinds: Iterable[Kind] = BUILTIN_KINDS):
        self._lock = threading.RLock()
        self._kinds: dict[tuple[str, str, str], Kind] = {}
        self._objects: dict[tuple[tuple[str, str, str], str, str], Obj] = {}
        self._rv = 0
        self._event_rvs: list[int] = []
        self._events: list[_Event] = []
        self._oldest_rv = 0  # events after this rv are all held
        self._listeners: list[Callable[[], None]] = []
        self._service_ips = 0
        for kind in kinds:
            self.register(kind)

    # -- kinds ---------------------------------------------------------------------------

    def register(self, kind: Kind) -> None:
        with self._lock:
            self._kinds[kind.key] = kind

    def register_crd(self, crd: Obj) -> list[Kind]:
        """Serve the versions of a CustomResourceDefinition (apiextensions.k8s.io/v1)."""
        spec = crd["spec"]
        names = spec["names"]
        kinds = []
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            subs = version.get("subresources") or {}
            scale = None
            if "scale" in subs:
                s = subs["scale"]
                scale = Scale(
                    s["specReplicasPath"], s["statusReplicasPath"], s.get("labelSelectorPath")
                )
            kind = Kind(
                spec["group"],
                version["name"],
                names["plural"],
                names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status="status" in subs,
                scale=scale,
                categories=tuple(names.get("categories") or ()),
            )
            self.register(kind)
            kinds.append(kind)
        return kinds

    def kinds(self) -> list[Kind]:
        with self._lock:
            return list(self._kinds.values())

    def kind(self, group: str, version: str, plural: str) -> Kind | None:
        with self._lock:
            return self._kinds.get((group, version, plural))

    def kind_of(self, api_version: str, kind: str) -> Kind:
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for k in self._kinds.values():
                if k.group == group and k.version == version and k.kind == kind:
                    return k
        raise ApiError(404, "NotFound", f"no kind {kind} in {api_version}")

    def resolve(self, what: str | Kind) -> Kind:
        """A Kind from itself, "plural", "plural.group", "group/version/plural" or a short name."""
        if isinstance(what, Kind):
            return what
        with self._lock:
            kinds = list(self._kinds.values())
        if what.count("/") == 2:
            group, version, plural = what.split("/")
            for k in kinds:
                if k.key == (group, version, plural):
                    return k
        plural, _, group = what.partition(".")
        matches = [
            k
            for k in kinds
            if (k.plural == plural or plural in k.short_names) and (not group or k.group == group)
        ]
        # "events" is in v1 and in events.k8s.io: the core group wins, as in kubectl
        matches.sort(key=lambda k: (k.group != "", k.group))
        if not matches:
            raise KeyError(what)
        return matches[0]

    # -- listeners -------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    # -- reads -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, kind: Kind | str, namespace: str | None, name: str) -> Obj:
        kind = self.resolve(kind)
        with self._lock:
            obj = self._objects.get((kind.key, self._ns(kind, namespace), name))
            if obj is None:
                raise self._not_found(kind, name)
            return copy.deepcopy(obj)

    def try_get(self, kind: Kind | str, namespace: str | None, name: str) -> Obj | None:
        try:
            return self.get(kind, namespace, name)
        except ApiError:
            return None

    def list(
        self,
        kind: Kind | str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], int]:
        kind = self.resolve(kind)
        selector = LabelSelector(label_selector)
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (key, ns, _), obj in sorted(self._objects.items(), key=lambda kv: kv[0][1:])
                if key == kind.key
                and (namespace is None or ns == namespace)
                and selector.matches(obj["metadata"].get("labels"))
                and field_selector_matches(field_selector, obj)
            ]
            return items, self._rv

    def events_after(self, kind: Kind, rv: int) -> list[_Event] | None:
        """Events of ``kind`` newer than ``rv``; None if some of them are no longer held."""
        with self._lock:
            if rv < self._oldest_rv:
                return None
            start = bisect.bisect_right(self._event_rvs, rv)
            return [e for e in self._events[start:] if e.kind == kind.key]

    # -- writes ----------------------------------------------------------------------------

    def create(self, kind: Kind | str, namespace: str | None, body: Obj) -> Obj:
        kind = self.resolve(kind)
        with self._lock:
            result = self._create(kind, namespace, body)
        self._notify()
        return result

    def replace(
        self,
        kind: Kind | str,
        namespace: str | None,
        name: str,
        body: Obj,
        subresource: str | None = None,
    ) -> Obj:
        kind = self.resolve(kind)
        with self._lock:
            old = self._existing(kind, namespace, name)
            given_rv = (body.get("metadata") or {}).get("resourceVersion")
            if given_rv and str(given_rv) != old["metadata"]["resourceVersion"]:
                raise self._conflict(kind, name)
            if subresource == "scale":
                result = self._write_scale(kind, old, body)
            else:
                result = self._write(kind, old, copy.deepcopy(body), subresource)
        self._notify()
        return result

    def patch(
        self,
        kind: Kind | str,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str = "application/merge-patch+json",
        subresource: str | None = None,
    ) -> Obj:
        kind = self.resolve(kind)
        content_type = content_type.split(";")[0].strip()
        created = False
        with self._lock:
            if content_type == "application/apply-patch+yaml":
                if isinstance(patch, str | bytes):
                    patch = yaml.safe_load(patch)
                key = (kind.key, self._ns(kind, namespace), name)
                if key not in self._objects and subresource is None:
                    body = copy.deepcopy(patch)
                    body.setdefault("metadata", {})["name"] = name
                    result = self._create(kind, namespace, body)
                    created = True
                else:
                    content_type = "application/merge-patch+json"
            if not created:
                result = self._patch_locked(kind, namespace, name, patch, content_type, subresource)
        self._notify()
        return result

    def _patch_locked(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str,
        subresource: str | None,
    ) -> Obj:
        old = self._existing(kind, namespace, name)
        base = self._scale_of(kind, old) if subresource == "scale" else old
        if content_type == "application/json-patch+json":
            try:
                new = jsonpatch.apply_patch(base, patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise ApiError(422, "Invalid", f"json patch failed: {e}") from e
        elif content_type in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/json",
        ):
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            if content_type == "application/strategic-merge-patch+json":
                new = strategic_merge_patch(base, patch)
            else:
                new = merge_patch(base, patch)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
        if subresource == "scale":
            return self._write_scale(kind, old, new)
        return self._write(kind, old, new, subresource)

    def delete(
        self,
        kind: Kind | str,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        grace_period: int | None = None,
        preconditions: Obj | None = None,
    ) -> Obj:
        kind = self.resolve(kind)
        with self._lock:
            old = self._existing(kind, namespace, name)
            if preconditions:
                if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
                    raise self._conflict(kind, name)
                rv = preconditions.get("resourceVersion")
                if rv and rv != old["metadata"]["resourceVersion"]:
                    raise self._conflict(kind, name)
            result = self._delete(kind, old, propagation or "Background", grace_period)
        self._notify()
        return result

    def delete_collection(
        self,
        kind: Kind | str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        propagation: str | None = None,
    ) -> list[Obj]:
        kind = self.resolve(kind)
        items, _ = self.list(kind, namespace, label_selector, field_selector)
        deleted = []
        for item in items:
            meta = item["metadata"]
            with contextlib.suppress(ApiError):
                deleted.append(self.delete(kind, meta.get("namespace"), meta["name"], propagation))
        return deleted

    def purge_namespace(self, namespace: str) -> None:
        """Remove a namespace and everything in it at once: no finalizers, no grace, no GC
        (test teardown)."""
        with self._lock:
            for key in [k for k in self._objects if k[1] == namespace]:
                obj = self._objects.pop(key)
                self._emit(self._kinds[key[0]], "DELETED", obj)
            ns_key = (("", "v1", "namespaces"), "", namespace)
            if ns_key in self._objects:
                self._emit(self._kinds[ns_key[0]], "DELETED", self._objects.pop(ns_key))
        self._notify()

    # -- internals (called with the lock held) -------------------------------------------

    def _ns(self, kind: Kind, namespace: str | None) -> str:
        return (namespace or "default") if kind.namespaced else ""

    def _kind_name(self, kind: Kind) -> str:
        return f"{kind.plural}.{kind.group}" if kind.group else kind.plural

    def _not_found(self, kind: Kind, name: str) -> ApiError:
        return ApiError(
            404,
            "NotFound",
            f'{self._kind_name(kind)} "{name}" not found',
            {"name": name, "group": kind.group, "kind": kind.plural},
        )

    def _conflict(self, kind: Kind, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            {"name": name, "group": kind.group, "kind": kind.plural},
        )

    def _existing(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get((kind.key, self._ns(kind, namespace), name))
        if obj is None:
            raise self._not_found(kind, name)
        return obj

    def _emit(self, kind: Kind, type_: str, obj: Obj) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._events.append(_Event(self._rv, kind.key, type_, copy.deepcopy(obj)))
        self._event_rvs.append(self._rv)
        if len(self._events) > EVENTS_KEPT_MAX:
            drop = len(self._events) // 4
            self._oldest_rv = self._event_rvs[drop - 1]
            del self._events[:drop]
            del self._event_rvs[:drop]

    def _create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if kind.namespaced:
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise ApiError(
                    400, "BadRequest", "the namespace of the object does not match the URL"
                )
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", "metadata.name or metadata.generateName is required")
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            meta["name"] = meta["generateName"] + suffix
        key = (kind.key, self._ns(kind, meta.get("namespace")), meta["name"])
        if key in self._objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{self._kind_name(kind)} "{meta["name"]}" already exists',
                {"name": meta["name"], "group": kind.group, "kind": kind.plural},
            )
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta["generation"] = 1
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(transient, None)
        if kind.status:
            obj.pop("status", None)
        if kind.key == ("", "v1", "pods"):
            # as a real server's defaulting: clients (fabric8, Spark's) read the phase of a new pod
            obj["status"] = {"phase": "Pending"}
        if kind.key == ("", "v1", "services"):
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if not spec.get("clusterIP"):
                # allocated as a real server does; nothing routes to it (DNS names the pods)
                self._service_ips += 1
                n = self._service_ips
                spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        if kind.namespaced and ("", "v1", "namespaces") in self._kinds:
            ns_key = (("", "v1", "namespaces"), "", meta["namespace"])
            if ns_key not in self._objects:
                self._create(
                    self._kinds[ns_key[0]], None, {"metadata": {"name": meta["namespace"]}}
                )
        self._objects[key] = obj
        self._emit(kind, "ADDED", obj)
        if kind.key == ("apiextensions.k8s.io", "v1", "customresourcedefinitions"):
            self.register_crd(obj)
        return copy.deepcopy(obj)

    def _write(self, kind: Kind, old: Obj, new: Obj, subresource: str | None) -> Obj:
        old_meta = old["metadata"]
        if subresource == "status":
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        elif subresource is not None:
            raise ApiError(404, "NotFound", f"no subresource {subresource} of {kind.plural}")
        else:
            result = new
            if kind.status:
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            meta = result.setdefault("metadata", {})
            for fixed in ("name", "namespace", "uid", "creationTimestamp", "generation"):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
                else:
                    meta.pop(fixed, None)
            for fixed in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
                else:
                    meta.pop(fixed, None)
            result["apiVersion"] = kind.api_version
            result["kind"] = kind.kind
            if kind.key == ("", "v1", "services"):
                # as the real strategy does: allocated values kept when an update omits them
                old_spec, new_spec = old.get("spec") or {}, result.setdefault("spec", {})
                for allocated in ("clusterIP", "clusterIPs", "type"):
                    if allocated in old_spec and not new_spec.get(allocated):
                        new_spec[allocated] = copy.deepcopy(old_spec[allocated])
            if _spec_part(result) != _spec_part(old):
                meta["generation"] = old_meta.get("generation", 1) + 1
        result["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        if result == old:
            return copy.deepcopy(old)
        key = (kind.key, self._ns(kind, old_meta.get("namespace")), old_meta["name"])
        self._objects[key] = result
        self._emit(kind, "MODIFIED", result)
        if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            snapshot = copy.deepcopy(result)
            self._remove(kind, result)
            return snapshot
        return copy.deepcopy(result)

    def _delete(self, kind: Kind, old: Obj, propagation: str, grace_period: int | None) -> Obj:
        meta = old["metadata"]
        if propagation == "Orphan":
            self._orphan(meta["uid"])
        graceful = (
            kind.key == ("", "v1", "pods")
            and (old.get("spec") or {}).get("nodeName")
            and grace_period != 0
        )
        if meta.get("finalizers") or graceful:
            if meta.get("deletionTimestamp") and not (graceful and grace_period is not None):
                return copy.deepcopy(old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = meta.get("deletionTimestamp") or now_iso()
            if graceful:
                if grace_period is None:
                    grace_period = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                new["metadata"]["deletionGracePeriodSeconds"] = grace_period
            else:
                new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            if new == old:
                return copy.deepcopy(old)
            key = (kind.key, self._ns(kind, meta.get("namespace")), meta["name"])
            self._objects[key] = new
            self._emit(kind, "MODIFIED", new)
            return copy.deepcopy(new)
        snapshot = copy.deepcopy(old)
        self._remove(kind, old)
        return snapshot

    def _remove(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (kind.key, self._ns(kind, meta.get("namespace")), meta["name"])
        gone = self._objects.pop(key, None)
        if gone is None:
            return
        self._emit(kind, "DELETED", gone)
        self._collect(gone)

    def _orphan(self, owner_uid: str) -> None:
        for (kind_key, _ns, _name), obj in list(self._objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") != owner_uid]
            if len(kept) != len(refs):
                new = copy.deepcopy(obj)
                if kept:
                    new["metadata"]["ownerReferences"] = kept
                else:
                    new["metadata"].pop("ownerReferences", None)
                self._write(self._kinds[kind_key], obj, new, None)

    def _collect(self, gone: Obj) -> None:
        """Garbage collection after ``gone`` was removed."""
        uid = gone["metadata"]["uid"]
        live_uids = {o["metadata"]["uid"] for o in self._objects.values()}
        for (kind_key, _ns, _name), obj in list(self._objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid for r in refs):
                continue
            kind = self._kinds[kind_key]
            remaining = [r for r in refs if r.get("uid") != uid and r.get("uid") in live_uids]
            current = self._objects.get((kind_key, _ns, _name))
            if current is None:
                continue
            if remaining:
                new = copy.deepcopy(current)
                new["metadata"]["ownerReferences"] = remaining
                self._write(kind, current, new, None)
            elif not current["metadata"].get("deletionTimestamp"):
                self._delete(kind, current, "Background", None)
        if gone.get("kind") == "Namespace":
            for kind_key, ns, _name in list(self._objects):
                current = self._objects.get((kind_key, ns, _name))
                if ns != gone["metadata"]["name"] or current is None:
                    continue
                if not current["metadata"].get("deletionTimestamp"):
                    self._delete(self._kinds[kind_key], current, "Background", None)

    def _scale_of(self, kind: Kind, obj: Obj) -> Obj:
        if kind.scale is None:
            raise ApiError(404, "NotFound", f"{kind.plural} has no scale subresource")
        selector = None
        if kind.scale.label_selector_path:
            raw = get_path(obj, kind.scale.label_selector_path)
            if isinstance(raw, dict):
                raw = ",".join(f"{k}={v}" for k, v in (raw.get("matchLabels") or {}).items())
            selector = raw
        meta = obj["metadata"]
        status: Obj = {"replicas": get_path(obj, kind.scale.status_replicas_path) or 0}
        if selector:
            status["selector"] = selector
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"],
            },
            "spec": {"replicas": get_path(obj, kind.scale.spec_replicas_path) or 0},
            "status": status,
        }

    def _write_scale(self, kind: Kind, old: Obj, scale: Obj) -> Obj:
        if kind.scale is None:
            raise ApiError(404, "NotFound", f"{kind.plural} has no scale subresource")
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Invalid", "spec.replicas must be a non-negative integer")
        new = copy.deepcopy(old)
        set_path(new, kind.scale.spec_replicas_path, replicas)
        stored = self._write(kind, old, new, None)
        return self._scale_of(kind, stored)

    # -- conveniences for tests and the kubelet stand-in ----------------------------------

    def dump(self) -> str:
        with self._lock:
            return json.dumps(
                {"/".join(k[0]) + f" {k[1]}/{k[2]}": v for k, v in self._objects.items()},
                indent=1,
                default=str,
            )
