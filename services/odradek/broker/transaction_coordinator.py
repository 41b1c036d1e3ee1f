"""The transaction coordinator wired into the broker: its log is this broker's replicas of
``__transaction_state``, its producer ids the broker's ZooKeeper blocks, its shards follow
leadership (as ``broker.group_coordinator`` for groups).

- ``start_transaction_coordinator`` builds the coordinator (``odradek.transactions.coordinator``)
  and registers it with the replica manager's leadership changes: leading a partition of
  ``__transaction_state`` loads its shard (coordinator epoch = leader epoch), following or
  stopping it unloads it and cancels its markers still waiting (Kafka's ``onElection`` /
  ``onResignation``). Its marker sender is the broker's (``broker.txn_markers``), set when the
  broker has one.
- ``ensure_transaction_state_topic`` creates ``__transaction_state`` on the first
  FindCoordinator for a transactional id (through ``internal_topics``, one creation at a time),
  with Kafka's settings:
  ``transaction.state.log.num.partitions``, ``transaction.state.log.replication.factor`` (never
  fewer: while fewer brokers live, the topic is not created and the producer waits),
  ``cleanup.policy=compact``, ``min.insync.replicas=transaction.state.log.min.isr``,
  ``segment.bytes=transaction.state.log.segment.bytes``, uncompressed, no unclean election.

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.admin.topics import TopicAdmin
from odradek.broker.admin.validation import NewTopic
from odradek.broker.group_coordinator import ReplicaCoordinatorLog, follow_leadership
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.workers import Workers
from odradek.common.topics import TRANSACTION_STATE_TOPIC
from odradek.config.broker import BrokerConfig
from odradek.errors import ErrorCode
from odradek.transactions.config import TransactionCoordinatorConfig
from odradek.transactions.coordinator import (
    MarkerSender,
    ProducerIdSource,
    TransactionCoordinator,
)

__all__ = ["start_transaction_coordinator", "ensure_transaction_state_topic"]

log = logging.getLogger(__name__)


def start_transaction_coordinator(
    config: BrokerConfig,
    replicas: ReplicaManager,
    producer_ids: ProducerIdSource,
    workers: Workers | None = None,
    markers: Callable[[], MarkerSender | None] = lambda: None,
) -> TransactionCoordinator:
    coordinator = TransactionCoordinator(
        ReplicaCoordinatorLog(replicas, workers, TRANSACTION_STATE_TOPIC),
        TransactionCoordinatorConfig.of(config),
        producer_ids,
        markers=markers,
        clock_ms=replicas.clock_ms,
    )
    follow_leadership(replicas, TRANSACTION_STATE_TOPIC, coordinator)
    return coordinator


def state_topic(config: TransactionCoordinatorConfig) -> NewTopic:
    """``__transaction_state`` as Kafka creates it (``TransactionStateManager``'s configs)."""
    return NewTopic(
        name=TRANSACTION_STATE_TOPIC,
        num_partitions=config.transaction_state_log_num_partitions,
        replication_factor=config.transaction_state_log_replication_factor,
        configs=(
            ("cleanup.policy", "compact"),
            ("compression.type", "uncompressed"),
            ("min.insync.replicas", str(config.transaction_state_log_min_isr)),
            ("segment.bytes", str(config.transaction_state_log_segment_bytes)),
            ("unclean.leader.election.enable", "false"),
        ),
    )


async def ensure_transaction_state_topic(
    admin: TopicAdmin, config: TransactionCoordinatorConfig
) -> bool:
    """Create ``__transaction_state`` unless it exists; whether it exists now."""
    results = await admin.create_topics([state_topic(config)], validate_only=False)
    result = results[0]
    if result.error in (ErrorCode.none, ErrorCode.topic_already_exists):
        return True
    log.info(
        "cannot create %s yet: %s %s", TRANSACTION_STATE_TOPIC, result.error.name, result.message
    )
    return False
