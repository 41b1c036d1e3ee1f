"""Replication throttle settings (KIP-73) with Kafka's names: the rates and the throttled replicas.

Two kinds of keys, as Kafka has them:

- **Dynamic broker configs** ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (LONG bytes/s, at least 0; default Long.MAX_VALUE, which
  means unthrottled). They live in ZooKeeper, ``/config/brokers/<id>`` for one broker and
  ``/config/brokers/<default>`` for every broker; a broker uses its own value, else the default
  entity's, else Long.MAX_VALUE (Kafka's ``BrokerConfigHandler`` since KAFKA-10190). They are the
  only broker keys that can be changed while brokers run: ``check_dynamic_broker_config`` refuses
  any other key with Kafka's "Cannot update these configs dynamically" (where Kafka would also
  store a key it does not know, Odradek refuses it: a setting nobody reads is never taken).
- **Topic configs** ``leader.replication.throttled.replicas`` and
  ``follower.replication.throttled.replicas`` (LIST): ``partition:broker`` pairs, or ``*`` for every
  replica of the topic. A broker reads only the pairs naming itself (``throttled_partitions``):
  the leader list names the brokers that throttle what they *send* as leaders, the follower list
  the brokers that throttle what they *fetch* as followers (kafka-reassign-partitions lists the
  current replicas in the first and the moving ones in the second). A bad list is refused with
  Kafka's ``ThrottledReplicaListValidator`` message.

Immutable and free of I/O: any thread may use it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.config.keys import LONG_MAX, ConfigKey, ConfigType, invalid_value
from odradek.errors import InvalidConfigError

__all__ = [
    "ALL_REPLICAS",
    "DYNAMIC_BROKER_KEYS",
    "FOLLOWER_THROTTLED_RATE",
    "FOLLOWER_THROTTLED_REPLICAS",
    "LEADER_THROTTLED_RATE",
    "LEADER_THROTTLED_REPLICAS",
    "THROTTLED_REPLICAS_KEYS",
    "UNTHROTTLED_RATE",
    "ThrottleRates",
    "check_dynamic_broker_config",
    "lists_replica",
    "throttled_partitions",
]

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
UNTHROTTLED_RATE = LONG_MAX  # Kafka's DefaultReplicationThrottledRate
ALL_REPLICAS = "*"
# Distinct (list, broker) pairs whose parse is kept: each is a topic's config value, so a few
# per topic that has throttles; a full cache only costs parsing again.
THROTTLED_LISTS_CACHED_MAX = 4096

_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")

DYNAMIC_BROKER_KEYS: Mapping[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            FOLLOWER_THROTTLED_RATE,
            ConfigType.LONG,
            UNTHROTTLED_RATE,
            "Bytes per second a follower may fetch for the partitions listed in "
            "follower.replication.throttled.replicas, measured over "
            "replication.quota.window.num windows.",
            minimum=0,
        ),
        ConfigKey(
            LEADER_THROTTLED_RATE,
            ConfigType.LONG,
            UNTHROTTLED_RATE,
            "Bytes per second a leader may send to followers for the partitions listed in "
            "leader.replication.throttled.replicas, measured over "
            "replication.quota.window.num windows.",
            minimum=0,
        ),
    )
}


def _throttled_replicas(name: str, raw: object) -> tuple[str, ...]:
    """Kafka's LIST parse, then ``ThrottledReplicaListValidator``; elements are trimmed."""
    if isinstance(raw, str):
        items = tuple(part.strip() for part in raw.split(",")) if raw.strip() else ()
    elif isinstance(raw, list | tuple) and all(isinstance(part, str) for part in raw):
        items = tuple(part.strip() for part in raw)
    else:
        raise invalid_value(name, raw, "Expected a value of type LIST")
    if not (all(_REPLICA.fullmatch(item) for item in items) or "".join(items) == ALL_REPLICAS):
        raise invalid_value(
            name,
            f"[{', '.join(items)}]",  # Kafka prints the parsed java.util.List
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )
    return items


def _replicas_key(name: str, doc: str) -> ConfigKey:
    return ConfigKey(name, ConfigType.LIST, (), doc, convert=_throttled_replicas)


THROTTLED_REPLICAS_KEYS: tuple[ConfigKey, ...] = (
    _replicas_key(
        FOLLOWER_THROTTLED_REPLICAS,
        "Replicas whose fetching is throttled by follower.replication.throttled.rate on the "
        "follower: partition:broker pairs, or '*' for every replica of the topic.",
    ),
    _replicas_key(
        LEADER_THROTTLED_REPLICAS,
        "Replicas whose sending to followers is throttled by leader.replication.throttled.rate "
        "on the leader: partition:broker pairs, or '*' for every replica of the topic.",
    ),
)


@functools.lru_cache(maxsize=THROTTLED_LISTS_CACHED_MAX)
def throttled_partitions(replicas: tuple[str, ...], broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas value lists for ``broker_id``; None means all (``*``).

    ``replicas`` is a value that passed validation; empty elements (which Kafka's validator lets
    through) name nothing.
    """
    if "".join(replicas) == ALL_REPLICAS:
        return None
    listed = set()
    for item in replicas:
        if item:
            partition, _, broker = item.partition(":")
            if int(broker) == broker_id:
                listed.add(int(partition))
    return frozenset(listed)


def lists_replica(replicas: tuple[str, ...], partition: int, broker_id: int) -> bool:
    """Whether ``replicas`` lists ``partition`` on ``broker_id`` (Kafka's ``isThrottled``)."""
    if not replicas:
        return False
    listed = throttled_partitions(replicas, broker_id)
    return listed is None or partition in listed


@dataclass(frozen=True, slots=True)
class ThrottleRates:
    """The two throttled rates a broker applies, bytes/s (``UNTHROTTLED_RATE``: no limit)."""

    leader_bytes_per_s: int = UNTHROTTLED_RATE
    follower_bytes_per_s: int = UNTHROTTLED_RATE

    @classmethod
    def of(cls, per_broker: Mapping[str, str], default: Mapping[str, str]) -> ThrottleRates:
        """This broker's own values first, then the cluster default's (both already checked)."""

        def rate(name: str) -> int:
            for source in (per_broker, default):
                if name in source:
                    return DYNAMIC_BROKER_KEYS[name].parse(source[name])
            return UNTHROTTLED_RATE

        return cls(rate(LEADER_THROTTLED_RATE), rate(FOLLOWER_THROTTLED_RATE))


def check_dynamic_broker_config(props: Mapping[str, object]) -> dict[str, str]:
    """Validate dynamic broker configs; returns them as Kafka prints them (what ZooKeeper holds).

    Kafka's order (``DynamicBrokerConfig.validateConfigs``): keys that cannot change at runtime
    first, all named at once, then each value.
    """
    fixed = sorted(name for name in props if name not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise InvalidConfigError(
            f"Cannot update these configs dynamically: Set({', '.join(fixed)}) (the dynamic "
            f"broker configs here are {', '.join(sorted(DYNAMIC_BROKER_KEYS))})"
        )
    return {
        name: DYNAMIC_BROKER_KEYS[name].to_string(DYNAMIC_BROKER_KEYS[name].parse(value))
        for name, value in sorted(props.items())
    }
