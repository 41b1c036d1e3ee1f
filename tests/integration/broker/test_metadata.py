"""Metadata names topics by id in v12, answers INVALID_REQUEST, not a closed connection, to a
null name or a topic id in v10-11 (the fuzz found the broker failing to encode that answer), and
INVALID_TOPIC_EXCEPTION to a name no topic can have (issue 21 item 12).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kio.schema.metadata.v10.request import MetadataRequestTopic as TopicV10
from kio.schema.metadata.v11.request import MetadataRequestTopic as TopicV11
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas

pytestmark = pytest.mark.integration


def metadata(broker, version: int, topics) -> object:
    request_type = schemas.request_schema(3, version)
    flags = {  # each in some versions only
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    request = request_type(
        topics=topics,
        **{k: v for k, v in flags.items() if k in request_type.__dataclass_fields__},
    )

    async def ask():
        async with await BrokerConnection.open("127.0.0.1", broker.port) as connection:
            return await connection.send(request, timeout_s=10)

    return asyncio.run(ask())


@pytest.mark.parametrize("topic_type", [TopicV10, TopicV11], ids=["v10", "v11"])
def test_null_names_and_topic_ids_before_v12_are_an_invalid_request(broker, topic_type):
    version = 10 if topic_type is TopicV10 else 11
    some_id = uuid.uuid4()
    for topics in (
        (topic_type(name=None, topic_id=None), topic_type(name=broker.topic, topic_id=None)),
        (topic_type(name=broker.topic, topic_id=some_id),),
    ):
        response = metadata(broker, version, topics)
        assert [t.error_code for t in response.topics] == [ErrorCode.invalid_request] * len(topics)
        assert [t.name for t in response.topics] == [t.name or "" for t in topics]
        assert response.brokers == ()


def test_v12_finds_topics_by_id(broker):
    known = broker.call_sync(lambda: broker.metadata.topic(broker.topic).topic_id)
    unknown = uuid.uuid4()
    response = metadata(
        broker, 12, (TopicV12(name=None, topic_id=known), TopicV12(name=None, topic_id=unknown))
    )
    found, missing = response.topics
    assert (found.error_code, found.name, found.topic_id) == (ErrorCode.none, broker.topic, known)
    assert sorted(p.partition_index for p in found.partitions) == list(range(broker.partitions))
    assert (missing.error_code, missing.name, missing.topic_id) == (
        ErrorCode.unknown_topic_id,
        None,
        unknown,
    )


@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_a_name_no_topic_can_have_is_an_invalid_topic_not_an_unknown_one(broker, version):
    element = _topic_element(version)
    fields = element.__dataclass_fields__
    extra = {"topic_id": None} if "topic_id" in fields else {}
    response = metadata(
        broker,
        version,
        (element(name="bad topic!", **extra), element(name="no-such-topic", **extra)),
    )
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad topic!", ErrorCode.invalid_topic_exception),
        ("no-such-topic", ErrorCode.unknown_topic_or_partition),
    ]


def test_a_producer_to_an_invalid_name_fails_at_once(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": f"127.0.0.1:{broker.port}", "message.timeout.ms": 60_000}
    )
    errors = []
    producer.produce("bad topic!", b"v", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0, "still retrying after 20 s (UNKNOWN_TOPIC_OR_PARTITION?)"
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_EXCEPTION]


def _topic_element(version: int) -> type:
    request_type = schemas.request_schema(3, version)
    array = request_type.__dataclass_fields__["topics"].type
    return next(t for t in array.__args__ if t is not type(None)).__args__[0]
