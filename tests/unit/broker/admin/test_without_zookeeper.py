"""A broker without ZooKeeper answers every admin item with an error code; nothing raises."""

from __future__ import annotations

import asyncio
import uuid

from odradek.broker.admin.configs import ConfigAdmin, ConfigResource, IncrementalAlteration
from odradek.broker.admin.producer_ids import init_producer_id
from odradek.broker.admin.topics import NewPartitions, TopicAdmin, TopicRef
from odradek.broker.admin.validation import NewTopic
from odradek.errors import ErrorCode


def test_topic_admin_answers_each_entry():
    admin = TopicAdmin(None, None)

    async def run():
        created = await admin.create_topics([NewTopic("a"), NewTopic("b")], validate_only=False)
        deleted = await admin.delete_topics([TopicRef("a"), TopicRef(None, uuid.uuid4())])
        grown = await admin.create_partitions([NewPartitions("a", 3)], validate_only=True)
        return created, deleted, grown

    created, deleted, grown = asyncio.run(run())
    assert [(r.name, r.error) for r in created] == [
        ("a", ErrorCode.unknown_server_error),
        ("b", ErrorCode.unknown_server_error),
    ]
    assert all("not connected to ZooKeeper" in r.message for r in created)
    assert [r.error for r in deleted] == [ErrorCode.unknown_server_error] * 2
    assert [r.error for r in grown] == [ErrorCode.unknown_server_error]


def test_config_admin_answers_each_resource():
    admin = ConfigAdmin(None, 1, None)

    async def run():
        described = await admin.describe(
            [ConfigResource(2, "t"), ConfigResource(4, "1"), ConfigResource(4, "2")]
        )
        altered = await admin.alter(
            [ConfigResource(2, "t", configs=(("retention.ms", "1"),))], validate_only=False
        )
        incremental = await admin.incremental_alter(
            [
                ConfigResource(2, "t", ops=(IncrementalAlteration("retention.ms", 0, "1"),)),
                ConfigResource(2, "t", ops=(IncrementalAlteration("retention.ms", 0, None),)),
            ],
            validate_only=True,
        )
        return described, altered, incremental

    described, altered, incremental = asyncio.run(run())
    assert [r.error for r in described] == [
        ErrorCode.unknown_server_error,
        ErrorCode.none,  # this broker, without a configuration: nothing to list
        ErrorCode.invalid_request,
    ]
    assert [r.error for r in altered] == [ErrorCode.unknown_server_error]
    assert [r.error for r in incremental] == [
        ErrorCode.unknown_server_error,
        ErrorCode.invalid_request,  # a null SET is refused before ZooKeeper is needed
    ]


def test_no_producer_ids_without_zookeeper():
    result = asyncio.run(init_producer_id(None, None))
    assert (result.error, result.producer_id, result.producer_epoch) == (
        ErrorCode.coordinator_not_available,
        -1,
        -1,
    )
