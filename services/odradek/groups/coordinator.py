"""The group coordinator as request handlers use it: which shard owns a group, and running
operations on it (``runtime``). One per broker (``BrokerContext.groups``).

``complete_transaction`` is how a transaction marker that WriteTxnMarkers appended to a
``__consumer_offsets`` partition reaches that partition's shard: the replay of the marker
(pending transactional offsets committed or dropped), the same a loading shard does when it
reads the marker from the log.

``group_runtime`` builds the shared runtime (``odradek.coordinator.runtime``) for the group
coordinator: its shards (``shard.GroupCoordinatorShard``) and ``__consumer_offsets``'s record
format. Runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from odradek.coordinator.partitioner import partition_for
from odradek.coordinator.result import Result
from odradek.coordinator.runtime import CoordinatorLog, CoordinatorRuntime
from odradek.groups.config import GroupCoordinatorConfig
from odradek.groups.records import base as records
from odradek.groups.shard import GroupCoordinatorShard, ShardContext

__all__ = ["GroupCoordinator", "group_runtime"]

T = TypeVar("T")


def group_runtime(
    coordinator_log: CoordinatorLog,
    new_context: Callable[[int, Any], ShardContext],
    *,
    new_shard: Callable[[ShardContext], GroupCoordinatorShard] = GroupCoordinatorShard,
    **options: Any,
) -> CoordinatorRuntime:
    """The runtime of ``__consumer_offsets``: ``new_shard`` (the group coordinator's shards by
    default) over its record format; ``options`` as ``CoordinatorRuntime`` takes them."""
    return CoordinatorRuntime(
        coordinator_log,
        new_context,
        new_shard=new_shard,
        record_format=records.FORMAT,
        **options,
    )


class GroupCoordinator:
    def __init__(self, runtime: CoordinatorRuntime, config: GroupCoordinatorConfig):
        self.runtime = runtime
        self.config = config

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

    async def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """The marker of ``producer_id``'s transaction was appended to ``partition`` (and
        replicated): replay it on the partition's shard. Nothing to do where the shard is not
        here (its next leader reads the marker when loading); raises
        COORDINATOR_LOAD_IN_PROGRESS if the shard is still loading after the write timeout."""
        await self.runtime.complete_transaction(partition, producer_id, committed)

    def active_partitions(self) -> list[int]:
        return self.runtime.active_partitions()

    async def read_partition(
        self, partition: int, operation: Callable[[GroupCoordinatorShard], T]
    ) -> T:
        """ListGroups & co.: ``operation`` on one loaded shard."""
        return await self.runtime.read(partition, operation)
