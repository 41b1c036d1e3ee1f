"""acks=all on a real broker server: while one produce waits for replication, the next request on
the same connection is appended; answers leave in request order once the follower fetched."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.produce.v9 import request as produce_request

from odradek.broker.partition import PartitionState
from odradek.client.connection import BrokerConnection
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode

FOLLOWER = 2


def _produce(topic: str, batch: bytes, timeout_s: float = 10) -> object:
    return produce_request.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=timeout_s),
        topic_data=(
            produce_request.TopicProduceData(
                name=topic,
                partition_data=(produce_request.PartitionProduceData(index=0, records=batch),),
            ),
        ),
    )


def _follower_fetch(topic: str, offset: int) -> object:
    return fetch_request.FetchRequest(
        cluster_id=None,
        replica_id=FOLLOWER,
        max_wait=timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch_request.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_request.FetchPartition(
                        partition=0,
                        current_leader_epoch=1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_a_waiting_acks_all_answer_does_not_hold_back_the_next_append(broker, kafka_batch):
    state = PartitionState(leader=1, leader_epoch=1, isr=(1, FOLLOWER), replicas=(1, FOLLOWER))
    broker.call_sync(
        lambda: broker.replicas.become_leader_or_follower(
            "replicated", 0, state, TopicConfig(min_insync_replicas=2)
        )
    )
    partition_log = broker.replicas.get_partition("replicated", 0).log
    batch = kafka_batch([(b"k", b"v"), (b"k", b"w")])

    async def scenario():
        async with (
            await BrokerConnection.open("127.0.0.1", broker.port) as producer,
            await BrokerConnection.open("127.0.0.1", broker.port) as follower,
        ):
            answers = [
                asyncio.ensure_future(producer.send(_produce("replicated", batch)))
                for _ in range(3)
            ]
            for _ in range(100):  # bounded: until all three are appended
                if partition_log.log_end_offset == 6:
                    break
                await asyncio.sleep(0.02)
            assert partition_log.log_end_offset == 6, "a waiting answer held back an append"
            assert not any(a.done() for a in answers) and partition_log.high_watermark == 0
            await follower.send(_follower_fetch("replicated", 0))
            await asyncio.sleep(0.2)
            assert not any(a.done() for a in answers)  # the follower has nothing yet
            await follower.send(_follower_fetch("replicated", 6))
            responses = await asyncio.wait_for(asyncio.gather(*answers), 10)
        return [r.responses[0].partition_responses[0] for r in responses]

    answered = asyncio.run(scenario())
    assert [(p.error_code, p.base_offset) for p in answered] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 2),
        (ErrorCode.none, 4),
    ]


def test_answers_keep_request_order_when_a_later_one_is_ready_first(broker, kafka_batch):
    """An acks=all produce waits; a Metadata request behind it on the same connection is
    handled at once but answered after it (clients match answers by order)."""
    state = PartitionState(leader=1, leader_epoch=1, isr=(1, FOLLOWER), replicas=(1, FOLLOWER))
    broker.call_sync(
        lambda: broker.replicas.become_leader_or_follower(
            "ordered", 0, state, TopicConfig(min_insync_replicas=2)
        )
    )

    async def scenario():
        from kio.schema.api_versions.v3.request import ApiVersionsRequest

        async with await BrokerConnection.open("127.0.0.1", broker.port) as connection:
            waiting = asyncio.ensure_future(
                connection.send(_produce("ordered", kafka_batch([(b"k", b"v")]), timeout_s=1))
            )
            versions = asyncio.ensure_future(
                connection.send(
                    ApiVersionsRequest(client_software_name="test", client_software_version="1")
                )
            )
            await asyncio.sleep(0.3)
            assert not versions.done()  # ready, but behind the waiting produce
            produced = await asyncio.wait_for(waiting, 5)
            await asyncio.wait_for(versions, 5)
        return produced.responses[0].partition_responses[0].error_code

    assert asyncio.run(scenario()) == ErrorCode.request_timed_out
