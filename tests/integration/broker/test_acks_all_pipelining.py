"""acks=all on a real broker server: while one produce waits for replication, the next request on
the same connection is appended; answers leave in request order once the follower fetched."""

from __future__ import annotations

import asyncio
import struct
from datetime import timedelta

import pytest
from kio.schema.fetch.v12 import request as fetch_request
from kio.schema.produce.v9 import request as produce_request

from odradek.broker.partition import PartitionState
from odradek.client.connection import BrokerConnection
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.protocol.codec import decode_response, encode_request

FOLLOWER = 2


def closed_count(broker, reason: str) -> float:
    sample = broker.registry.get_sample_value(
        "odradek_connections_closed_total", {"reason": reason}
    )
    return sample or 0.0


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


# A Produce v5 header over a body that is cut short: it does not parse.
_MALFORMED = struct.pack(">hhih", 0, 5, 8, 1) + b"t" + b"\x00\x01"
BAD_TAILS = {
    "malformed_request": struct.pack(">i", len(_MALFORMED)) + _MALFORMED,
    "malformed_frame": struct.pack(">i", 6) + b"abcdef",  # below the smallest request header
}


@pytest.mark.parametrize("reason", sorted(BAD_TAILS))
def test_a_request_that_closes_the_connection_waits_for_the_answers_before_it(
    broker, kafka_batch, reason
):
    """Kafka reads a connection's next request only once it has answered the one before: a
    request that does not parse, or a size prefix out of bounds, sent behind an acks=all
    produce still waiting for replication, closes the connection only after that produce's
    answer is written (found by the fuzz)."""
    state = PartitionState(leader=1, leader_epoch=1, isr=(1, FOLLOWER), replicas=(1, FOLLOWER))
    broker.call_sync(
        lambda: broker.replicas.become_leader_or_follower(
            "closing", 0, state, TopicConfig(min_insync_replicas=2)
        )
    )
    produce = encode_request(_produce("closing", kafka_batch([(b"k", b"v")]), timeout_s=1), 7, "t")
    before = closed_count(broker, reason)

    async def scenario() -> tuple[list[bytes], float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        try:
            writer.write(struct.pack(">i", len(produce)) + produce + BAD_TAILS[reason])
            await writer.drain()
            started = asyncio.get_running_loop().time()
            frames = []
            while len(frames) < 3:  # bounded: the broker closes after at most two answers
                try:
                    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
                except asyncio.IncompleteReadError:
                    break  # closed
                frames.append(await asyncio.wait_for(reader.readexactly(size), 10))
            return frames, asyncio.get_running_loop().time() - started
        finally:
            writer.close()

    frames, took_s = asyncio.run(scenario())
    assert len(frames) == 1, "the produce sent before the bad request was not answered"
    assert struct.unpack_from(">i", frames[0])[0] == 7
    response = decode_response(0, 9, frames[0])
    partition = response.body.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.request_timed_out  # the follower never fetched
    assert took_s >= 0.9  # the close waited for the answer's timeout
    assert closed_count(broker, reason) == before + 1
