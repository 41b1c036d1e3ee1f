"""A read_committed Fetch over the wire: the answer carries the LSO and the aborted
transactions (written here straight into the leader's log: no client may write them yet)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.schemas import request_schema
from odradek.storage.control import ControlType, encode_marker
from odradek.storage.records import Record, encode_batch
from odradek.storage.validator import AppendOrigin
from support.consuming import poll_messages

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location(
    "real_clients_rc", Path(__file__).parents[1] / "broker" / "conftest.py"
)
real_clients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_clients)
NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    running = real_clients.RunningBroker(tmp_path)
    yield running
    running.close()


def _write_aborted_transaction(broker) -> None:
    partition = broker.replicas.get_partition(real_clients.TOPIC, 0)
    log = partition.log
    data = encode_batch(
        [Record(i, NOW, b"k", b"t") for i in range(2)],
        base_offset=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_validated(log.validate(data, origin=AppendOrigin.COORDINATOR))  # 0..1
    log.append_as_coordinator(
        encode_marker(
            ControlType.ABORT,
            producer_id=7,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=NOW,
        ),
        leader_epoch=0,
    )  # 2
    partition._maybe_increment_high_watermark()


def test_a_read_committed_fetch_names_the_aborted_transactions(broker):
    broker.call_sync(lambda: _write_aborted_transaction(broker))
    module = importlib.import_module(request_schema(ApiKey.FETCH, 12).__module__)
    request = module.FetchRequest(
        max_wait=timedelta(milliseconds=100),
        min_bytes=1,
        isolation_level=1,
        topics=(
            module.FetchTopic(
                topic=real_clients.TOPIC,
                partitions=(
                    module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )

    async def scenario():
        async with await BrokerConnection.open("127.0.0.1", broker.port) as conn:
            await conn.negotiate_versions()
            return await conn.send(request)

    fetched = asyncio.run(asyncio.wait_for(scenario(), 30))
    (data,) = fetched.responses[0].partitions
    assert data.error_code == ErrorCode.none
    assert (data.high_watermark, data.last_stable_offset) == (3, 3)
    assert [(t.producer_id, t.first_offset) for t in data.aborted_transactions] == [(7, 0)]


def _txn(pid: int, values: list[bytes]) -> bytes:
    return encode_batch(
        [Record(i, NOW, b"k", v) for i, v in enumerate(values)],
        base_offset=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def _end(pid: int, control: ControlType) -> bytes:
    return encode_marker(
        control, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=NOW
    )


def _write_history(broker) -> None:
    """committed (pid 7), aborted (pid 8), interleaved; then pid 9's transaction left open."""
    partition = broker.replicas.get_partition(real_clients.TOPIC, 0)
    log = partition.log

    def data(records: bytes) -> None:
        log.append_validated(log.validate(records, origin=AppendOrigin.COORDINATOR))

    data(_txn(7, [b"c1", b"c2"]))
    data(_txn(8, [b"a1"]))
    data(encode_batch([Record(0, NOW, b"k", b"plain")], base_offset=0))
    log.append_as_coordinator(_end(8, ControlType.ABORT), leader_epoch=0)
    log.append_as_coordinator(_end(7, ControlType.COMMIT), leader_epoch=0)
    data(_txn(9, [b"open"]))
    data(encode_batch([Record(0, NOW, b"k", b"after")], base_offset=0))
    partition._maybe_increment_high_watermark()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_librdkafka_reads_committed_records_only(broker, isolation):
    from confluent_kafka import Consumer, TopicPartition

    broker.call_sync(lambda: _write_history(broker))
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",  # assign() needs no coordinator
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(real_clients.TOPIC, 0, 0)])
    expected = 3 if isolation == "read_committed" else 6
    received = [m.value() for m in poll_messages(consumer, expected, 10, poll_s=0.2)]
    consumer.close()
    if isolation == "read_committed":
        # pid 8's record is aborted; pid 9's and what follows it are beyond the LSO
        assert received == [b"c1", b"c2", b"plain"]
    else:
        assert received == [b"c1", b"c2", b"a1", b"plain", b"open", b"after"]
