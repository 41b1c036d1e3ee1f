"""Real brokers keep KIP-227 fetch sessions: raw Fetch v12 ones, their errors, kafka-python's."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v9 import request as produce_v9

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from support.consuming import poll_records
from support.kafka_batches import kafka_python_batch

pytestmark = pytest.mark.integration

SCENARIO_TIMEOUT_S = 60
LONG_POLL_MS = 10_000  # far longer than the test waits before producing
CONSUME_TIMEOUT_S = 30


@pytest.fixture
def admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    yield client
    client.close()


def batch(values: list[bytes]) -> bytes:
    now_ms = int(time.time() * 1000)
    return bytes(kafka_python_batch((i, now_ms, None, v, ()) for i, v in enumerate(values)))


async def produce(conn: BrokerConnection, topic: str, partition: int, values: list[bytes]) -> None:
    response = await conn.send(
        produce_v9.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=timedelta(seconds=10),
            topic_data=(
                produce_v9.TopicProduceData(
                    name=topic,
                    partition_data=(
                        produce_v9.PartitionProduceData(index=partition, records=batch(values)),
                    ),
                ),
            ),
        )
    )
    (result,) = response.responses[0].partition_responses
    assert result.error_code == ErrorCode.none


def fetch(
    topic: str,
    partitions: dict[int, int],  # partition -> fetch offset
    *,
    session_id: int,
    epoch: int,
    forgotten: tuple[int, ...] = (),
    max_wait_ms: int = 100,
) -> Any:
    return fetch_v12.FetchRequest(
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic=topic,
                partitions=tuple(
                    fetch_v12.FetchPartition(
                        partition=p, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                    for p, offset in partitions.items()
                ),
            ),
        )
        if partitions
        else (),
        forgotten_topics_data=(fetch_v12.ForgottenTopic(topic=topic, partitions=forgotten),)
        if forgotten
        else (),
        rack_id="",
    )


def answered(response: Any) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, record bytes) of every partition in the answer."""
    return {
        p.partition_index: (p.high_watermark, len(p.records or b""))
        for t in response.responses
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }


@pytest.fixture
def one_broker_topic(admin, wait_for_topic, topic_name, cluster_state):
    """A topic of 3 partitions all led by the first broker, and that broker's member."""
    broker = next(m for m in cluster_state.members if m.role == "broker")
    topic = topic_name()
    assignment = {p: [broker.id] for p in range(3)}
    admin.create_topics([NewTopic(topic, replica_assignments=assignment)])
    wait_for_topic(topic, 3)
    return topic, broker


def run(scenario) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(SCENARIO_TIMEOUT_S):
            return await scenario()

    return asyncio.run(bounded())


