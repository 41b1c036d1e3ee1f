"""OdradekTopic -> the topic in the cluster: create, grow partitions, converge config, delete.

``topic_diff`` (pure) compares the resource's spec with what the cluster reports: missing topic ->
create; more partitions wanted -> grow; fewer -> refused (``PartitionDecreaseRefused``: Kafka
cannot remove partitions); another replication factor -> refused
(``ReplicationFactorChangeRefused``: that is a reassignment, ``odradek reassign``); config keys
of the spec that differ -> set; topic overrides the spec does not name -> deleted (drift made
outside the resource is reverted). Partitions added elsewhere are kept (the spec is a minimum
then, reported in status). ``reconcile_topic`` runs it against a ``ClusterAdmin`` and returns the
status to write; an invalid config the cluster refuses is ``Refused("InvalidConfig")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.ops import ClusterView
from odradek_operator.reconcile.admin import AdminRefused, ClusterAdmin
from odradek_operator.reconcile.status import Refused

__all__ = ["TopicActual", "TopicDiff", "TopicSpec", "reconcile_topic", "topic_diff"]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_resource(cls, body: Mapping) -> TopicSpec:
        spec = body.get("spec") or {}
        name = spec.get("topicName") or body["metadata"]["name"]
        partitions = spec.get("partitions", 1)
        rf = spec.get("replicationFactor", 1)
        if not isinstance(partitions, int) or partitions < 1:
            raise Refused("InvalidSpec", f"partitions must be a positive integer: {partitions!r}")
        if not isinstance(rf, int) or rf < 1:
            raise Refused("InvalidSpec", f"replicationFactor must be a positive integer: {rf!r}")
        config = {str(k): _config_value(v) for k, v in (spec.get("config") or {}).items()}
        return cls(name, partitions, rf, config)


def _config_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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
            f"topic {spec.name} has {actual.partitions} partitions; Kafka cannot remove "
            f"partitions, so {spec.partitions} is refused (set {actual.partitions} or more)",
        )
    if spec.replication_factor != actual.replication_factor:
        raise Refused(
            "ReplicationFactorChangeRefused",
            f"topic {spec.name} has replication factor {actual.replication_factor}; changing it "
            f"to {spec.replication_factor} is a reassignment (odradek reassign), not done here",
        )
    grow_to = spec.partitions if spec.partitions > actual.partitions else None
    set_config = {k: v for k, v in spec.config.items() if actual.overrides.get(k) != v}
    delete = tuple(sorted(k for k in actual.overrides if k not in spec.config))
    return TopicDiff(False, grow_to, set_config, delete)


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
    actual = await read_topic(admin, spec.name)
    diff = topic_diff(spec, actual)
    try:
        if diff.create:
            await admin.create_topic(
                spec.name, spec.partitions, spec.replication_factor, spec.config
            )
        if diff.grow_to:
            await admin.create_partitions(spec.name, diff.grow_to)
        if diff.set_config or diff.delete_config:
            await admin.alter_topic_config(spec.name, diff.set_config, diff.delete_config)
    except AdminRefused as e:
        raise Refused("InvalidConfig", f"the cluster refused topic {spec.name}: {e}") from e
    if diff.empty:
        return diff, actual  # type: ignore[return-value]
    after = await read_topic(admin, spec.name)
    return diff, after or TopicActual(spec.partitions, spec.replication_factor, dict(spec.config))


def topic_status(actual: TopicActual) -> dict:
    return {
        "partitions": actual.partitions,
        "replicationFactor": actual.replication_factor,
        "config": dict(sorted(actual.overrides.items())),
    }
