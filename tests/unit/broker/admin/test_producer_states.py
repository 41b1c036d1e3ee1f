"""DescribeProducers on real logs: the leader shows each producer's state and open transaction;
followers and unknown partitions answer Kafka's errors; the handler's answer encodes."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from odradek.broker.admin.producer_states import describe_producers
from odradek.broker.handlers import describe_producers as handler
from odradek.broker.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from odradek.broker.partition import PartitionState
from odradek.broker.replica_manager import ReplicaManager
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import decode_response, encode_response
from odradek.protocol.header import RequestHeader
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.manager import LogManager
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin
from support.authorizer import handler_context

BROKER = 1
NOW = 1_700_000_000_000


@pytest.fixture
def replicas(tmp_path):
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    yield ReplicaManager(BROKER, log_manager)
    log_manager.shutdown()


def host(replicas, topic, leader=BROKER):
    state = PartitionState(leader=leader, leader_epoch=0, isr=(leader,), replicas=(leader,))
    replicas.become_leader_or_follower(topic, 0, state, TopicConfig())
    return replicas.get_partition(topic, 0)


def batch(pid: int, sequence: int, count: int, *, transactional: bool, ts: int = NOW) -> bytes:
    return encode_batch(
        [Record(i, ts, b"k", b"v") for i in range(count)],
        base_offset=0,
        producer_id=pid,
        producer_epoch=3,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def write(log, data: bytes) -> int:
    return log.append_validated(log.validate(data, origin=AppendOrigin.COORDINATOR)).first_offset


@pytest.fixture
def led(replicas):
    log = host(replicas, "t").log
    log.append(encode_batch([Record(0, NOW, b"k", b"plain")], base_offset=0))  # 0: no producer
    write(log, batch(7, 0, 2, transactional=False))  # 1..2: idempotent
    write(log, batch(8, 0, 3, transactional=True, ts=NOW + 5))  # 3..5: its transaction, open
    write(log, batch(9, 0, 1, transactional=True))  # 6
    log.append_as_coordinator(
        encode_marker(
            ControlType.COMMIT,
            producer_id=9,
            producer_epoch=3,
            coordinator_epoch=4,
            timestamp_ms=NOW + 9,
        ),
        leader_epoch=0,
    )  # 7: 9's transaction ends
    return log


def test_the_leader_describes_every_producer_of_its_log(replicas, led):
    [result] = describe_producers(replicas, MetadataCache(), [("t", 0)])
    assert result.error == ErrorCode.none
    described = {
        p.producer_id: (
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in result.producers
    }
    assert described == {
        7: (3, 1, NOW, -1, -1),
        8: (3, 2, NOW + 5, -1, 3),  # the open transaction's first offset
        9: (3, 0, NOW + 9, 4, -1),  # the marker's coordinator epoch and timestamp
    }


def test_followers_and_unknown_partitions_answer_kafkas_errors(replicas, led):
    host(replicas, "followed", leader=2)
    metadata = MetadataCache()
    metadata.update_topic(
        TopicMetadata("elsewhere", uuid.uuid4(), {0: PartitionMetadata(0, 2, 0, (2,), (2,))})
    )
    results = describe_producers(
        replicas,
        metadata,
        [("followed", 0), ("elsewhere", 0), ("elsewhere", 1), ("nowhere", 0), ("t", 0)],
    )
    assert [r.error for r in results] == [
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.none,
    ]
    assert all(r.producers == () for r in results[:-1])


def test_the_handler_answers_per_topic_and_the_answer_encodes(replicas, led):
    request_type = schemas.request_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    request = request_type(
        topics=(
            topic_type(name="t", partition_indexes=(0, 1)),
            topic_type(name="nowhere", partition_indexes=(0,)),
        )
    )
    broker = SimpleNamespace(replica_manager=replicas, metadata=MetadataCache())
    ctx = handler_context(broker, 0)
    response = asyncio.run(handler.handle(ctx, request))  # type: ignore[arg-type]
    header = RequestHeader(ApiKey.DESCRIBE_PRODUCERS, 0, 5, None, 2, 0)
    encoded = encode_response(header, response)
    body = decode_response(ApiKey.DESCRIBE_PRODUCERS, 0, encoded).body
    by_name = {t.name: t for t in body.topics}
    t0, t1 = by_name["t"].partitions
    assert (t0.error_code, t1.error_code) == (ErrorCode.none, ErrorCode.unknown_topic_or_partition)
    assert {p.producer_id: p.current_txn_start_offset for p in t0.active_producers} == {
        7: -1,
        8: 3,
        9: -1,
    }
    assert by_name["nowhere"].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
