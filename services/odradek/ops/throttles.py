"""Replication throttles for a reassignment, set and cleared as kafka-reassign-partitions does.

With a throttle of R bytes/s, ``--execute`` sets (IncrementalAlterConfigs, SET):

- on every broker involved (a current or a target replica of a moving partition), BROKER
  resource ``"<id>"``: ``leader.replication.throttled.rate`` = ``follower.replication.throttled
  .rate`` = R;
- on every moving topic, TOPIC resource: ``leader.replication.throttled.replicas`` = the
  current replicas of its moving partitions, ``follower.replication.throttled.replicas`` = the
  new ones, each as ``partition:broker`` entries, comma-separated, sorted as strings (Kafka's
  ``TreeSet[String]``): ``0:1,0:2,10:1,2:3``.

``--verify`` (once nothing is in progress) and ``--cancel`` clear them (DELETE): both rates on
every live broker and every target broker that is live, both replica lists on every topic of the
plan. One deviation: Kafka also sets an empty follower list on a topic whose partitions are only
reordered; that list is left alone here, since it would throttle nothing.

A BROKER resource goes to that broker, as Kafka's admin client routes it; TOPIC resources go to
any broker in one request. A refusal names the resource, the Kafka error code and the message.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.client.admin import INCREMENTAL_ALTER_CONFIGS, ClusterClient, build, element_type
from odradek.client.errors import ClusterRequestError
from odradek.errors import ErrorCode
from odradek.ops.plan import Plan

__all__ = [
    "LEADER_RATE",
    "FOLLOWER_RATE",
    "LEADER_REPLICAS",
    "FOLLOWER_REPLICAS",
    "topic_throttles",
    "throttled_brokers",
    "set_throttles",
    "clear_throttles",
]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

INCREMENTAL_ALTER_CONFIGS_MAX_VERSION = 1
RESOURCE_TOPIC = 2  # Kafka's ConfigResource.Type ids
RESOURCE_BROKER = 4
OP_SET = 0  # Kafka's AlterConfigOp.OpType ids
OP_DELETE = 1


def topic_throttles(plan: Plan) -> dict[str, dict[str, str]]:
    """Topic -> {config key: value} of the throttled replicas lists, as Kafka computes them."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for move in plan:
        leaders.setdefault(move.topic, set()).update(f"{move.partition}:{b}" for b in move.current)
        followers.setdefault(move.topic, set()).update(f"{move.partition}:{b}" for b in move.adding)
    result = {}
    for topic in sorted(leaders):
        configs = {LEADER_REPLICAS: ",".join(sorted(leaders[topic]))}
        if followers[topic]:
            configs[FOLLOWER_REPLICAS] = ",".join(sorted(followers[topic]))
        result[topic] = configs
    return result


def throttled_brokers(plan: Plan) -> list[int]:
    """Every broker holding a current or a target replica of a partition in the plan."""
    return sorted({b for move in plan for b in (*move.current, *move.target)})


async def set_throttles(client: ClusterClient, plan: Plan, rate_bytes_per_s: int) -> list[int]:
    """Set the rates on the plan's brokers and the replica lists on its topics; the brokers."""
    if rate_bytes_per_s <= 0:
        raise ValueError(f"a throttle must be a positive number of bytes/s, not {rate_bytes_per_s}")
    topics = [
        (RESOURCE_TOPIC, topic, [(key, OP_SET, value) for key, value in configs.items()])
        for topic, configs in topic_throttles(plan).items()
    ]
    await _alter(client, None, topics)
    brokers = throttled_brokers(plan)
    rate = str(rate_bytes_per_s)
    for broker in brokers:
        configs = [(LEADER_RATE, OP_SET, rate), (FOLLOWER_RATE, OP_SET, rate)]
        await _alter(client, broker, [(RESOURCE_BROKER, str(broker), configs)])
    return brokers


async def clear_throttles(client: ClusterClient, topics: Iterable[str], brokers: Iterable[int]):
    """Delete the throttles of ``topics`` and the rates of ``brokers`` (live ones only)."""
    deletes = [(LEADER_REPLICAS, OP_DELETE, None), (FOLLOWER_REPLICAS, OP_DELETE, None)]
    resources = [(RESOURCE_TOPIC, topic, deletes) for topic in sorted(set(topics))]
    if resources:
        await _alter(client, None, resources)
    for broker in sorted(set(brokers)):
        configs = [(LEADER_RATE, OP_DELETE, None), (FOLLOWER_RATE, OP_DELETE, None)]
        await _alter(client, broker, [(RESOURCE_BROKER, str(broker), configs)])


def alter_configs_request(
    request_type: type, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]]
):
    """An IncrementalAlterConfigs request of ``request_type``'s version."""
    resource_type = element_type(request_type, "resources")
    config_type = element_type(resource_type, "configs")
    return build(
        request_type,
        validate_only=False,
        resources=tuple(
            resource_type(
                resource_type=kind,
                resource_name=name,
                configs=tuple(
                    config_type(name=key, config_operation=op, value=value)
                    for key, op, value in configs
                ),
            )
            for kind, name, configs in resources
        ),
    )


async def _alter(
    client: ClusterClient,
    broker: int | None,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
) -> None:
    """One IncrementalAlterConfigs: to ``broker``, or to any broker when None."""

    def make(request_type):
        return alter_configs_request(request_type, resources)

    max_version = INCREMENTAL_ALTER_CONFIGS_MAX_VERSION
    if broker is None:
        response = await client.send_any(INCREMENTAL_ALTER_CONFIGS, max_version, make)
    else:
        response = await client.send_to(broker, INCREMENTAL_ALTER_CONFIGS, max_version, make)
    refusals = {
        f"{'topic' if r.resource_type == RESOURCE_TOPIC else 'broker'} {r.resource_name}": (
            r.error_code,
            r.error_message,
        )
        for r in response.responses
        if r.error_code != ErrorCode.none
    }
    if refusals:
        detail = "; ".join(
            f"{what}: {code.name}{f' ({message})' if message else ''}"
            for what, (code, message) in refusals.items()
        )
        first = next(iter(refusals.values()))[0]
        raise ClusterRequestError(f"setting throttles refused: {detail}", first, refusals)
