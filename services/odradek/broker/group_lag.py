"""Consumer lag of the groups this broker coordinates, sampled for ``odradek_group_consumer_lag``.

Every ``LAG_SAMPLE_INTERVAL_S`` the sampler reads, for each ``__consumer_offsets`` shard led
here, every group's committed offsets (``shard.offsets.committed``, through the runtime's read,
so only replicated commits count) and, for each partition with a replica on this broker, its
high watermark: the lag is their difference (never below 0). A partition without a replica
here has no lag in the sample (its log end is not known locally; ``odradek groups describe``
asks the leaders). The sample replaces the last one as a whole (``ConsumerLagMetrics.update``).

Runs on the broker's event loop, as one task started and stopped by ``BrokerApp``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from odradek.broker.replica_manager import ReplicaManager
from odradek.errors import OdradekError
from odradek.groups.coordinator import GroupCoordinator
from odradek.observability.metrics import ConsumerLagMetrics

__all__ = ["LAG_SAMPLE_INTERVAL_S", "sample_consumer_lag", "run_consumer_lag"]

log = logging.getLogger(__name__)

LAG_SAMPLE_INTERVAL_S = 5.0


def _committed(shard: Any) -> list[tuple[str, dict[tuple[str, int], Any]]]:
    offsets = shard.offsets
    return [(group_id, offsets.committed(group_id)) for group_id in sorted(offsets.group_ids())]


async def sample_consumer_lag(
    groups: GroupCoordinator, replicas: ReplicaManager
) -> list[tuple[str, str, int, int]]:
    """``(group, topic, partition, lag)`` for every committed offset known here."""
    rows = []
    for partition in groups.active_partitions():
        try:
            committed = await groups.read_partition(partition, _committed)
        except OdradekError:
            continue  # moved or not replicated yet: the next sample will see it
        for group_id, offsets in committed:
            for (topic, index), offset in offsets.items():
                hosted = replicas.partitions.get((topic, index))
                if hosted is None:
                    continue
                high_watermark = hosted.log.high_watermark
                rows.append(
                    (group_id, topic, index, max(high_watermark - offset.committed_offset, 0))
                )
    return rows


async def run_consumer_lag(
    groups: GroupCoordinator,
    replicas: ReplicaManager,
    metrics: ConsumerLagMetrics,
    stop: asyncio.Event,
    interval_s: float = LAG_SAMPLE_INTERVAL_S,
) -> None:
    while not stop.is_set():
        try:
            metrics.update(await sample_consumer_lag(groups, replicas))
        except Exception:
            log.exception("sampling the consumer lag failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
