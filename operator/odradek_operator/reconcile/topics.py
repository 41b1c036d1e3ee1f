"""OdradekTopic -> the topic in the cluster: create, grow partitions, converge config, delete.

``topic_diff`` (pure) compares the resource's spec with what the cluster reports: missing topic ->
create; more partitions wanted -> grow; fewer -> refused (``PartitionDecreaseRefused``: Kafka
cannot remove partitions); another replication factor -> refused
(``ReplicationFactorChangeRefused``: that is a reassignment, ``odradek reassign``); config keys
of the spec that differ -> set; topic overrides the spec does not name -> deleted (drift made
outside the resource is reverted), except a ``min.insync.replicas`` equal to the replication
factor that the spec does not name: the brokers store that for a topic whose inherited default
is larger (deleting it would only have it stored again). Partitions added elsewhere are kept
(the spec is a minimum then, reported in status). ``reconcile_topic`` runs it against a
``ClusterAdmin`` and returns the status to write; an invalid config the cluster refuses is
``Refused("InvalidConfig")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.ops import ClusterView
from odradek_operator.model import names
from odradek_operator.model.spec import ClusterSpec, SpecError, TopicSpec
from odradek_operator.reconcile.admin import AdminRefused, ClusterAdmin, ClusterUnavailable
from odradek_operator.reconcile.status import Refused, Retry, condition, set_condition
from odradek_operator.reconcile.world import bootstrap_of, read_pods

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

    @property
    def empty(self) -> bool:
        return not (self.create or self.grow_to or self.set_config or self.delete_config)


def topic_diff(spec: TopicSpec, actual: TopicActual | None) -> TopicDiff:
    if actual is None:
        return TopicDiff(create=True)
    if spec.partitions < actual.partitions:
        raise Refused(
            "PartitionDecreaseRefused",
            f"topic {spec.topic_name} has {actual.partitions} partitions; Kafka cannot remove "
            f"partitions, so {spec.partitions} is refused (set {actual.partitions} or more)",
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
    return TopicDiff(False, grow_to, set_config, delete)


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


async def reconcile_topic(admin: ClusterAdmin, spec: TopicSpec) -> tuple[TopicDiff, TopicActual]:
    """Converge the topic; what was changed and the topic as the cluster then reports it."""
    actual = await read_topic(admin, spec.topic_name)
    diff = topic_diff(spec, actual)
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

WAIT_S = 10.0


async def cluster_admin(kube, admin_for, spec: TopicSpec) -> ClusterAdmin:
    """The admin of the topic's cluster; Retry("ClusterNotFound"/"ClusterNotReady") if none."""

    cluster = await kube.get(names.CLUSTER_KIND, spec.cluster, spec.namespace)
    if cluster is None:
        raise Retry(
            f"OdradekCluster {spec.cluster} not found in {spec.namespace}",
            WAIT_S,
            "ClusterNotFound",
        )
    try:
        port = ClusterSpec.from_resource(cluster).ports.client
    except SpecError as e:
        raise Retry(
            f"OdradekCluster {spec.cluster} has an invalid spec: {e}", WAIT_S, "ClusterNotReady"
        ) from e
    bootstrap = bootstrap_of(await read_pods(kube, spec.namespace, spec.cluster, "broker"), port)
    if bootstrap is None:
        raise Retry(f"no broker of {spec.cluster} is ready", WAIT_S, "ClusterNotReady")
    return admin_for(bootstrap)


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

    try:
        try:
            spec = TopicSpec.from_resource(body)
        except SpecError as e:
            reason = "InvalidConfig" if "config" in e.field else "InvalidSpec"
            raise Refused(reason, str(e)) from e
        admin = await cluster_admin(kube, admin_for, spec)
        try:
            diff, actual = await reconcile_topic(admin, spec)
        except ClusterUnavailable as e:
            raise Retry(str(e), WAIT_S, "ClusterUnreachable") from e
    except Retry as retry:
        await write(
            set_condition(
                old.get("conditions"), condition("Ready", False, retry.reason, str(retry))
            )
        )
        raise
    except Refused as refused:
        conditions = set_condition(
            old.get("conditions"), condition("Error", True, refused.reason, str(refused))
        )
        await write(
            set_condition(conditions, condition("Ready", False, refused.reason, str(refused)))
        )
        raise
    status.update(topic_status(actual))
    conditions = set_condition(old.get("conditions"), condition("Error", False, "NoError", ""))
    if periodic and not diff.create and (diff.set_config or diff.delete_config):
        ready = condition("Ready", True, "DriftReverted", drift_message(diff))
    elif diff.create:
        ready = condition("Ready", True, "Created", f"topic {spec.topic_name} created")
    else:
        ready = condition("Ready", True, "InSync", f"topic {spec.topic_name} matches its spec")
    await write(set_condition(conditions, ready))
    return status


async def delete_topic(kube, admin_for, body: Mapping) -> str:
    """The finalizer's job: delete the topic, unless its cluster is gone or going (then there is
    nothing left to delete it from, and the resource must not hang on its finalizer)."""

    try:
        spec = TopicSpec.from_resource(body)
    except SpecError:
        return "invalid spec: no topic was ever created"
    cluster = await kube.get(names.CLUSTER_KIND, spec.cluster, spec.namespace)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        return f"cluster {spec.cluster} is gone: nothing to delete"
    admin = await cluster_admin(kube, admin_for, spec)
    if await read_topic(admin, spec.topic_name) is None:
        return f"topic {spec.topic_name} did not exist"
    await admin.delete_topic(spec.topic_name)
    return f"topic {spec.topic_name} deleted"
