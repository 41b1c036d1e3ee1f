"""Which broker coordinates a group or a transactional id, as FindCoordinator answers it.

A group's coordinator is the leader of its partition of ``__consumer_offsets``
(``groups.partitioner``), a transactional id's the leader of its partition of
``__transaction_state``, named by its endpoint on the listener the request came in on. Until
the topic exists here, the first look-up of each kind creates it (``internal_topics``) and the
answer is COORDINATOR_NOT_AVAILABLE; so it is for a partition without a leader, or a leader
without this listener, as Kafka answers. An empty transactional id is INVALID_REQUEST; share
groups (key type 2) are not implemented: INVALID_REQUEST with a message, not a silent wrong
answer. Authorization is the handler's (``handlers.find_coordinator``), before any look-up.

Runs on the broker's event loop; look-ups may run concurrently (creation is serialized by
``InternalTopics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.context import BrokerContext
from odradek.broker.group_coordinator import ensure_offsets_topic
from odradek.broker.transaction_coordinator import ensure_transaction_state_topic
from odradek.common.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from odradek.errors import ErrorCode

GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class Coordinator:
    """A look-up's answer: the coordinator's node and address, or an error and its message."""

    error: ErrorCode
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


async def find_coordinator(
    broker: BrokerContext, key_type: int, key: str, listener_name: str
) -> Coordinator:
    """The coordinator of ``key`` (a group id, or a transactional id for ``TRANSACTION_KEY``)."""
    if key_type == GROUP_KEY:
        return await _find_group_coordinator(broker, key, listener_name)
    if key_type == TRANSACTION_KEY:
        return await _find_transaction_coordinator(broker, key, listener_name)
    return Coordinator(
        ErrorCode.invalid_request,
        f"coordinator key type {key_type} is not served: only groups (0) and transactions (1)",
    )


async def _find_group_coordinator(
    broker: BrokerContext, key: str, listener_name: str
) -> Coordinator:
    groups = broker.groups
    if groups is None:
        return Coordinator(ErrorCode.coordinator_not_available, "no group coordinator here")
    topic = broker.metadata.topic(OFFSETS_TOPIC)
    if topic is None:
        await broker.internal_topics.ensure(
            OFFSETS_TOPIC,
            broker.metadata,
            lambda: ensure_offsets_topic(TopicAdmin(broker.zk, broker.config), groups.config),
        )
        return Coordinator(ErrorCode.coordinator_not_available, f"{OFFSETS_TOPIC} is being created")
    partition = topic.partitions.get(groups.partition_for(key))
    return _leader_of(broker, partition, listener_name, "group")


async def _find_transaction_coordinator(
    broker: BrokerContext, key: str, listener_name: str
) -> Coordinator:
    transactions = broker.transactions
    if transactions is None:
        return Coordinator(ErrorCode.coordinator_not_available, "no transaction coordinator here")
    if not key:
        return Coordinator(ErrorCode.invalid_request, "an empty transactional id")
    topic = broker.metadata.topic(TRANSACTION_STATE_TOPIC)
    if topic is None:
        await broker.internal_topics.ensure(
            TRANSACTION_STATE_TOPIC,
            broker.metadata,
            lambda: ensure_transaction_state_topic(
                TopicAdmin(broker.zk, broker.config), transactions.config
            ),
        )
        return Coordinator(
            ErrorCode.coordinator_not_available, f"{TRANSACTION_STATE_TOPIC} is being created"
        )
    partition = topic.partitions.get(transactions.partition_for(key))
    return _leader_of(broker, partition, listener_name, "transactional id")


def _leader_of(broker: BrokerContext, partition: Any, listener_name: str, what: str) -> Coordinator:
    leader = None if partition is None else broker.metadata.brokers.get(partition.leader)
    endpoint = None if leader is None else leader.endpoint(listener_name)
    if endpoint is None:
        return Coordinator(
            ErrorCode.coordinator_not_available, f"the {what}'s partition has no leader"
        )
    return Coordinator(ErrorCode.none, None, leader.broker_id, endpoint.host, endpoint.port)
