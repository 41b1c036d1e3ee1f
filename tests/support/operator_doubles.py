"""In-memory doubles of the operator's ports: ``FakeKube`` (the Kubernetes API) and
``FakeAdmin`` (the Odradek cluster's admin API), recording what was asked of them."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping

from odradek.common.partitions import TopicPartition
from odradek.ops import ClusterView
from odradek.ops.model import BrokerInfo, PartitionInfo
from odradek_operator.kube import KubeError, check_allowed


def merge(target: dict, patch: dict) -> dict:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], dict] = {}
        self.actions: list[tuple] = []
        self._uid = itertools.count(1)

    def put(self, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        meta.setdefault("generation", 1)
        self.objects[obj["kind"], meta.get("namespace"), meta["name"]] = obj
        return obj

    def find(self, kind: str, name: str, namespace: str | None = "ns") -> dict | None:
        return self.objects.get((kind, namespace, name))

    async def get(self, kind, name, namespace):
        check_allowed(kind, "get")
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def list(self, kind, namespace, labels=None):
        check_allowed(kind, "list")
        result = []
        for (k, ns, _), obj in sorted(self.objects.items(), key=lambda kv: kv[0][2]):
            if k != kind or (namespace is not None and ns != namespace):
                continue
            have = obj["metadata"].get("labels") or {}
            if all(have.get(a) == b for a, b in (labels or {}).items()):
                result.append(copy.deepcopy(obj))
        return result

    async def create(self, obj):
        check_allowed(obj["kind"], "create")
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise KubeError("exists", 409)
        self.actions.append(("create", obj["kind"], meta["name"]))
        return copy.deepcopy(self.put(obj))

    async def merge_patch(self, kind, name, namespace, patch, subresource=None):
        check_allowed(kind, "patch", subresource)
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise KubeError("not found", 404)
        self.actions.append(("patch", kind, name, subresource, copy.deepcopy(patch)))
        if subresource != "status" and "spec" in patch:
            obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
        merge(obj, patch)
        return copy.deepcopy(obj)

    async def delete(self, kind, name, namespace, propagation="Background"):
        check_allowed(kind, "delete")
        self.actions.append(("delete", kind, name, propagation))
        return self.objects.pop((kind, namespace, name), None) is not None

    def deleted(self, kind: str | None = None) -> list[str]:
        return [a[2] for a in self.actions if a[0] == "delete" and (kind is None or a[1] == kind)]


def pod(
    name: str,
    *,
    ready: bool = True,
    config_hash: str = "h1",
    restart: bool = False,
    component: str = "broker",
    cluster: str = "demo",
    namespace: str = "ns",
    ip: str | None = None,
) -> dict:
    annotations = {"odradek.io/config-hash": config_hash}
    if restart:
        annotations["odradek.io/restart"] = "true"
    ordinal = int(name.rsplit("-", 1)[1])
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations,
            "labels": {
                "app.kubernetes.io/name": "odradek",
                "app.kubernetes.io/instance": cluster,
                "app.kubernetes.io/component": component,
                "apps.kubernetes.io/pod-index": str(ordinal),
            },
        },
        "status": {
            "podIP": ip or f"127.0.1.{ordinal + 1}",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def statefulset(name: str, replicas: int, config_hash: str = "h1", volumes=("data-0",)) -> dict:
    return {
        "kind": "StatefulSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"annotations": {"odradek.io/config-hash": config_hash}}},
            "volumeClaimTemplates": [{"metadata": {"name": v}} for v in volumes],
        },
    }


def view(assignment: Mapping[tuple[str, int], Iterable[int]], brokers: Iterable[int], isr=None):
    """A ClusterView; ``isr`` overrides some partitions' ISR (default: all replicas)."""
    isr = isr or {}
    partitions = {}
    for (topic, p), replicas in assignment.items():
        replicas = tuple(replicas)
        partitions[TopicPartition(topic, p)] = PartitionInfo(
            topic, p, replicas, replicas[0], tuple(isr.get((topic, p), replicas))
        )
    return ClusterView({b: BrokerInfo(b) for b in brokers}, partitions)


