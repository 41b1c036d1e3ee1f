"""FindCoordinator (10): which broker coordinates a group or a transactional id (v0-3 one
key, v4+ a batch of keys).

A group's coordinator is the leader of its partition of ``__consumer_offsets``
(``coordinator.partitioner``), a transactional id's the leader of its partition of
``__transaction_state`` (key type 1), named by its endpoint on the listener the request came in
on. The first FindCoordinator of each kind creates its topic (``broker.group_coordinator``,
``broker.transaction_coordinator``) and answers COORDINATOR_NOT_AVAILABLE until the topic and a
leader are known here; clients retry. Kafka's answers also for a partition without a leader, or
a leader without this listener.

v4+ keys are answered in time slices, each distinct key found once (``time_slices.answer_each``):
a 1 MB request may name a million; Kafka caps nothing here.

Share groups (key type 2) are not implemented: INVALID_REQUEST with a message, not a silent
wrong answer.

Each key needs DESCRIBE on its group or transactional id (Kafka's ``getCoordinator``): otherwise
it answers GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED with no node, and no internal topic
is created for it.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.context import RequestContext
from odradek.broker.group_coordinator import ensure_offsets_topic
from odradek.broker.handlers.build import NO_THROTTLE, build, element_type
from odradek.broker.transaction_coordinator import ensure_transaction_state_topic
from odradek.common.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.time_slices import answer_each

API_KEY = ApiKey.FIND_COORDINATOR
GROUP_KEY = 0
TRANSACTION_KEY = 1


class _Answer:
    __slots__ = ("error", "message", "node_id", "host", "port")

    def __init__(self, error: ErrorCode, message: str | None = None, node: Any = None):
        self.error = error
        self.message = message
        self.node_id, self.host, self.port = node if node is not None else (-1, "", -1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    response_type = schemas.response_schema(API_KEY, ctx.api_version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    if ctx.api_version < 4:
        answer = await _find(ctx, key_type, request.key)
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=answer.error,
            error_message=answer.message,
            node_id=answer.node_id,
            host=answer.host,
            port=answer.port,
        )
    coordinator_type = element_type(response_type, "coordinators")

    async def one(key: str) -> Any:
        answer = await _find(ctx, key_type, key)
        return coordinator_type(
            key=key,
            node_id=answer.node_id,
            host=answer.host,
            port=answer.port,
            error_code=answer.error,
            error_message=answer.message,
        )

    coordinators = await answer_each(request.coordinator_keys, one)
    return build(response_type, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))


async def _find(ctx: RequestContext, key_type: int, key: str) -> _Answer:
    if key_type == GROUP_KEY and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _Answer(ErrorCode.group_authorization_failed)
    if key_type == TRANSACTION_KEY and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _Answer(ErrorCode.transactional_id_authorization_failed)
    if key_type == GROUP_KEY:
        return await _find_group_coordinator(ctx, key)
    if key_type == TRANSACTION_KEY:
        return await _find_transaction_coordinator(ctx, key)
    return _Answer(
        ErrorCode.invalid_request,
        f"coordinator key type {key_type} is not served: only groups (0) and transactions (1)",
    )


async def _find_group_coordinator(ctx: RequestContext, key: str) -> _Answer:
    broker = ctx.broker
    groups = broker.groups
    if groups is None:
        return _Answer(ErrorCode.coordinator_not_available, "no group coordinator here")
    topic = broker.metadata.topic(OFFSETS_TOPIC)
    if topic is None:
        async with groups.offsets_topic_creation:  # one attempt at a time
            if broker.metadata.topic(OFFSETS_TOPIC) is None:
                await ensure_offsets_topic(TopicAdmin(broker.zk, broker.config), groups.config)
        return _Answer(ErrorCode.coordinator_not_available, f"{OFFSETS_TOPIC} is being created")
    return _leader_of(ctx, topic.partitions.get(groups.partition_for(key)), "group")


async def _find_transaction_coordinator(ctx: RequestContext, key: str) -> _Answer:
    broker = ctx.broker
    transactions = broker.transactions
    if transactions is None:
        return _Answer(ErrorCode.coordinator_not_available, "no transaction coordinator here")
    if not key:
        return _Answer(ErrorCode.invalid_request, "an empty transactional id")
    topic = broker.metadata.topic(TRANSACTION_STATE_TOPIC)
    if topic is None:
        async with transactions.state_topic_creation:  # one attempt at a time
            if broker.metadata.topic(TRANSACTION_STATE_TOPIC) is None:
                await ensure_transaction_state_topic(
                    TopicAdmin(broker.zk, broker.config), transactions.config
                )
        return _Answer(
            ErrorCode.coordinator_not_available, f"{TRANSACTION_STATE_TOPIC} is being created"
        )
    partition = topic.partitions.get(transactions.partition_for(key))
    return _leader_of(ctx, partition, "transactional id")


def _leader_of(ctx: RequestContext, partition: Any, what: str) -> _Answer:
    leader = None if partition is None else ctx.broker.metadata.brokers.get(partition.leader)
    endpoint = None if leader is None else leader.endpoint(ctx.listener.name)
    if endpoint is None:
        return _Answer(ErrorCode.coordinator_not_available, f"the {what}'s partition has no leader")
    return _Answer(ErrorCode.none, None, (leader.broker_id, endpoint.host, endpoint.port))
