"""The group coordinator's settings, taken from the broker's keys (``config/broker.py``).

One frozen value handed to the runtime and to every shard, so the state machines read plain
attributes and tests build one with ``GroupCoordinatorConfig()`` and ``dataclasses.replace``.
The defaults are Kafka's, but for the group bounds (issue 23, ``groups.limits``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.config.broker import BrokerConfig

__all__ = ["GroupCoordinatorConfig"]


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_commit_timeout_ms: int = 5000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 1000
    group_member_metadata_max_bytes: int = 1048576
    group_metadata_max_bytes: int = 4194304
    group_coordinator_metadata_max_bytes: int = 67108864
    group_max_pending_members_per_connection: int = 16
    group_coordinator_rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_max_size: int = 1000

    @classmethod
    def of(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        # Odradek's own keys (the group bounds) are named odradek.group.*.
        return cls(
            **{
                name: getattr(config, name)
                if hasattr(config, name)
                else getattr(config, f"odradek_{name}")
                for name in cls.__dataclass_fields__
            }
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.group_coordinator_rebalance_protocols
