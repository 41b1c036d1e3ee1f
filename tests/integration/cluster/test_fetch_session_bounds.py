"""A broker process bounds its fetch sessions by its keys: slots, cached partitions, eviction."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.fetch.v12 import request as fetch_v12

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode

pytestmark = pytest.mark.integration

SLOTS = 2
PARTITIONS_MAX = 5
SCENARIO_TIMEOUT_S = 60
# No such topic: its partitions answer UNKNOWN_TOPIC_OR_PARTITION at once, and are cached
# in sessions all the same, as Kafka caches them.
GHOST = "no-such-topic"


@pytest.fixture(scope="module")
def broker(tmp_path_factory, local_cluster):
    overrides = {
        "max.incremental.fetch.session.cache.slots": str(SLOTS),
        "odradek.max.incremental.fetch.session.cache.partitions": str(PARTITIONS_MAX),
    }
    data_dir = tmp_path_factory.mktemp("fetch-session-bounds")
    with local_cluster(data_dir, brokers=1, broker_overrides=overrides) as state:
        yield next(m for m in state.members if m.role == "broker")


def fetch(partitions: range, *, session_id: int = 0, epoch: int = 0, replica_id: int = -1) -> Any:
    return fetch_v12.FetchRequest(
        replica_id=replica_id,
        max_wait=timedelta(milliseconds=100),
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic=GHOST,
                partitions=tuple(
                    fetch_v12.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1024)
                    for p in partitions
                ),
            ),
        )
        if partitions
        else (),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_slots_partitions_and_a_followers_privilege(broker):
    host, port = broker.address.rsplit(":", 1)

    async def scenario():
        async with await BrokerConnection.open(host, int(port)) as conn:
            first = await conn.send(fetch(range(2)))
            second = await conn.send(fetch(range(2, 4)))
            assert first.session_id > 0 and second.session_id > 0
            # Both slots hold young consumer sessions: another consumer gets none.
            third = await conn.send(fetch(range(1)))
            assert (third.error_code, third.session_id) == (ErrorCode.none, 0)
            assert len(third.responses[0].partitions) == 1  # still answered, sessionless
            # More partitions than the whole cache may hold: no session, nothing evicted.
            too_big = await conn.send(fetch(range(PARTITIONS_MAX + 1), replica_id=7))
            assert too_big.session_id == 0
            # A follower's session evicts the smaller-id consumer session at once.
            follower = await conn.send(fetch(range(1), replica_id=7))
            assert follower.session_id > 0
            evicted, kept = sorted([first.session_id, second.session_id])
            gone = await conn.send(fetch(range(0), session_id=evicted, epoch=1))
            assert gone.error_code == ErrorCode.fetch_session_id_not_found
            still = await conn.send(fetch(range(0), session_id=kept, epoch=1))
            assert (still.error_code, still.session_id) == (ErrorCode.none, kept)
            # Growing past the cached-partition bound (2 + 1 cached, +3 here) closes it.
            grown = await conn.send(fetch(range(10, 13), session_id=kept, epoch=2))
            assert grown.error_code == ErrorCode.fetch_session_id_not_found
            again = await conn.send(fetch(range(0), session_id=kept, epoch=2))
            assert again.error_code == ErrorCode.fetch_session_id_not_found

    async def bounded():
        async with asyncio.timeout(SCENARIO_TIMEOUT_S):
            await scenario()

    asyncio.run(bounded())
