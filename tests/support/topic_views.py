"""A topic as each broker sees it, asked directly (Metadata v4, never auto-creating).

CreateTopics is answered once the controller has written the topic; the other brokers learn it
from the controller's UpdateMetadata a moment later, and until then answer requests naming it
UNKNOWN_TOPIC_OR_PARTITION (as Kafka's do). A test that talks to one chosen broker (a group's
coordinator) waits for ``led_on_every_broker`` first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from kio.schema.metadata.v4.request import MetadataRequestTopic

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.protocol import schemas

__all__ = ["broker_leaders", "led_on_every_broker"]


async def broker_leaders(address: str, topic: str) -> dict[int, int] | None:
    """Partition -> leader for ``topic`` as one broker sees it; None if it does not know it."""
    host, port = address.rsplit(":", 1)
    request = schemas.request_schema(3, 4)(
        topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False
    )
    try:
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=2) as conn:
            response = await conn.send(request, timeout_s=2)
    except (ClientError, OSError):
        return None
    [described] = response.topics
    if described.error_code.value != 0:
        return None
    return {p.partition_index: p.leader_id for p in described.partitions}


def led_on_every_broker(addresses: Iterable[str], topic: str, partitions: int) -> bool:
    """Whether each broker at ``addresses`` lists ``topic`` with ``partitions`` led partitions."""

    async def ask_all():
        return await asyncio.gather(*(broker_leaders(a, topic) for a in addresses))

    return all(
        view is not None
        and sorted(view) == list(range(partitions))
        and all(leader >= 0 for leader in view.values())
        for view in asyncio.run(ask_all())
    )
