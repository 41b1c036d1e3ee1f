"""``TopicSpec.from_resource(body)`` (also ``topic_state``): an ``OdradekTopic`` read once, as a
frozen, validated value.

Its config keys are ``odradek.config.topic``'s, each value parsed as a broker parses it and the
whole checked for the rules between keys; a ``min.insync.replicas`` above the topic's
``replicationFactor`` is refused (no acks=all write could ever succeed). The name's length and
the partition and replication bounds are the CRD's (readers.crd_*).

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.common.topics import is_legal_topic
from odradek.config.topic import CONFIG_KEYS as TOPIC_CONFIG_KEYS
from odradek.config.topic import TopicConfig
from odradek.errors import InvalidConfigError
from odradek_operator import names
from odradek_operator.model.spec.readers import (
    _ABSENT,
    SpecError,
    _as_property,
    _close,
    _int,
    _mapping,
    _only,
    _str,
    crd_fact,
    crd_range,
)

__all__ = [
    "TopicSpec",
    "topic_state",
]

_TOPIC = names.TOPIC_KIND
TOPIC_NAME_MAX = crd_fact(_TOPIC, "spec.topicName", "maxLength")  # TOPIC_NAME_LENGTH_MAX
TOPIC_PARTITIONS = crd_range(_TOPIC, "spec.partitions")
TOPIC_REPLICATION_FACTORS = crd_range(_TOPIC, "spec.replicationFactor")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """An ``OdradekTopic``: the Kafka topic it declares, in the cluster it names."""

    name: str  # the resource's metadata.name
    namespace: str
    cluster: str
    topic_name: str  # the Kafka topic: spec.topicName, default metadata.name
    partitions: int
    replication_factor: int
    config: Mapping[str, str]  # as Kafka prints each value, only the keys the resource sets

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> TopicSpec:
        metadata = _mapping(body.get("metadata"), "metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError("metadata.name", "required")
        spec = _mapping(body.get("spec"), "spec")
        _only(spec, "spec", ("cluster", "topicName", "partitions", "replicationFactor", "config"))
        cluster = _str(spec, "cluster", "spec", None)
        if cluster is None:
            raise SpecError("spec.cluster", "required: the OdradekCluster in this namespace")
        topic_name = _str(spec, "topicName", "spec", name) or name
        if not is_legal_topic(topic_name):
            where = "spec.topicName" if "topicName" in spec else "metadata.name"
            raise SpecError(
                where,
                f"{topic_name!r} is not a legal topic name: up to {TOPIC_NAME_MAX} ASCII "
                "letters, digits, '.', '_' and '-', not '.' or '..'",
            )
        replication_factor = _int(
            spec, "replicationFactor", "spec", _ABSENT, *TOPIC_REPLICATION_FACTORS
        )
        config = _topic_config(spec.get("config"), "spec.config")
        _check_min_insync_replicas(config, replication_factor)
        return cls(
            name=name,
            namespace=str(metadata.get("namespace") or "default"),
            cluster=cluster,
            topic_name=topic_name,
            partitions=_int(spec, "partitions", "spec", _ABSENT, *TOPIC_PARTITIONS),
            replication_factor=replication_factor,
            config=config,
        )

    def topic_config(self) -> TopicConfig:
        """The effective config with Kafka's defaults under the keys the resource sets."""
        return TopicConfig.from_properties(self.config)


def _topic_config(value: object, where: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for key, raw in _mapping(value, where).items():
        path = f"{where}[{key}]"
        row = TOPIC_CONFIG_KEYS.get(key)
        if row is None:
            raise SpecError(path, f"unknown topic config key{_close(key, TOPIC_CONFIG_KEYS)}")
        try:
            config[key] = row.to_string(row.parse(_as_property(raw, path)))
        except InvalidConfigError as e:
            raise SpecError(path, str(e)) from e
    try:
        TopicConfig.from_properties(config)  # rules between keys (compaction lags)
    except InvalidConfigError as e:
        raise SpecError(where, str(e)) from e
    return config


def _check_min_insync_replicas(config: Mapping[str, str], replication_factor: int) -> None:
    """A topic whose min.insync.replicas exceeds its replicas could never take an acks=all write
    (every producer would retry until its delivery timeout): refused, naming both numbers."""
    key = "min.insync.replicas"
    if key in config and int(config[key]) > replication_factor:
        raise SpecError(
            f"spec.config[{key}]",
            f"{key} is {config[key]} but spec.replicationFactor is {replication_factor}: no "
            f"acks=all write could succeed; set {key} to at most {replication_factor}",
        )


def topic_state(topic_body: Mapping[str, Any]) -> TopicSpec:
    """The desired state of an ``OdradekTopic``; ``SpecError`` if it cannot be honoured."""
    return TopicSpec.from_resource(topic_body)
