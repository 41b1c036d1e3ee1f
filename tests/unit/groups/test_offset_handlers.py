"""The offset handlers serve every advertised version: OffsetCommit v2-9, OffsetFetch v1-9 and
OffsetDelete v0 answer with the fields of their version (and encode), on a coordinator over the
in-memory log; group-level errors land where each version puts them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from odradek.broker.handlers import offset_commit, offset_delete, offset_fetch
from odradek.errors import ErrorCode
from odradek.groups.records import decode
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.writer import encode
from support.coordinator_memory import MemoryLog, in_loop
from support.offset_handler_doubles import TOPIC, context, coordinator, nested


def commit_request(version: int, group: str, partition: int, offset: int, **fields: Any) -> Any:
    request_type = schemas.request_schema(ApiKey.OFFSET_COMMIT, version)
    topic_type = nested(request_type, "topics")
    partition_type = nested(topic_type, "partitions")
    values = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": ""}
    values.update(fields)
    values = {k: v for k, v in values.items() if k in request_type.__dataclass_fields__}
    entry = partition_type(
        **{
            k: v
            for k, v in {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": 3,
                "committed_metadata": f"v{version}",
            }.items()
            if k in partition_type.__dataclass_fields__
        }
    )
    return request_type(**values, topics=(topic_type(name=TOPIC, partitions=(entry,)),))


def fetch_request(version: int, groups: list[str], topics: bool = True) -> Any:
    request_type = schemas.request_schema(ApiKey.OFFSET_FETCH, version)
    if version < 8:
        topic_type = nested(request_type, "topics")
        asked = (topic_type(name=TOPIC, partition_indexes=(0, 1)),) if topics else None
        return request_type(group_id=groups[0], topics=asked)
    group_type = nested(request_type, "groups")
    topic_type = nested(group_type, "topics")
    asked = (topic_type(name=TOPIC, partition_indexes=(0, 1)),) if topics else None
    return request_type(groups=tuple(group_type(group_id=g, topics=asked) for g in groups))


def commit_versions() -> range:
    low, high = SUPPORTED_VERSIONS[ApiKey.OFFSET_COMMIT]
    return range(low, high + 1)


def fetch_versions() -> range:
    low, high = SUPPORTED_VERSIONS[ApiKey.OFFSET_FETCH]
    return range(low, high + 1)


@pytest.mark.parametrize("version", commit_versions())
def test_every_offset_commit_version_commits_and_every_fetch_version_reads(version):
    asyncio.run(asyncio.wait_for(commit_and_fetch(version), 10))


async def commit_and_fetch(version: int) -> None:
    groups = await coordinator(MemoryLog())
    group = f"g{version}"
    extra = {"retention_time": timedelta(milliseconds=-1)} if version <= 4 else {}
    response = await offset_commit.handle(
        context(groups, version), commit_request(version, group, 1, 40 + version, **extra)
    )
    encode(response)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    for fetch_version in fetch_versions():
        answer = await offset_fetch.handle(
            context(groups, fetch_version), fetch_request(fetch_version, [group])
        )
        encode(answer)
        topics = answer.topics if fetch_version < 8 else answer.groups[0].topics
        partitions = {p.partition_index: p for p in topics[0].partitions}
        assert partitions[0].committed_offset == -1
        assert partitions[1].committed_offset == 40 + version
        assert partitions[1].metadata == f"v{version}"
        if fetch_version >= 5:
            expected_epoch = 3 if version >= 6 else -1  # the leader epoch came with v6
            assert partitions[1].committed_leader_epoch == expected_epoch


@in_loop
async def test_a_generation_without_a_group_is_illegal_generation_before_v9():
    groups = await coordinator(MemoryLog())
    for version, code in [(8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)]:
        request = commit_request(
            version, "ghost", 0, 1, generation_id_or_member_epoch=2, member_id="m"
        )
        response = await offset_commit.handle(context(groups, version), request)
        assert response.topics[0].partitions[0].error_code == code


@in_loop
async def test_group_errors_land_where_each_version_puts_them():
    for version in fetch_versions():
        answer = await offset_fetch.handle(context(None, version), fetch_request(version, ["g"]))
        encode(answer)
        if version == 1:  # every partition's error
            assert {p.error_code for p in answer.topics[0].partitions} == {
                ErrorCode.coordinator_not_available
            }
        elif version < 8:  # the top-level error, no topics
            assert (answer.error_code, answer.topics) == (ErrorCode.coordinator_not_available, ())
        else:
            assert answer.groups[0].error_code == ErrorCode.coordinator_not_available
    refused = await offset_commit.handle(context(None, 9), commit_request(9, "g", 0, 1))
    assert refused.topics[0].partitions[0].error_code == ErrorCode.coordinator_not_available


@in_loop
async def test_fetch_of_every_topic_and_of_several_groups():
    groups = await coordinator(MemoryLog())
    for group, offset in [("a", 5), ("b", 6)]:
        await offset_commit.handle(context(groups, 8), commit_request(8, group, 0, offset))
    every = await offset_fetch.handle(context(groups, 7), fetch_request(7, ["a"], topics=False))
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in every.topics] == [
        (TOPIC, [5])
    ]
    several = await offset_fetch.handle(
        context(groups, 8), fetch_request(8, ["a", "b", ""], topics=False)
    )
    assert [(g.group_id, g.error_code) for g in several.groups] == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.none),
        ("", ErrorCode.invalid_group_id),
    ]
    assert several.groups[1].topics[0].partitions[0].committed_offset == 6


@in_loop
async def test_offset_delete():
    groups = await coordinator(MemoryLog())
    await offset_commit.handle(context(groups, 8), commit_request(8, "g", 0, 5))
    request_type = schemas.request_schema(ApiKey.OFFSET_DELETE, 0)
    topic_type = nested(request_type, "topics")
    partition_type = nested(topic_type, "partitions")

    def delete(group: str, topic: str) -> Any:
        return request_type(
            group_id=group,
            topics=(topic_type(name=topic, partitions=(partition_type(partition_index=0),)),),
        )

    unknown = await offset_delete.handle(context(groups, 0), delete("nobody", TOPIC))
    encode(unknown)
    assert (unknown.error_code, unknown.topics) == (ErrorCode.group_id_not_found, ())
    missing = await offset_delete.handle(context(groups, 0), delete("g", "missing"))
    assert missing.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    deleted = await offset_delete.handle(context(groups, 0), delete("g", TOPIC))
    encode(deleted)
    assert deleted.error_code == ErrorCode.none
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    fetched = await offset_fetch.handle(context(groups, 8), fetch_request(8, ["g"]))
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == -1


@in_loop
async def test_a_retention_time_of_offset_commit_v2_sets_the_offsets_expiry():
    log = MemoryLog()
    groups = await coordinator(log)
    request = commit_request(2, "g", 0, 7, retention_time=timedelta(minutes=5))
    response = await offset_commit.handle(context(groups, 2), request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    stored = await groups.read("g", lambda shard: shard.offsets.committed("g")[(TOPIC, 0)])
    assert stored.expire_timestamp_ms == 1000 + 5 * 60_000  # the coordinator's clock: 1000
    assert decode(log.records[0][0].key, log.records[0][0].value).value.__version__ == 1
