"""Topics a client creates are there when it asks: CreateTopics answers once the receiving
broker's Metadata has a leader for every new partition (issue 21 item 11, as Kafka's
DelayedCreatePartitions; KafkaJS's ``admin.createTopics()`` asks that broker right after), and
Metadata auto-creates topics for clients that allow it, a bounded number per request (item 13)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from kio.schema.metadata.v12 import request as metadata_v12

from odradek.broker.admin.topics import AUTO_CREATE_TOPICS_PER_REQUEST_MAX
from odradek.broker.handlers.build import build, element_type
from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from support.topic_views import broker_leaders

from .conftest import brokers_view

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
                return answer, await broker_leaders(address, topic)

            answer, view = asyncio.run(create_then_ask())
            assert (answer.name, answer.error_code.value) == (topic, 0), answer
            assert view is not None, f"broker {broker.id} answered CreateTopics for {topic} "
            "but its Metadata does not know the topic"
            assert sorted(view) == list(range(PARTITIONS)), view
            assert all(leader >= 0 for leader in view.values()), view


def _metadata(address: str, topics: list[str], *, allow_auto_topic_creation: bool) -> object:
    request = metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=allow_auto_topic_creation,
        include_topic_authorized_operations=False,
    )
    host, port = address.rsplit(":", 1)

    async def ask():
        async with await BrokerConnection.open(host, int(port)) as connection:
            return await connection.send(request, timeout_s=20)

    return asyncio.run(ask())


def test_metadata_auto_creates_topics_for_a_client_that_allows_it(
    cluster_state, topic_name, wait_for_topic
):
    address = next(m for m in cluster_state.members if m.role == "broker").address
    refused = topic_name("not-allowed")
    [answer] = _metadata(address, [refused], allow_auto_topic_creation=False).topics
    assert answer.error_code == ErrorCode.unknown_topic_or_partition

    wanted = topic_name("allowed")
    [answer] = _metadata(address, [wanted], allow_auto_topic_creation=True).topics
    # LEADER_NOT_AVAILABLE while being created, as Kafka; listed if led by the time it answers
    assert answer.error_code in (ErrorCode.leader_not_available, ErrorCode.none), answer
    assert wait_for_topic(wanted, 1)  # num.partitions of the cluster: 1
    assert all(view is None for view in brokers_view(cluster_state, refused))

    many = [topic_name(f"many-{i}") for i in range(AUTO_CREATE_TOPICS_PER_REQUEST_MAX + 5)]
    answers = _metadata(address, many, allow_auto_topic_creation=True).topics
    codes = [t.error_code for t in answers]  # none once led: the controller may be that quick
    limit = AUTO_CREATE_TOPICS_PER_REQUEST_MAX
    assert set(codes[:limit]) <= {ErrorCode.leader_not_available, ErrorCode.none}, codes
    assert codes[limit:] == [ErrorCode.unknown_topic_or_partition] * 5, codes


def test_odradeks_admin_clients_looking_for_a_missing_topic_do_not_create_it(
    bootstrap, cluster_state, topic_name
):
    """The CLI's and the operator's librdkafka clients say allow.auto.create.topics=false (a
    default AdminClient is a producer-type handle, which allows it, against Kafka too)."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    from odradek.commands.common import client_config
    from odradek_operator.reconcile.admin import OpsAdmin

    missing = topic_name("looked-for")
    for admin in (AdminClient(client_config(bootstrap)), OpsAdmin(bootstrap)._client()):
        found = admin.list_topics(missing, timeout=10).topics.get(missing)
        assert found is None or found.error is not None, found
        with pytest.raises(KafkaException):
            admin.describe_topics(TopicCollection([missing]))[missing].result(10)
    assert all(view is None for view in brokers_view(cluster_state, missing))
