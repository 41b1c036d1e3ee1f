"""``odradek transactions`` against a real broker with a transaction librdkafka left open: list
and describe show it at its coordinator, find-hanging does not call it hanging (its coordinator
is completing it), abort --start-offset ends it with an ABORT marker at the partition leader
(the last stable offset moves past it, read_committed consumers skip its records), and every
failure is one line with Kafka's error name."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import ClusterState
from odradek.ops import transactions as txn_ops
from odradek.ops.client import ClusterClient
from odradek.ops.cluster import read_cluster

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
def bootstrap(tmp_path_factory, local_cluster) -> Iterator[str]:
    root = tmp_path_factory.mktemp("transactions")
    with local_cluster(root / "var" / "local", brokers=1, broker_overrides=OVERRIDES):
        yield ClusterState.read(root / "var" / "local").bootstrap_servers


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


def test_list_describe_and_abort_an_open_transaction(bootstrap):
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
        "abort", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
        "--start-offset", "99",
    )  # fmt: skip
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1 and "start at: 0" in wrong.stderr

    aborted = odradek(
        "abort", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
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
        seen = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                break  # end of partition
            seen.append(message.value())
        assert seen == [], "records of the aborted transaction were delivered"
    finally:
        consumer.close()
        del producer  # its transaction is over; the coordinator times out its own state


def test_failures_are_one_line_with_kafkas_error(bootstrap):
    missing = odradek("describe", "--bootstrap-server", bootstrap, "--transactional-id", "nope")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    unknown = odradek(
        "abort", "--bootstrap-server", bootstrap, "--topic", "no-such-topic", "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert unknown.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stderr
    bad_state = odradek("list", "--bootstrap-server", bootstrap, "--state", "Bogus")
    assert bad_state.returncode == 1 and "Bogus" in bad_state.stderr
