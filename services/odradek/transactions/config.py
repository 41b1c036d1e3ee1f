"""The transaction coordinator's settings (Kafka's ``TransactionStateManagerConfig`` and
``TransactionLogConfig`` keys), with Kafka's defaults. One frozen value; ``of`` reads it from the
broker's config (``config/broker.py``), tests build one with ``dataclasses.replace``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from odradek.config.broker import BrokerConfig

__all__ = ["TransactionCoordinatorConfig"]


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    # transaction.max.timeout.ms: InitProducerId asking for more is INVALID_TRANSACTION_TIMEOUT
    transaction_max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an idle id (Empty, Complete*) is then forgotten
    transactional_id_expiration_ms: int = 604_800_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 104_857_600
    # offsets.topic.num.partitions: where AddOffsetsToTxn finds a group's partition
    offsets_topic_num_partitions: int = 50
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # The cluster's finalized feature ``transaction.version`` (KIP-890): 0 on a ZooKeeper cluster,
    # which has no finalized features; from 1, values are written in version 1 (flexible).
    transaction_version_level: int = 0
    # How long a write of __transaction_state waits for the ISR: the group coordinator's
    # offsets.commit.timeout.ms (Kafka has no key of its own for it in ZooKeeper mode).
    write_timeout_ms: int = 5000

    @classmethod
    def of(cls, config: BrokerConfig) -> TransactionCoordinatorConfig:
        """The settings of a broker's config (a ZooKeeper cluster: transaction version 0)."""
        values = {f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)}
        return cls(**values, write_timeout_ms=config.offsets_commit_timeout_ms)
