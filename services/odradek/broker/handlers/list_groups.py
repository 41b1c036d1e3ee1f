"""ListGroups (16, v0-5): every group this broker coordinates, in one answer.

One answer across the shards this broker leads (each partition of ``__consumer_offsets`` whose
leader the metadata cache says is this broker): ``groups.admin.list_groups`` on each. v4+ filter
by state, v5+ by type (``classic``, ``consumer``); v0-2 list without state, v3 adds nothing the
answer carries. As Kafka's coordinator: a shard still loading makes the whole answer
COORDINATOR_LOAD_IN_PROGRESS (clients retry), a shard that moved away meanwhile is skipped (its
new coordinator lists it), and a broker without ``__consumer_offsets`` lists nothing.

DESCRIBE on the cluster lists every group; without it, only the groups the principal may
DESCRIBE (Kafka's ``handleListGroupsRequest``), with no error.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import authorize_cluster
from odradek.broker.context import RequestContext
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.common.topics import OFFSETS_TOPIC
from odradek.coordinator.errors import NotCoordinatorError
from odradek.errors import ErrorCode, OdradekError
from odradek.groups import admin
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import TimeSlices, distinct

API_KEY = ApiKey.LIST_GROUPS


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    listed_type = element_type(response_type, "groups")
    # Each shard is handed the distinct filters only: what they admit is the same, and a
    # million repeats of one name were gone through again by each of the 50 shards (issue 23).
    slices = TimeSlices()
    states_filter = tuple(await distinct(getattr(request, "states_filter", ()) or (), slices))
    types_filter = tuple(await distinct(getattr(request, "types_filter", ()) or (), slices))
    error, listed = await _list(ctx, states_filter, types_filter)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        listed = [
            g
            for g in listed
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        groups=tuple(
            build(
                listed_type,
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.type.value,
            )
            for g in listed
        ),
    )


async def _list(
    ctx: RequestContext, states_filter: tuple[str, ...], types_filter: tuple[str, ...]
) -> tuple[ErrorCode, list[admin.ListedGroup]]:
    broker = ctx.broker
    groups = broker.groups
    topic = broker.metadata.topic(OFFSETS_TOPIC)
    if groups is None or topic is None:
        return ErrorCode.none, []
    led = sorted(i for i, p in topic.partitions.items() if p.leader == broker.broker_id)
    listed: list[admin.ListedGroup] = []
    for partition in led:
        try:
            listed.extend(
                await groups.read_partition(
                    partition,
                    lambda shard: admin.list_groups(
                        shard.groups,
                        shard.offsets,
                        states_filter=states_filter,
                        types_filter=types_filter,
                    ),
                )
            )
        except NotCoordinatorError:
            continue  # moved away since the metadata said so: its new leader lists it
        except OdradekError as e:
            return e.error_code, []
    return ErrorCode.none, sorted(listed, key=lambda g: g.group_id)
