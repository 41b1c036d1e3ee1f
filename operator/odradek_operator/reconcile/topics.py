"""OdradekTopic -> the topic in the cluster: create, grow partitions, converge config, delete.

``topic_diff`` (pure) compares the resource's spec with what the cluster reports: missing topic ->
create; more partitions wanted -> grow; a spec lowered below the partitions the operator last
applied (``status.appliedPartitions``) -> refused (``PartitionDecreaseRefused``: Kafka cannot
remove partitions; the CRD's CEL rule says the same); another replication factor -> refused
(``ReplicationFactorChangeRefused``: that is a reassignment, ``odradek reassign``); config keys
of the spec that differ -> set; topic overrides the spec does not name -> deleted (drift made
outside the resource is reverted), except a ``min.insync.replicas`` equal to the replication
factor that the spec does not name: the brokers store that for a topic whose inherited default
is larger (deleting it would only have it stored again). Partitions added elsewhere are kept
(the spec is a minimum then, reported in status: ``TopicDiff.extra_partitions``) and config
drift is still repaired. ``reconcile_topic`` runs it against a ``ClusterAdmin`` and returns the
status to write; an invalid config the cluster refuses is ``Refused("InvalidConfig")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.ops import ClusterView
from odradek_operator import names
from odradek_operator.model.spec.cluster import ClusterSpec
from odradek_operator.model.spec.readers import SpecError
from odradek_operator.model.spec.topic import TopicSpec
from odradek_operator.reconcile.admin import AdminRefused, ClusterAdmin, ClusterUnavailable
from odradek_operator.reconcile.certificates import read_admin_tls
from odradek_operator.reconcile.status import (
    Refused,
    Retry,
    condition,
    failures_written,
    set_condition,
)
from odradek_operator.reconcile.world import admin_bootstrap, read_pods

__all__ = ["TopicActual", "TopicDiff", "reconcile_topic", "topic_diff", "topic_status"]


@dataclass(frozen=True)
class TopicActual:
    partitions: int
    replication_factor: int
    overrides: dict[str, str]  # the topic's own config (not defaults)


@dataclass(frozen=True)
class TopicDiff:
    create: bool = False
    grow_to: int | None = None
    set_config: dict[str, str] = field(default_factory=dict)
    delete_config: tuple[str, ...] = ()
    extra_partitions: int = 0  # partitions beyond the spec's, added outside the resource: kept

    @property
    def empty(self) -> bool:
        return not (self.create or self.grow_to or self.set_config or self.delete_config)


def topic_diff(
    spec: TopicSpec, actual: TopicActual | None, applied_partitions: int | None = None
) -> TopicDiff:
    """``applied_partitions``: the spec's partitions the operator last applied (None: never).
    A spec below it was lowered, which is refused; a topic with more partitions than a spec
    that was not lowered grew outside the resource, which is kept."""
    if actual is None:
        return TopicDiff(create=True)
    if applied_partitions is not None and spec.partitions < applied_partitions:
        raise Refused(
            "PartitionDecreaseRefused",
            f"topic {spec.topic_name} has {actual.partitions} partitions; Kafka cannot remove "
            f"partitions, so {spec.partitions} is refused (set {applied_partitions} or more)",
        )
    if spec.replication_factor != actual.replication_factor:
        raise Refused(
            "ReplicationFactorChangeRefused",
            f"topic {spec.topic_name} has replication factor {actual.replication_factor}; "
            f"changing it to {spec.replication_factor} is a reassignment (odradek reassign), "
            "not done here",
        )
    grow_to = spec.partitions if spec.partitions > actual.partitions else None
    set_config = {k: v for k, v in spec.config.items() if actual.overrides.get(k) != v}
    delete = tuple(
        sorted(
            k
            for k, v in actual.overrides.items()
            if k not in spec.config and not _fitted_by_brokers(k, v, actual)
        )
    )
    extra = max(0, actual.partitions - spec.partitions)
    return TopicDiff(False, grow_to, set_config, delete, extra)


def _fitted_by_brokers(key: str, value: str, actual: TopicActual) -> bool:
    """The min.insync.replicas brokers store for a topic when their default exceeds its RF."""
    return key == "min.insync.replicas" and value == str(actual.replication_factor)


def actual_of(view: ClusterView, name: str, configs: Mapping) -> TopicActual | None:
    partitions = [p for tp, p in view.partitions.items() if tp.topic == name]
    if not partitions:
        return None
    rf = max(len(p.replicas) for p in partitions)
    overrides = {k: v for k, (v, override) in configs.get(name, {}).items() if override}
    return TopicActual(len(partitions), rf, overrides)


async def read_topic(admin: ClusterAdmin, name: str) -> TopicActual | None:
    view = await admin.view()
    if not any(tp.topic == name for tp in view.partitions):
        return None
    return actual_of(view, name, await admin.topic_configs([name]))


async def reconcile_topic(
    admin: ClusterAdmin, spec: TopicSpec, applied_partitions: int | None = None
) -> tuple[TopicDiff, TopicActual]:
    """Converge the topic; what was changed and the topic as the cluster then reports it."""
    actual = await read_topic(admin, spec.topic_name)
    diff = topic_diff(spec, actual, applied_partitions)
    try:
        if diff.create:
            await admin.create_topic(
                spec.topic_name, spec.partitions, spec.replication_factor, spec.config
            )
        if diff.grow_to:
            await admin.create_partitions(spec.topic_name, diff.grow_to)
        if diff.set_config or diff.delete_config:
            await admin.alter_topic_config(spec.topic_name, diff.set_config, diff.delete_config)
    except AdminRefused as e:
        reason = "InvalidConfig" if "config" in str(e).lower() else "TopicRefused"
        raise Refused(reason, f"the cluster refused topic {spec.topic_name}: {e}") from e
    if diff.empty:
        return diff, actual  # type: ignore[return-value]
    after = await read_topic(admin, spec.topic_name)
    return diff, after or TopicActual(spec.partitions, spec.replication_factor, dict(spec.config))


def topic_status(actual: TopicActual) -> dict:
    return {
        "partitions": actual.partitions,
        "replicationFactor": actual.replication_factor,
        "config": dict(sorted(actual.overrides.items())),
    }


# -- the OdradekTopic resource -------------------------------------------------------------------
#
# One topic, one resource (as Strimzi's topic operator): of the OdradekTopics naming one topic of
# one cluster, the one managing it now, else the oldest (creationTimestamp, then name) owns it;
# the others are refused with ``ResourceConflict`` and never touch the topic, not even when
# deleted. The topic a resource
# manages is recorded in ``status.topicName`` once it owns it: a later ``spec.topicName`` that
# differs is refused (the CRD's CEL rule; kmock does not evaluate CEL), and deletion deletes the
# recorded topic, whatever the spec has become (even an invalid one).

WAIT_S = 10.0
CONFLICT = "ResourceConflict"


def _managed_name(body: Mapping) -> str | None:
    """The topic an OdradekTopic claims: the one it manages, else the one its spec names."""
    status = body.get("status") or {}
    if isinstance(status.get("topicName"), str):
        return status["topicName"]
    spec = body.get("spec") or {}
    name = spec.get("topicName") or body["metadata"].get("name")
    return name if isinstance(name, str) else None


def _claim_order(body: Mapping) -> tuple[bool, str, str]:
    """Owners sort first: a resource that manages its topic now keeps it, then the oldest, then
    by name. ``creationTimestamp`` has one-second resolution: without the first key, a rival
    created in the owner's second with a smaller name would take over a topic already in use."""
    meta = body["metadata"]
    return (not _manages_now(body), str(meta.get("creationTimestamp") or ""), str(meta["name"]))


