"""``odradek transactions`` against a real broker with a transaction librdkafka left open: list
and describe show it at its coordinator, find-hanging does not call it hanging (its coordinator
is completing it), abort --start-offset ends it with an ABORT marker at the partition leader
(the last stable offset moves past it, read_committed consumers skip its records), and every
failure is one line with Kafka's error name. A truly hanging transaction (a transactional batch
of a producer no coordinator knows, from long ago) is found by find-hanging and aborted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.init_producer_id.v4 import request as init_request
from kio.schema.produce.v9 import request as produce_request

from odradek.client.admin import ClusterClient
from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.local.cluster import ClusterState
from odradek.ops import transactions as txn_ops
from odradek.ops.cluster import read_cluster
from odradek.storage.records import Record, encode_batch
from support.consuming import poll_to_partition_end
from support.listener_ports import listener_addresses
from support.waiting import wait_until

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 120
WAIT_S = 30.0
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


@pytest.fixture(scope="module")
def cluster_state(tmp_path_factory, local_cluster) -> Iterator[ClusterState]:
    root = tmp_path_factory.mktemp("transactions")
    with local_cluster(root / "var" / "local", brokers=1, broker_overrides=OVERRIDES):
        yield ClusterState.read(root / "var" / "local")


@pytest.fixture(scope="module")
def bootstrap(cluster_state) -> str:
    return cluster_state.bootstrap_servers


@pytest.fixture(scope="module")
def internal(cluster_state) -> str:
    """The brokers' inter-broker listener (INTERNAL): WriteTxnMarkers is served there only, so
    ``transactions abort`` bootstraps from it (docs/security.md)."""
    addresses = []
    for member in cluster_state.members:
        if member.role == "broker":
            addresses.append(listener_addresses(member)[cluster_state.internal_listener])
    return ",".join(addresses)


def odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", "transactions", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def new_topic(bootstrap: str) -> str:
    name = f"txn-cli-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)
    return name


def open_transaction(bootstrap: str, topic: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"open-%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    return producer


def committed_end(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
        }
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)[1]
    finally:
        consumer.close()


async def _find_hanging(bootstrap: str, now_ms: int) -> list[txn_ops.OpenTransaction]:
    async with ClusterClient(bootstrap) as client:
        view = await read_cluster(client)
        return await txn_ops.find_hanging_on(client, view, 1, now_ms=now_ms)


def test_list_describe_and_abort_an_open_transaction(bootstrap, internal):
    topic = new_topic(bootstrap)
    transactional_id = f"tx-{uuid.uuid4().hex[:6]}"
    producer = open_transaction(bootstrap, topic, transactional_id)
    assert committed_end(bootstrap, topic) == 0  # the open transaction holds the LSO

    listed = odradek("list", "--bootstrap-server", bootstrap, "--state", "Ongoing")
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if transactional_id in line)
    assert row[1] == "1" and row[3] == "Ongoing"

    described = odradek("describe", "--bootstrap-server", bootstrap, "--transactional-id", row[0])
    assert described.returncode == 0, described.stderr
    assert f"{topic}-0" in described.stdout and "Ongoing" in described.stdout

    # Older than any timeout, yet its coordinator lists it in progress: not hanging.
    far_future_ms = int(time.time() * 1000) + 2 * txn_ops.MAX_TRANSACTION_TIMEOUT_MS
    assert asyncio.run(_find_hanging(bootstrap, far_future_ms)) == []

    wrong = odradek(
        "abort", "--bootstrap-server", internal, "--topic", topic, "--partition", "0",
        "--start-offset", "99",
    )  # fmt: skip
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1 and "start at: 0" in wrong.stderr

    aborted = odradek(
        "abort", "--bootstrap-server", internal, "--topic", topic, "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert aborted.returncode == 0, aborted.stderr
    assert f"producer {row[2]}" in aborted.stdout
    assert committed_end(bootstrap, topic) == 4  # 3 records and the ABORT marker
    assert asyncio.run(_find_hanging(bootstrap, far_future_ms)) == []  # nothing open any more

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = [m.value() for m in poll_to_partition_end(consumer, WAIT_S)]
        assert seen == [], "records of the aborted transaction were delivered"
    finally:
        consumer.close()
        del producer  # its transaction is over; the coordinator times out its own state


def test_failures_are_one_line_with_kafkas_error(bootstrap, internal):
    missing = odradek("describe", "--bootstrap-server", bootstrap, "--transactional-id", "nope")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    unknown = odradek(
        "abort", "--bootstrap-server", internal, "--topic", "no-such-topic", "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    bad_state = odradek("list", "--bootstrap-server", bootstrap, "--state", "Bogus")
    assert bad_state.returncode == 1 and "Bogus" in bad_state.stderr


async def _send(bootstrap: str, request):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with await BrokerConnection.open(host, int(port)) as connection:
        return await connection.send(request)


def send(bootstrap: str, request):
    return asyncio.run(asyncio.wait_for(_send(bootstrap, request), WAIT_S))


def write_hanging_transaction(bootstrap: str, topic: str, timestamp_ms: int) -> int:
    """A transactional batch of an idempotent producer: no coordinator knows its transaction,
    so nothing will ever end it (a client that skipped AddPartitionsToTxn; KIP-890's
    verification would refuse it). Returns the producer id."""
    init = send(
        bootstrap,
        init_request.InitProducerIdRequest(
            transactional_id=None, transaction_timeout=timedelta(seconds=60)
        ),
    )
    assert init.error_code == ErrorCode.none
    batch = encode_batch(
        [Record(i, timestamp_ms, b"k", b"hanging-%d" % i) for i in range(2)],
        base_offset=0,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )
    request = produce_request.ProduceRequest(
        # As the client does (Kafka refuses a transactional batch without one); it never asked
        # this id's coordinator for anything, so none knows the transaction.
        transactional_id="hanging",
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            produce_request.TopicProduceData(
                name=topic,
                partition_data=(produce_request.PartitionProduceData(index=0, records=batch),),
            ),
        ),
    )

    def hosted():  # the answer once the new topic's leader hosts it
        (partition,) = send(bootstrap, request).responses[0].partition_responses
        if partition.error_code not in (
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.not_leader_or_follower,
        ):
            return partition
        return None

    partition = wait_until(hosted, f"{topic}'s leader to take the batch", WAIT_S)
    assert partition.error_code == ErrorCode.none, partition
    return int(init.producer_id)


def test_find_hanging_then_abort_a_transaction_no_coordinator_knows(bootstrap, internal):
    topic = new_topic(bootstrap)
    long_ago_ms = int(time.time() * 1000) - 2 * txn_ops.MAX_TRANSACTION_TIMEOUT_MS
    pid = write_hanging_transaction(bootstrap, topic, long_ago_ms)
    assert committed_end(bootstrap, topic) == 0

    found = odradek("find-hanging", "--bootstrap-server", bootstrap, "--broker-id", "1")
    assert found.returncode == 0, found.stderr
    rows = [line.split() for line in found.stdout.splitlines()[1:]]
    mine = [r for r in rows if r[0] == topic]
    assert mine == [[topic, "0", str(pid), "0", "-1", "0", str(long_ago_ms), mine[0][7]]]

    aborted = odradek(
        "abort", "--bootstrap-server", internal, "--topic", topic, "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert aborted.returncode == 0, aborted.stderr
    assert committed_end(bootstrap, topic) == 3  # 2 records and the ABORT marker
    found = odradek("find-hanging", "--bootstrap-server", bootstrap, "--broker-id", "1")
    assert found.returncode == 0 and topic not in found.stdout

    unknown = odradek("find-hanging", "--bootstrap-server", bootstrap, "--broker-id", "9")
    assert unknown.returncode == 1 and "broker 9 is not in the cluster" in unknown.stderr