def test_a_session_opens_answers_only_changes_and_forgets(one_broker_topic):
    topic, broker = one_broker_topic
    host, port = broker.address.rsplit(":", 1)

    async def scenario():
        async with (
            await BrokerConnection.open(host, int(port)) as conn,
            await BrokerConnection.open(host, int(port)) as producer,
        ):
            await produce(producer, topic, 0, [b"a", b"b", b"c"])
            await produce(producer, topic, 1, [b"d", b"e"])

            # A full fetch with epoch 0 opens a session and answers every partition.
            full = await conn.send(fetch(topic, {0: 0, 1: 0, 2: 0}, session_id=0, epoch=0))
            assert full.error_code == ErrorCode.none
            session_id = full.session_id
            assert session_id > 0
            got = answered(full)
            assert {p: hw for p, (hw, _) in got.items()} == {0: 3, 1: 2, 2: 0}
            assert got[0][1] > 0 and got[1][1] > 0 and got[2][1] == 0

            # Incremental: new offsets for 0 and 1, nothing else changed: an empty answer.
            quiet = await conn.send(fetch(topic, {0: 3, 1: 2}, session_id=session_id, epoch=1))
            assert (quiet.error_code, quiet.session_id) == (ErrorCode.none, session_id)
            assert answered(quiet) == {}

            # New records on partition 2, which the request does not name: answered anyway.
            await produce(producer, topic, 2, [b"f"])
            news = await conn.send(fetch(topic, {}, session_id=session_id, epoch=2))
            assert answered(news) == {2: (1, answered(news)[2][1])} and answered(news)[2][1] > 0

            # Partition 0 forgotten: records appended to it are no longer answered.
            await produce(producer, topic, 0, [b"g"])
            forgot = await conn.send(
                fetch(topic, {2: 1}, session_id=session_id, epoch=3, forgotten=(0,))
            )
            assert answered(forgot) == {}

            # Epoch 4 is next; 9 is refused, and the session stays usable.
            wrong = await conn.send(fetch(topic, {}, session_id=session_id, epoch=9))
            assert (wrong.error_code, wrong.session_id, wrong.responses) == (
                ErrorCode.invalid_fetch_session_epoch,
                0,
                (),
            )
            unknown = await conn.send(fetch(topic, {}, session_id=session_id ^ 1, epoch=1))
            assert (unknown.error_code, unknown.responses) == (
                ErrorCode.fetch_session_id_not_found,
                (),
            )

            # Nothing changed: the incremental fetch long-polls until a record lands.
            started = time.monotonic()
            waiting = asyncio.ensure_future(
                conn.send(
                    fetch(topic, {}, session_id=session_id, epoch=4, max_wait_ms=LONG_POLL_MS),
                    timeout_s=LONG_POLL_MS / 1000 + 10,
                )
            )
            await asyncio.sleep(0.5)
            assert not waiting.done(), "an incremental fetch with nothing new must wait"
            await produce(producer, topic, 1, [b"h"])
            woken = await waiting
            assert time.monotonic() - started < LONG_POLL_MS / 1000 / 2
            assert set(answered(woken)) == {1} and answered(woken)[1][0] == 3

            # A full fetch with epoch -1 closes the session: its id is unknown afterwards.
            closed = await conn.send(fetch(topic, {1: 3}, session_id=session_id, epoch=-1))
            assert (closed.error_code, closed.session_id) == (ErrorCode.none, 0)
            gone = await conn.send(fetch(topic, {}, session_id=session_id, epoch=5))
            assert gone.error_code == ErrorCode.fetch_session_id_not_found

    run(scenario)


def test_kafka_python_consumes_every_record_through_incremental_sessions(
    bootstrap, admin, wait_for_topic, topic_name
):
    topic = topic_name()
    partitions = 6
    admin.create_topics([NewTopic(topic, partitions, 1)])
    wait_for_topic(topic, partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        received: list[tuple[int, int, bytes]] = []
        sent = 0
        for round_ in range(5):  # appends between polls: the session sees new data each round
            for i in range(60):
                producer.send(topic, value=b"%d-%d" % (round_, i), partition=i % partitions)
            producer.flush(timeout=CONSUME_TIMEOUT_S)
            sent += 60
            left = sent - len(received)
            read = poll_records(consumer, left, CONSUME_TIMEOUT_S, poll_ms=200)
            received.extend((r.partition, r.offset, r.value) for r in read)
            assert len(received) == sent, f"round {round_}: {len(received)} of {sent}"
        for batch_ in consumer.poll(timeout_ms=500).values():  # nothing more, no duplicates
            received.extend((r.partition, r.offset, r.value) for r in batch_)
        # kafka-python's own session handlers hold the sessions the brokers made (nonzero ids).
        handlers = consumer._fetcher._session_handlers.values()
        session_ids = {h.next_metadata.session_id for h in handlers}
        in_sessions = [h for h in handlers if not h.next_metadata.is_full]
    finally:
        consumer.close()
        producer.close()
    assert len(received) == sent
    for p in range(partitions):
        offsets = [offset for partition, offset, _ in received if partition == p]
        assert offsets == list(range(len(offsets))), p
    expected = sorted(b"%d-%d" % (r, i) for r in range(5) for i in range(60))
    assert sorted(value for _, _, value in received) == expected
    assert in_sessions and 0 not in {h.next_metadata.session_id for h in in_sessions}, session_ids