def _manages_now(body: Mapping) -> bool:
    """It recorded its topic (``status.topicName``) and was not refused as a rival since."""
    status = body.get("status") or {}
    refused = any(
        c.get("type") == "Error" and c.get("status") == "True" and c.get("reason") == CONFLICT
        for c in status.get("conditions") or ()
    )
    return isinstance(status.get("topicName"), str) and not refused


async def topic_owner(kube, namespace: str, cluster: str, topic_name: str) -> Mapping | None:
    """The OdradekTopic that owns ``topic_name`` in ``cluster`` (``_claim_order``'s first)."""
    claims = [
        body
        for body in await kube.list(names.TOPIC_KIND, namespace)
        if (body.get("spec") or {}).get("cluster") == cluster and _managed_name(body) == topic_name
    ]
    return min(claims, key=_claim_order, default=None)


async def check_ownership(kube, spec: TopicSpec, body: Mapping) -> None:
    """Refused unless ``body`` may manage ``spec.topic_name`` (see the comment above)."""
    managed = (body.get("status") or {}).get("topicName")
    if managed and managed != spec.topic_name:
        raise Refused(
            "TopicNameChangeRefused",
            f"this resource manages topic {managed}; spec.topicName {spec.topic_name} is refused "
            "(topicName is immutable: set it back, or declare the other topic in a new "
            "OdradekTopic)",
        )
    owner = await topic_owner(kube, spec.namespace, spec.cluster, spec.topic_name)
    if owner is not None and owner["metadata"]["name"] != spec.name:
        raise Refused(
            CONFLICT,
            f"topic {spec.topic_name} of cluster {spec.cluster} is managed by OdradekTopic "
            f"{owner['metadata']['name']} (the oldest resource naming it); this one is ignored "
            "and deleting it leaves the topic alone",
        )


