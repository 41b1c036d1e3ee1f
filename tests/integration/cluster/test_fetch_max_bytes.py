"""A broker process answers a fetch with at most ``fetch.max.bytes`` of records, whatever the
fetch asks for (1 GiB here), except a first batch larger than that, which comes whole."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.apis import ApiKey
from support.raw_socket import receive, send
from support.requests import entry_type, fill, request

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
FETCH_MAX_BYTES = 1 * MIB  # fetch.max.bytes of the broker below
ASKED = 1 << 30  # what the fetch asks for: 1 GiB, its max_bytes and each partition's
VERSION = 11
TOPIC = "big-fetches"
RECORD_BYTES = 100 * 1024  # partition 0: 60 batches of one 100 KiB record (6 MiB)
LARGE_BATCH_BYTES = 3 * MIB // 2  # partition 1: one batch larger than fetch.max.bytes
WAIT_S = 30.0


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory, local_cluster):
    overrides = {"fetch.max.bytes": str(FETCH_MAX_BYTES), "message.max.bytes": str(4 * MIB)}
    with local_cluster(
        tmp_path_factory.mktemp("fetch-max-bytes"), brokers=1, broker_overrides=overrides
    ) as state:
        servers = state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(WAIT_S)
        producer = Producer(
            {"bootstrap.servers": servers, "linger.ms": 0, "message.max.bytes": 4 * MIB}
        )
        for i in range(60):
            producer.produce(TOPIC, value=bytes([i]) * RECORD_BYTES, partition=0)
            producer.flush(WAIT_S)  # one record a batch
        producer.produce(TOPIC, value=b"L" * LARGE_BATCH_BYTES, partition=1)
        assert producer.flush(WAIT_S) == 0
        yield servers


def fetch(bootstrap: str, partitions: list[int]) -> dict[int, int]:
    """Record bytes answered per partition to one fetch asking for ASKED bytes from offset 0."""
    fetch_type = type(request(ApiKey.FETCH, VERSION))
    topic_type = entry_type(fetch_type, "topics")
    partition_type = entry_type(fetch_type, "topics", "partitions")
    body = request(
        ApiKey.FETCH,
        VERSION,
        replica_id=-1,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=ASKED,
        session_epoch=-1,
        topics=(
            fill(
                topic_type,
                topic=TOPIC,
                partitions=tuple(
                    fill(
                        partition_type,
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=ASKED,
                    )
                    for p in partitions
                ),
            ),
        ),
    )
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        send(sock, body, correlation_id=1)
        answer = receive(sock, ApiKey.FETCH, VERSION)
    assert answer.error_code == 0
    sizes = {}
    for topic in answer.responses:
        for p in topic.partitions:
            assert p.error_code == 0, p
            sizes[p.partition_index] = len(p.records or b"")
    return sizes


def test_a_1_gib_fetch_gets_at_most_fetch_max_bytes(bootstrap):
    started = time.monotonic()
    sizes = fetch(bootstrap, [0])
    print(f"asked {ASKED} bytes, answered {sizes[0]} (fetch.max.bytes {FETCH_MAX_BYTES})")
    assert 0 < sizes[0] <= FETCH_MAX_BYTES
    assert sizes[0] >= FETCH_MAX_BYTES - RECORD_BYTES - 1024  # filled up to the bound
    assert time.monotonic() - started < WAIT_S


def test_a_first_batch_above_fetch_max_bytes_still_comes_whole(bootstrap):
    sizes = fetch(bootstrap, [1, 0])
    print(f"first batch alone: {sizes[1]} bytes, then {sizes[0]} of partition 0")
    assert LARGE_BATCH_BYTES < sizes[1] < LARGE_BATCH_BYTES + 1024  # KIP-74: progress
    assert sizes[0] == 0  # nothing more: the bound is spent
