"""BrokerConnection talks to the real broker server: versions, metadata, produce, fetch, pipelining.

The broker (server, handlers, replica manager, logs) runs on its own event loop thread, as in
``tests/integration/broker/conftest.py``, whose ``RunningBroker`` is reused.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords

from odradek.client.connection import MAX_IN_FLIGHT_REQUESTS, BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.schemas import request_schema

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location(
    "real_clients",
    Path(__file__).parents[1] / "broker" / "conftest.py",
)
real_clients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_clients)

TOPIC = real_clients.TOPIC
SCENARIO_TIMEOUT_S = 30


@pytest.fixture
def broker(tmp_path):
    running = real_clients.RunningBroker(tmp_path)
    yield running
    running.close()


def run(scenario) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(SCENARIO_TIMEOUT_S):
            return await scenario()

    return asyncio.run(bounded())


def _types(api_key: int, version: int) -> Any:
    """The kio module of a request schema: its nested dataclasses by name."""
    return importlib.import_module(request_schema(api_key, version).__module__)


def metadata_request(version: int, topics: list[str] | None) -> Any:
    module = _types(ApiKey.METADATA, version)
    topic_fields = {"topic_id": None} if version >= 10 else {}  # topics by id from v10
    fields: dict[str, Any] = {
        "topics": None
        if topics is None
        else tuple(module.MetadataRequestTopic(name=t, **topic_fields) for t in topics)
    }
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    return module.MetadataRequest(**fields)


def produce_request(version: int, partition: int, records: bytes, acks: int) -> Any:
    module = _types(ApiKey.PRODUCE, version)
    return module.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=TOPIC,
                partition_data=(module.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def fetch_request(version: int, partition: int, fetch_offset: int) -> Any:
    module = _types(ApiKey.FETCH, version)
    return module.FetchRequest(
        max_wait=timedelta(milliseconds=100),
        min_bytes=1,
        topics=(
            module.FetchTopic(
                topic=TOPIC,
                partitions=(
                    module.FetchPartition(
                        partition=partition,
                        fetch_offset=fetch_offset,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_versions_metadata_produce_and_fetch_over_one_connection(broker, kafka_batch):
    first = kafka_batch([(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")])
    unacknowledged = kafka_batch([(b"k3", b"v3")])

    async def scenario():
        conn = await BrokerConnection.open("127.0.0.1", broker.port, client_id="client-test")
        async with conn:
            # the broker advertises the APIs it has handlers for
            assert await conn.negotiate_versions() == broker.server.served_versions
            assert all(
                conn.api_versions[key] == SUPPORTED_VERSIONS[key]
                for key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH)
            )
            metadata_version = conn.pick_version(ApiKey.METADATA, 12)
            produce_version = conn.pick_version(ApiKey.PRODUCE, 11)
            fetch_version = conn.pick_version(ApiKey.FETCH, 12)
            assert (metadata_version, produce_version, fetch_version) == (12, 11, 12)

            metadata = await conn.send(metadata_request(metadata_version, [TOPIC]))
            (topic,) = metadata.topics
            assert (topic.name, topic.error_code) == (TOPIC, ErrorCode.none)
            assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
            assert {p.leader_id for p in topic.partitions} == {real_clients.BROKER_ID}
            assert [b.port for b in metadata.brokers] == [broker.port]

            produced = await conn.send(produce_request(produce_version, 1, first, acks=-1))
            (partition,) = produced.responses[0].partition_responses
            assert (partition.error_code, partition.base_offset) == (ErrorCode.none, 0)

            # acks=0: no answer; the broker handles a connection's requests in order, so the
            # Fetch that follows sees it.
            await conn.send_no_response(produce_request(produce_version, 1, unacknowledged, acks=0))
            fetched = await conn.send(fetch_request(fetch_version, 1, 0))
            return fetched

    fetched = run(scenario)
    (data,) = fetched.responses[0].partitions
    assert (data.error_code, data.high_watermark) == (ErrorCode.none, 4)
    # decode_response hands the record set out as a read-only view of the response frame
    assert isinstance(data.records, memoryview) and data.records.readonly
    records = MemoryRecords(bytes(data.records))
    got = []
    while (batch := records.next_batch()) is not None:
        got.extend((r.offset, r.key, r.value) for r in batch)
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(4)]


def test_a_full_window_of_pipelined_requests_comes_back_in_order(broker):
    async def scenario():
        async with await BrokerConnection.open("127.0.0.1", broker.port) as conn:
            await conn.negotiate_versions()
            version = conn.pick_version(ApiKey.METADATA, 12)
            topics = [
                [TOPIC] if i % 2 else [f"missing-{i}"] for i in range(2 * MAX_IN_FLIGHT_REQUESTS)
            ]
            responses = await asyncio.gather(
                *(conn.send(metadata_request(version, names)) for names in topics)
            )
            return [r.topics[0] for r in responses]

    answered = run(scenario)
    assert [t.name for t in answered] == [
        TOPIC if i % 2 else f"missing-{i}" for i in range(2 * MAX_IN_FLIGHT_REQUESTS)
    ]
    assert {t.error_code for t in answered[0::2]} == {ErrorCode.unknown_topic_or_partition}
    assert {t.error_code for t in answered[1::2]} == {ErrorCode.none}
