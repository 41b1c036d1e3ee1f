"""Topics a client creates are there when it asks: CreateTopics answers once the receiving
broker's Metadata has a leader for every new partition (issue 21 item 11, as Kafka's
DelayedCreatePartitions; KafkaJS's ``admin.createTopics()`` asks that broker right after)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from odradek.broker.handlers.build import build, element_type
from odradek.client.connection import BrokerConnection
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey

from .conftest import _broker_metadata

pytestmark = pytest.mark.integration

PARTITIONS = 12
CREATE_TIMEOUT_MS = 20_000


async def _create(address: str, topic: str, timeout_ms: int = CREATE_TIMEOUT_MS) -> object:
    request_type = schemas.request_schema(ApiKey.CREATE_TOPICS, 7)
    topic_type = element_type(request_type, "topics")
    request = build(
        request_type,
        topics=(
            build(
                topic_type,
                name=topic,
                num_partitions=PARTITIONS,
                replication_factor=3,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=timedelta(milliseconds=timeout_ms),
        validate_only=False,
    )
    host, port = address.rsplit(":", 1)
    async with await BrokerConnection.open(host, int(port)) as connection:
        [answer] = (await connection.send(request, timeout_s=CREATE_TIMEOUT_MS / 1000 + 10)).topics
    return answer


def test_metadata_on_the_receiving_broker_has_leaders_once_create_topics_answers(
    cluster_state, topic_name
):
    brokers = [m for m in cluster_state.members if m.role == "broker"]
    for attempt in range(2):
        for broker in brokers:
            topic = topic_name(f"b{broker.id}-{attempt}")

            async def create_then_ask(address=broker.address, topic=topic):
                answer = await _create(address, topic)
                return answer, await _broker_metadata(address, topic)

            answer, view = asyncio.run(create_then_ask())
            assert (answer.name, answer.error_code.value) == (topic, 0), answer
            assert view is not None, f"broker {broker.id} answered CreateTopics for {topic} "
            "but its Metadata does not know the topic"
            assert sorted(view) == list(range(PARTITIONS)), view
            assert all(leader >= 0 for leader in view.values()), view
