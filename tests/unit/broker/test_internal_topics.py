"""The coordinators' internal topics are created once at a time each: requests that arrive
during a creation wait for it and do not create the topic again; a topic that exists is not
created; only the two internal topics are known."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.internal_topics import InternalTopics
from odradek.broker.metadata_cache import MetadataCache
from odradek.common.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC


class _Appears:
    """A creation that takes a while, then the topic is in the metadata cache."""

    def __init__(self, metadata: MetadataCache, exists: set[str]):
        self.metadata = metadata
        self.exists = exists
        self.calls = 0

    async def create(self, name: str) -> bool:
        self.calls += 1
        await asyncio.sleep(0.01)
        self.exists.add(name)
        return True


def _cache(exists: set[str]) -> MetadataCache:
    metadata = MetadataCache()
    metadata.topic = lambda name: object() if name in exists else None  # type: ignore[method-assign]
    return metadata


def test_concurrent_look_ups_create_each_internal_topic_once():
    async def scenario():
        exists: set[str] = set()
        metadata = _cache(exists)
        topics = InternalTopics()
        creation = _Appears(metadata, exists)
        await asyncio.gather(
            *(
                topics.ensure(name, metadata, lambda n=name: creation.create(n))
                for name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC) * 5
            )
        )
        assert creation.calls == 2 and exists == {OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC}
        await topics.ensure(OFFSETS_TOPIC, metadata, lambda: creation.create(OFFSETS_TOPIC))
        assert creation.calls == 2

    asyncio.run(scenario())


def test_only_the_internal_topics_are_created_here():
    async def scenario():
        with pytest.raises(KeyError):
            await InternalTopics().ensure("orders", _cache(set()), lambda: asyncio.sleep(0))

    asyncio.run(scenario())