class FakeAdmin:
    def __init__(self, cluster_view: ClusterView, configs=None) -> None:
        self.cluster_view = cluster_view
        self.configs: dict[str, dict[str, tuple[str, bool]]] = configs or {}
        self.calls: list[tuple] = []
        self.moving = 0
        self.log_dirs: dict[int, dict[str, int]] = {}
        self.refuse: Exception | None = None

    async def view(self):
        return self.cluster_view

    async def topic_configs(self, topics):
        return {t: dict(self.configs.get(t, {})) for t in topics}

    async def reassignments_in_progress(self):
        return self.moving

    async def drain(self, broker_ids):
        self.calls.append(("drain", list(broker_ids)))
        return 3

    async def rebalance(self):
        self.calls.append(("rebalance",))
        return 2

    async def log_dir_partitions(self, broker_ids):
        return {b: self.log_dirs.get(b, {}) for b in broker_ids}

    async def create_topic(self, name, partitions, replication_factor, config):
        if self.refuse:
            raise self.refuse
        self.calls.append(("create_topic", name, partitions, replication_factor, dict(config)))
        assignment = dict(self.cluster_view.assignment())
        brokers = list(self.cluster_view.brokers)
        for p in range(partitions):
            assignment[TopicPartition(name, p)] = tuple(brokers[:replication_factor])
        self.cluster_view = ClusterView.build(assignment, brokers)
        self.configs[name] = {k: (v, True) for k, v in config.items()}

    async def create_partitions(self, name, total):
        self.calls.append(("create_partitions", name, total))

    async def alter_topic_config(self, name, set_, delete):
        if self.refuse:
            raise self.refuse
        self.calls.append(("alter_topic_config", name, dict(set_), tuple(delete)))
        entries = self.configs.setdefault(name, {})
        entries.update({k: (v, True) for k, v in set_.items()})
        for k in delete:
            entries.pop(k, None)

    async def delete_topic(self, name):
        self.calls.append(("delete_topic", name))


class FakeUserAdmin(FakeAdmin):
    """``FakeAdmin`` plus the users' port (``UserAdmin``): SCRAM credentials, ACLs and client
    quotas in memory; ``authorizer = False`` answers the ACL APIs as a cluster without one."""

    def __init__(self) -> None:
        super().__init__(view({}, range(1)))
        self.scram: dict[str, dict[str, tuple[int, str]]] = {}  # user -> mechanism -> (it, pw)
        self.acls: set = set()
        self.quotas: dict[str, dict[str, float]] = {}
        self.authorizer = True

    def _acl_check(self) -> None:
        if not self.authorizer:
            from odradek_operator.reconcile.admin import AuthorizerDisabled

            raise AuthorizerDisabled("no authorizer")

    async def scram_mechanisms(self, user):
        return {m: it for m, (it, _) in self.scram.get(user, {}).items()}

    async def upsert_scram(self, user, mechanism, iterations, password):
        self.calls.append(("upsert_scram", user, mechanism, password))
        self.scram.setdefault(user, {})[mechanism] = (iterations, password)

    async def delete_scram(self, user, mechanism):
        self.calls.append(("delete_scram", user, mechanism))
        self.scram.get(user, {}).pop(mechanism, None)
        if not self.scram.get(user):
            self.scram.pop(user, None)

    async def acls_of(self, principal):
        self._acl_check()
        return frozenset(b for b in self.acls if b.entry.principal == principal)

    async def create_acls(self, bindings):
        self._acl_check()
        bindings = list(bindings)
        self.calls.append(("create_acls", len(bindings)))
        self.acls.update(bindings)

    async def delete_acls(self, bindings):
        bindings = list(bindings)
        if bindings:
            self._acl_check()
            self.calls.append(("delete_acls", len(bindings)))
        self.acls.difference_update(bindings)

    async def user_quotas(self, user):
        return dict(self.quotas.get(user, {}))

    async def alter_user_quotas(self, user, set_, remove):
        self.calls.append(("alter_user_quotas", user, dict(set_), tuple(remove)))
        entry = self.quotas.setdefault(user, {})
        entry.update(set_)
        for key in remove:
            entry.pop(key, None)
        if not entry:
            self.quotas.pop(user, None)
