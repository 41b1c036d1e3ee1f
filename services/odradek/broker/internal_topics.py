"""The coordinators' internal topics, created on first use: one creation at a time per topic.

``__consumer_offsets`` (groups) and ``__transaction_state`` (transactions) do not exist until a
client first looks for a coordinator (FindCoordinator, ``coordinator_lookup``); then this broker
creates the topic (``group_coordinator.ensure_offsets_topic``,
``transaction_coordinator.ensure_transaction_state_topic``, with Kafka's settings) and answers
COORDINATOR_NOT_AVAILABLE until the topic and a leader are known here; clients retry.

Invariant: at most one creation of each topic is under way on this broker (a lock per topic);
a request that arrives meanwhile waits for it, then finds the topic in the metadata cache (or
tries once more if that creation failed). Only the two internal topics are known here, so the
locks are two. One ``InternalTopics`` per broker (``BrokerContext.internal_topics``), used on the
broker's event loop by any number of requests at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from odradek.broker.metadata_cache import MetadataCache
from odradek.common.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


class InternalTopics:
    def __init__(self) -> None:
        self._creation = {name: asyncio.Lock() for name in INTERNAL_TOPICS}

    async def ensure(
        self, name: str, metadata: MetadataCache, create: Callable[[], Awaitable[bool]]
    ) -> None:
        """Run ``create`` unless ``name`` is in ``metadata``, one attempt at a time; a
        ``KeyError`` for a topic that is not internal."""
        async with self._creation[name]:
            if metadata.topic(name) is None:
                await create()