async def cluster_admin(kube, admin_for, cluster_name: str, namespace: str) -> ClusterAdmin:
    """The admin of the topic's cluster; Retry("ClusterNotFound"/"ClusterNotReady") if none."""

    cluster = await kube.get(names.CLUSTER_KIND, cluster_name, namespace)
    if cluster is None:
        raise Retry(
            f"OdradekCluster {cluster_name} not found in {namespace}", WAIT_S, "ClusterNotFound"
        )
    try:
        cluster_spec = ClusterSpec.from_resource(cluster)
    except SpecError as e:
        raise Retry(
            f"OdradekCluster {cluster_name} has an invalid spec: {e}", WAIT_S, "ClusterNotReady"
        ) from e
    pods = await read_pods(kube, namespace, cluster_name, "broker")
    bootstrap = admin_bootstrap(cluster_spec, pods)
    if bootstrap is None:
        raise Retry(f"no broker of {cluster_name} is ready", WAIT_S, "ClusterNotReady")
    if not cluster_spec.secured:
        return admin_for(bootstrap)
    tls = await read_admin_tls(kube, cluster_spec)
    if tls is None:
        raise Retry(
            f"the operator's certificate of {cluster_name} is not made yet",
            WAIT_S,
            "ClusterNotReady",
        )
    return admin_for(bootstrap, tls=tls)


def extra_partitions_message(spec: TopicSpec, diff: TopicDiff) -> str:
    if not diff.extra_partitions:
        return ""
    return (
        f"; topic {spec.topic_name} has {spec.partitions + diff.extra_partitions} partitions, "
        f"{diff.extra_partitions} more than spec.partitions ({spec.partitions}): added outside "
        "the resource and kept (Kafka cannot remove partitions)"
    )


def drift_message(diff: TopicDiff) -> str:
    changed = sorted([*diff.set_config, *diff.delete_config])
    return "config changed outside the resource was reverted: " + ", ".join(changed)


async def sync_topic(kube, admin_for, body: Mapping, *, periodic: bool = False) -> dict:
    """Converge one OdradekTopic and write its status; Retry / Refused as the other passes."""

    meta = body["metadata"]
    old = dict(body.get("status") or {})
    status: dict = {"observedGeneration": meta.get("generation", 0)}

    async def write(conditions: list[dict]) -> None:
        status["conditions"] = conditions
        await kube.merge_patch(
            names.TOPIC_KIND, meta["name"], meta.get("namespace"), {"status": status}, "status"
        )

    async with failures_written(write, old.get("conditions")):
        try:
            spec = TopicSpec.from_resource(body)
        except SpecError as e:
            reason = "InvalidConfig" if "config" in e.field else "InvalidSpec"
            raise Refused(reason, str(e)) from e
        await check_ownership(kube, spec, body)
        admin = await cluster_admin(kube, admin_for, spec.cluster, spec.namespace)
        try:
            diff, actual = await reconcile_topic(admin, spec, old.get("appliedPartitions"))
        except ClusterUnavailable as e:
            raise Retry(str(e), WAIT_S, "ClusterUnreachable") from e
    status.update(topic_status(actual))
    status["topicName"] = spec.topic_name
    status["appliedPartitions"] = spec.partitions
    conditions = set_condition(old.get("conditions"), condition("Error", False, "NoError", ""))
    kept = extra_partitions_message(spec, diff)
    if periodic and not diff.create and (diff.set_config or diff.delete_config):
        ready = condition("Ready", True, "DriftReverted", drift_message(diff) + kept)
    elif diff.extra_partitions:
        ready = condition("Ready", True, "PartitionsAddedOutside", kept.removeprefix("; "))
    elif diff.create:
        ready = condition("Ready", True, "Created", f"topic {spec.topic_name} created")
    else:
        ready = condition("Ready", True, "InSync", f"topic {spec.topic_name} matches its spec")
    await write(set_condition(conditions, ready))
    return status


async def delete_topic(kube, admin_for, body: Mapping) -> str:
    """The finalizer's job: delete the topic this resource manages (``status.topicName``, which
    an edit of the spec cannot change), unless another resource owns it (then it is not ours) or
    its cluster is gone or going (then there is nothing left to delete it from, and the
    resource must not hang on its finalizer)."""

    meta = body["metadata"]
    namespace = str(meta.get("namespace") or "default")
    cluster_name = (body.get("spec") or {}).get("cluster")
    topic_name = (body.get("status") or {}).get("topicName")
    if topic_name is None:  # never managed one (status from before status.topicName: its spec's)
        try:
            topic_name = TopicSpec.from_resource(body).topic_name
        except SpecError:
            return "invalid spec and no topic managed: nothing to delete"
    if not isinstance(cluster_name, str) or not isinstance(topic_name, str):
        return "no cluster or topic named: nothing to delete"
    owner = await topic_owner(kube, namespace, cluster_name, topic_name)
    if owner is None or owner["metadata"]["name"] != meta["name"]:
        by = f"OdradekTopic {owner['metadata']['name']}" if owner else "no resource"
        return f"topic {topic_name} is managed by {by}: left alone"
    cluster = await kube.get(names.CLUSTER_KIND, cluster_name, namespace)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return f"cluster {cluster_name} is gone: nothing to delete"
    admin = await cluster_admin(kube, admin_for, cluster_name, namespace)
    if await read_topic(admin, topic_name) is None:
        return f"topic {topic_name} did not exist"
    await admin.delete_topic(topic_name)
    return f"topic {topic_name} deleted"
