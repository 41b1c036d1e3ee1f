"""A Produce request's record set per partition is exactly one batch of magic 2, or it is
INVALID_RECORD and nothing is appended (Kafka's ProduceRequest.validateRecords; found by the fuzz).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas

pytestmark = pytest.mark.integration


def produce(broker, record_sets: list[bytes | None]) -> list:
    """One Produce v9 request, record set i to partition i; the partition responses."""
    request = schemas.request_schema(0, 9)(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=broker.topic,
                partition_data=tuple(
                    PartitionProduceData(index=i, records=records)
                    for i, records in enumerate(record_sets)
                ),
            ),
        ),
    )

    async def send():
        async with await BrokerConnection.open("127.0.0.1", broker.port) as connection:
            return await connection.send(request, timeout_s=10)

    [topic] = asyncio.run(send()).responses
    return sorted(topic.partition_responses, key=lambda p: p.index)


def log_end_offsets(broker) -> list[int]:
    return broker.call_sync(
        lambda: [
            broker.replicas.get_partition(broker.topic, p).log.log_end_offset
            for p in range(broker.partitions)
        ]
    )


def legacy_message_set() -> bytes:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, 1_700_000_000_000, b"k", b"old format")
    return bytes(builder.build())


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda batch: None, "must have at least one record batch"),
        (lambda batch: b"", "must have at least one record batch"),
        (lambda batch: batch[:-1], "must have at least one record batch"),
        (lambda batch: batch + batch, "exactly one record batch per partition"),
        (lambda batch: batch + b"\x00" * 7, "exactly one record batch per partition"),
        (lambda batch: legacy_message_set(), "magic version 2"),
    ],
    ids=["null", "empty", "cut", "two-batches", "trailing-bytes", "magic-1"],
)
def test_anything_but_one_batch_is_invalid_record(broker, kafka_batch, make, problem):
    batch = kafka_batch([(b"k", b"v"), (b"k2", b"v2")])
    before = log_end_offsets(broker)
    refused, accepted = produce(broker, [make(batch), batch])
    assert refused.error_code == ErrorCode.invalid_record
    assert problem in refused.error_message
    assert accepted.error_code == ErrorCode.none
    assert log_end_offsets(broker) == [before[0], before[1] + 2, *before[2:]]
