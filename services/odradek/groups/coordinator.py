"""The group coordinator as request handlers use it: which shard owns a group, and running
operations on it (``runtime``). One per broker (``BrokerContext.groups``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.partitioner import partition_for
from odradek.groups.runtime import CoordinatorRuntime, Result
from odradek.groups.shard import GroupCoordinatorShard

__all__ = ["GroupCoordinator"]

T = TypeVar("T")


class GroupCoordinator:
    def __init__(self, runtime: CoordinatorRuntime, config: GroupCoordinatorConfig):
        self.runtime = runtime
        self.config = config
        # FindCoordinator creates __consumer_offsets once at a time (broker.group_coordinator).
        self.offsets_topic_creation = asyncio.Lock()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    async def write(
        self,
        group_id: str,
        operation: Callable[[GroupCoordinatorShard], Result[T]],
        *,
        timeout_ms: int | None = None,
    ) -> T:
        """Run ``operation`` on the shard owning ``group_id``; raises NOT_COORDINATOR & co."""
        return await self.runtime.write(
            self.partition_for(group_id), operation, timeout_ms=timeout_ms
        )

    async def read(self, group_id: str, operation: Callable[[GroupCoordinatorShard], T]) -> T:
        return await self.runtime.read(self.partition_for(group_id), operation)

    def active_partitions(self) -> list[int]:
        return self.runtime.active_partitions()

    async def read_partition(
        self, partition: int, operation: Callable[[GroupCoordinatorShard], T]
    ) -> T:
        """ListGroups & co.: ``operation`` on one loaded shard."""
        return await self.runtime.read(partition, operation)
