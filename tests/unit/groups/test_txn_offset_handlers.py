"""The TxnOffsetCommit handler serves v0-3 (v4 only adds TRANSACTION_ABORTABLE: not advertised):
each version's offsets go pending as the producer's batch, whole-request errors are every
partition's; OffsetFetch v7+ with require_stable answers UNSTABLE_OFFSET_COMMIT for them, and
the committed offsets once ``complete_transaction`` replays the commit marker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.broker.handlers import offset_fetch, txn_offset_commit
from odradek.errors import ErrorCode
from odradek.groups.coordinator import GroupCoordinator
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.writer import encode
from support.coordinator_memory import MemoryLog, in_loop
from support.offset_handler_doubles import TOPIC, context, coordinator, nested


def fetch_request(version: int, group: str, *, stable: bool) -> Any:
    request_type = schemas.request_schema(ApiKey.OFFSET_FETCH, version)
    if version < 8:
        topic_type = nested(request_type, "topics")
        asked = (topic_type(name=TOPIC, partition_indexes=(0, 1)),)
        return request_type(group_id=group, topics=asked, require_stable=stable)
    group_type = nested(request_type, "groups")
    topic_type = nested(group_type, "topics")
    asked = (topic_type(name=TOPIC, partition_indexes=(0, 1)),)
    return request_type(groups=(group_type(group_id=group, topics=asked),), require_stable=stable)


def txn_request(version: int, group: str, offsets: dict[int, int], **fields: Any) -> Any:
    request_type = schemas.request_schema(ApiKey.TXN_OFFSET_COMMIT, version)
    topic_type = nested(request_type, "topics")
    partition_type = nested(topic_type, "partitions")
    values = {
        "transactional_id": "tx",
        "group_id": group,
        "producer_id": 7,
        "producer_epoch": 2,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
    }
    values.update(fields)
    values = {k: v for k, v in values.items() if k in request_type.__dataclass_fields__}
    entries = tuple(
        partition_type(
            **{
                k: v
                for k, v in {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": 1,
                    "committed_metadata": "m",
                }.items()
                if k in partition_type.__dataclass_fields__
            }
        )
        for partition, offset in offsets.items()
    )
    return request_type(**values, topics=(topic_type(name=TOPIC, partitions=entries),))


def errors_of(response: Any) -> dict[int, ErrorCode]:
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


async def fetched(groups: GroupCoordinator, group: str, version: int, stable: bool):
    request = fetch_request(version, group, stable=stable)
    response = await offset_fetch.handle(context(groups, version), request)
    encode(response)
    topics = response.topics if version < 8 else response.groups[0].topics
    return {
        p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions
    }


def test_advertised_versions_are_v0_to_v3():
    assert SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT] == (0, 3)


@pytest.mark.parametrize("version", range(0, 4))
def test_each_version_commits_pending_offsets(version):
    asyncio.run(asyncio.wait_for(commit_pending(version), 10))


async def commit_pending(version: int) -> None:
    log = MemoryLog()
    groups = await coordinator(log)
    response = await txn_offset_commit.handle(
        context(groups, version), txn_request(version, "g", {0: 11, 1: 12})
    )
    encode(response)
    assert errors_of(response) == {0: ErrorCode.none, 1: ErrorCode.none}
    assert [r.producer_id for r in log.records[0]] == [7, 7]
    for fetch_version in (7, 8):
        assert await fetched(groups, "g", fetch_version, stable=True) == {
            0: (-1, ErrorCode.unstable_offset_commit),
            1: (-1, ErrorCode.unstable_offset_commit),
        }
        assert await fetched(groups, "g", fetch_version, stable=False) == {
            0: (-1, ErrorCode.none),
            1: (-1, ErrorCode.none),
        }
    log.append_marker(0, 7, True)
    await groups.complete_transaction(0, 7, True)
    assert await fetched(groups, "g", 8, stable=True) == {
        0: (11, ErrorCode.none),
        1: (12, ErrorCode.none),
    }
    await groups.runtime.close()


@in_loop
async def test_whole_request_errors_are_every_partitions():
    log = MemoryLog()
    groups = await coordinator(log)
    for request, code, ctx in [
        (txn_request(3, "", {0: 1, 1: 1}), ErrorCode.invalid_group_id, context(groups, 3)),
        (txn_request(3, "g", {0: 1}, generation_id=4), ErrorCode.illegal_generation, None),
        (txn_request(3, "g", {0: 1}, producer_id=-1), ErrorCode.invalid_producer_id_mapping, None),
        (txn_request(3, "g", {0: 1}), ErrorCode.coordinator_not_available, context(None, 3)),
    ]:
        response = await txn_offset_commit.handle(ctx or context(groups, 3), request)
        assert set(errors_of(response).values()) == {code}
    response = await txn_offset_commit.handle(context(groups, 3), txn_request(3, "g", {5: 1}))
    assert errors_of(response) == {5: ErrorCode.unknown_topic_or_partition}
    assert log.records.get(0, []) == []
    refused = txn_offset_commit.error_response(
        txn_request(2, "g", {0: 1}), ErrorCode.not_coordinator
    )
    assert errors_of(refused) == {0: ErrorCode.not_coordinator}
    await groups.runtime.close()
