"""Client quotas on a real broker: a producer_byte_rate quota set by AlterClientQuotas throttles
the producer of that client id (librdkafka sees throttle_time_ms, its rate stays near the
quota) and not another client id; DescribeClientQuotas returns it; removing it lifts it; a
consumer_byte_rate quota of a user and client id throttles that consumer's fetches likewise; a
request_percentage quota throttles any answer of its client; ``odradek quotas`` alters and
describes as kafka-configs.sh."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import ClusterState
from support.quota_requests import alter, call, describe
from support.waiting import wait_until

pytestmark = pytest.mark.integration

QUOTA_BYTES_PER_S = 64 * 1024
OVERRIDES = {"quota.window.num": "3", "quota.window.size.seconds": "1"}  # throttles <= 3 s
PRODUCE_S = 4.0
VALUE = b"x" * 1024
APPLY_S = 10.0
CALL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_cluster) -> Iterator[ClusterState]:
    root = tmp_path_factory.mktemp("quotas") / "var" / "local"
    with local_cluster(root, brokers=1, broker_overrides=OVERRIDES):
        yield ClusterState.read(root)


@pytest.fixture(scope="module")
def topic(cluster) -> str:
    name = f"quotas-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(CALL_TIMEOUT_S)
    return name


def produce_for(bootstrap: str, topic: str, client_id: str) -> tuple[float, int]:
    """Produce as fast as possible for PRODUCE_S: the acknowledged rate (bytes/s) and the
    largest throttle_time_ms librdkafka reported."""
    throttles: list[int] = []
    acked: list[int] = []

    def on_stats(raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    def on_delivery(err, msg) -> None:
        if err is None and time.monotonic() < deadline:
            acked.append(len(msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 16384,  # requests well under what a throttle bound lets through
            "queue.buffering.max.kbytes": 512,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    started = time.monotonic()
    deadline = started + PRODUCE_S
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    for _ in range(20):  # let stats and the last acknowledgements in, bounded
        producer.poll(0.1)
    producer.purge()
    producer.flush(5)
    return sum(acked) / PRODUCE_S, max(throttles, default=0)


def test_producer_byte_rate_throttles_only_its_client_and_is_lifted(cluster, topic):
    bootstrap = cluster.bootstrap_servers
    assert alter(bootstrap, "slow", 1.5).error_code == 42  # INVALID_REQUEST: not a LONG
    assert alter(bootstrap, "slow", QUOTA_BYTES_PER_S, validate_only=True).error_code == 0
    assert describe(bootstrap, "slow") == {}
    entry = alter(bootstrap, "slow", QUOTA_BYTES_PER_S)
    assert entry.error_code == 0, entry.error_message
    assert describe(bootstrap, "slow") == {"producer_byte_rate": QUOTA_BYTES_PER_S}
    time.sleep(1.0)  # the broker follows the change notification

    rate, throttle_ms = produce_for(bootstrap, topic, "slow")
    assert throttle_ms > 0
    # An allowance of two windows at the start, then the quota: about 1.5x over 4 s.
    assert 0.3 * QUOTA_BYTES_PER_S < rate < 2.5 * QUOTA_BYTES_PER_S, rate

    fast_rate, fast_throttle_ms = produce_for(bootstrap, topic, "fast")
    assert fast_throttle_ms == 0
    assert fast_rate > 4 * QUOTA_BYTES_PER_S, fast_rate

    assert alter(bootstrap, "slow", None).error_code == 0
    wait_until(lambda: describe(bootstrap, "slow") == {}, "the quota removed", APPLY_S)
    time.sleep(1.0)
    lifted_rate, lifted_throttle_ms = produce_for(bootstrap, topic, "slow")
    assert lifted_throttle_ms == 0
    assert lifted_rate > 4 * QUOTA_BYTES_PER_S, lifted_rate


def test_consumer_byte_rate_of_a_user_and_client_throttles_its_fetches(cluster, topic):
    bootstrap = cluster.bootstrap_servers
    filler = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 5})
    for _ in range(2048):  # 2 MiB to read
        filler.produce(topic, VALUE)
        filler.poll(0)
    assert filler.flush(CALL_TIMEOUT_S) == 0
    entry = alter(bootstrap, "slowc", QUOTA_BYTES_PER_S, key="consumer_byte_rate", user="ANONYMOUS")
    assert entry.error_code == 0, entry.error_message
    time.sleep(1.0)  # the broker follows the change notification

    throttles: list[int] = []

    def on_stats(raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "slowc",
            "group.id": f"quotas-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = 0
        deadline = time.monotonic() + PRODUCE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read += len(message.value())
        for _ in range(10):
            consumer.poll(0.1)
    finally:
        consumer.close()
    assert max(throttles, default=0) > 0
    assert 0.3 * QUOTA_BYTES_PER_S < read / PRODUCE_S < 2.5 * QUOTA_BYTES_PER_S, read
    assert (
        alter(bootstrap, "slowc", None, key="consumer_byte_rate", user="ANONYMOUS").error_code == 0
    )


def test_odradek_quotas_cli_alters_and_describes_like_kafka_configs(cluster):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek.cli",
                "quotas",
                *args,
                "--bootstrap-server",
                cluster.bootstrap_servers,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    user_client = [
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
    ]
    keys = "producer_byte_rate=1024,consumer_byte_rate=2048,controller_mutation_rate=1.5"
    done = cli("--alter", "--add-config", keys, *user_client)
    assert done.returncode == 0, done.stderr
    shown = cli("--describe", *user_client)
    assert shown.returncode == 0, shown.stderr
    assert (
        "consumer_byte_rate=2048, controller_mutation_rate=1.5, producer_byte_rate=1024"
        in shown.stdout
    )
    assert "user 'alice', client-id <default>" in shown.stdout
    refused = cli("--alter", "--add-config", "nope=1", *user_client)
    assert refused.returncode == 1
    assert "Invalid configuration key nope" in refused.stderr
    removed = "producer_byte_rate,consumer_byte_rate,controller_mutation_rate"
    done = cli("--alter", "--delete-config", removed, *user_client)
    assert done.returncode == 0, done.stderr
    assert cli("--describe", *user_client).stdout == ""


def test_request_percentage_throttles_any_answer_of_that_client(cluster):
    from kio.schema.metadata.v12 import request as metadata

    bootstrap = cluster.bootstrap_servers
    entry = alter(bootstrap, "busy", 0.0001, key="request_percentage")
    assert entry.error_code == 0, entry.error_message
    time.sleep(1.0)  # the broker follows the change notification
    ask = metadata.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    throttles = [call(bootstrap, ask, "busy").throttle_time.total_seconds() for _ in range(3)]
    assert max(throttles) > 0
    assert max(throttles) <= 1.0  # one window (quota.window.size.seconds)
    assert call(bootstrap, ask, "idle").throttle_time.total_seconds() == 0
    assert alter(bootstrap, "busy", None, key="request_percentage").error_code == 0
