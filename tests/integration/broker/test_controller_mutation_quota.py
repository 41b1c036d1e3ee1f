"""controller_mutation_rate (KIP-599) on a real broker: set by AlterClientQuotas (a DOUBLE) and
shown by DescribeClientQuotas; a strict client (CreateTopics v6+: raw, kafka-python) creating
topics beyond the bucket gets THROTTLING_QUOTA_EXCEEDED with throttle_time_ms for the excess
topics only, and creates them after waiting; a permissive one (a raw v5, confluent-kafka's v4) is
admitted and throttled; a validate-only request and a topic that fails validation take nothing;
CreatePartitions, DeleteTopics and Metadata's auto-creation count partitions too; another client
id is not limited."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import ClusterState
from odradek.protocol.apis import ApiKey
from support.quota_requests import alter, call, describe
from support.requests import entry_type, fill, request

pytestmark = pytest.mark.integration

# Short windows: a bucket of quota x 3 x 1 s, throttles of at most 3 s.
OVERRIDES = {"quota.window.num": "3", "quota.window.size.seconds": "1"}
RATE = 2.0  # partitions per second: a burst of 6
THROTTLING_QUOTA_EXCEEDED = 89
APPLY_S = 1.5  # the broker follows the change notification within this
RETRY_S_MAX = 20.0
CALL_TIMEOUT_S = 30.0
TIMEOUT = timedelta(seconds=10)  # each request's timeout_ms


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_cluster) -> Iterator[ClusterState]:
    root = tmp_path_factory.mktemp("mutation-quota") / "var" / "local"
    with local_cluster(root, brokers=1, broker_overrides=OVERRIDES):
        yield ClusterState.read(root)


def names(prefix: str, count: int) -> list[str]:
    run = uuid.uuid4().hex[:6]
    return [f"{prefix}-{run}-{i}" for i in range(count)]


def limit(bootstrap: str, client_id: str, rate: float | None) -> None:
    entry = alter(bootstrap, client_id, rate, key="controller_mutation_rate")
    assert entry.error_code == 0, entry.error_message
    time.sleep(APPLY_S)


def create_raw(
    bootstrap: str,
    client_id: str,
    topics: list[str],
    version: int,
    partitions: int = 2,
    validate_only: bool = False,
) -> Any:
    """CreateTopics at ``version`` with the project's codec: (the answer, {name: error_code})."""
    ask = request(ApiKey.CREATE_TOPICS, version, timeout=TIMEOUT, validate_only=validate_only)
    topic_type = entry_type(type(ask), "topics")
    topics_asked = tuple(
        fill(topic_type, name=n, num_partitions=partitions, replication_factor=1) for n in topics
    )
    answer = call(bootstrap, replace(ask, topics=topics_asked), client_id)
    return answer, {t.name: t.error_code for t in answer.topics}


def test_alter_and_describe_take_controller_mutation_rate_as_a_double(cluster):
    bootstrap = cluster.bootstrap_servers
    entry = alter(bootstrap, "described", 0.5, key="controller_mutation_rate")
    assert entry.error_code == 0, entry.error_message
    assert describe(bootstrap, "described") == {"controller_mutation_rate": 0.5}
    assert alter(bootstrap, "described", None, key="controller_mutation_rate").error_code == 0
    assert describe(bootstrap, "described") == {}


def test_strict_create_topics_refuses_the_excess_topics_and_they_pass_after_waiting(cluster):
    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "strict", RATE)
    wanted = names("strict", 6)  # 12 partitions against a bucket of 6
    answer, errors = create_raw(bootstrap, "strict", wanted, version=7)
    # 2, 4, 6 partitions: the bucket at 0; the 4th is admitted at 0 (-2); the rest refused
    assert [errors[n] for n in wanted] == [0, 0, 0, 0, 89, 89], errors
    refused = [t for t in answer.topics if t.error_code == THROTTLING_QUOTA_EXCEEDED]
    assert all(t.error_message == "The throttling quota has been exceeded." for t in refused)
    throttle_ms = answer.throttle_time.total_seconds() * 1000
    assert 0 < throttle_ms <= 1000  # 2 tokens owed at 2 per second

    # Another client id has no quota.
    _, free = create_raw(bootstrap, "unlimited", names("free", 6), version=7)
    assert set(free.values()) == {0}

    # The excess topics pass once the client waited (bounded: the throttle each time).
    left = wanted[4:]
    deadline = time.monotonic() + RETRY_S_MAX
    while left:
        assert time.monotonic() < deadline, f"still refused: {left}"
        time.sleep(max(throttle_ms, 100) / 1000)
        answer, errors = create_raw(bootstrap, "strict", left, version=7)
        assert set(errors.values()) <= {0, THROTTLING_QUOTA_EXCEEDED}, errors
        left = [n for n in left if errors[n] != 0]
        throttle_ms = answer.throttle_time.total_seconds() * 1000
    limit(bootstrap, "strict", None)


def test_kafka_python_admin_client_is_strict_and_gets_throttling_quota_exceeded(cluster):
    from kafka.admin import KafkaAdminClient

    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "kafka-python", RATE)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-python")
    try:
        wanted = names("kp", 6)
        topics = {n: {"num_partitions": 2, "replication_factor": 1} for n in wanted}
        # kafka-python sends CreateTopics v7 to this broker (the highest both speak): strict
        answer = admin.create_topics(topics, timeout_ms=10_000, raise_errors=False)
        errors = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert [errors[n] for n in wanted] == [0, 0, 0, 0, 89, 89], errors
        deadline = time.monotonic() + RETRY_S_MAX
        left = wanted[4:]
        while left:  # it passes after waiting (the throttle is at most 1 s here)
            assert time.monotonic() < deadline, f"still refused: {left}"
            time.sleep(1.0)
            answer = admin.create_topics(
                {n: topics[n] for n in left}, timeout_ms=10_000, raise_errors=False
            )
            left = [t["name"] for t in answer["topics"] if t["error_code"] != 0]
    finally:
        admin.close()
    limit(bootstrap, "kafka-python", None)


def test_confluent_kafka_admin_client_is_permissive_admitted_and_throttled(cluster):
    """librdkafka 2.x sends CreateTopics v4: every topic is created, the answer throttled."""
    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "rdkafka", RATE)
    throttles: list[int] = []

    def on_stats(raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "rdkafka",
            "statistics.interval.ms": 200,
            "stats_cb": on_stats,
        }
    )
    wanted = names("rdk", 6)  # 12 partitions against a bucket of 6: 6 owed, 3 s at 2/s
    futures = admin.create_topics([NewTopic(n, 2, 1) for n in wanted], request_timeout=10)
    for future in futures.values():
        future.result(CALL_TIMEOUT_S)  # all created: a permissive client is never refused
    for _ in range(10):  # let the next statistics in, bounded
        admin.poll(0.2)
    assert max(throttles, default=0) > 0
    limit(bootstrap, "rdkafka", None)


def test_permissive_create_topics_is_admitted_and_throttled(cluster):
    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "permissive", RATE)
    wanted = names("perm", 5)  # 10 partitions against 6: all admitted, 4 owed
    answer, errors = create_raw(bootstrap, "permissive", wanted, version=5)
    assert set(errors.values()) == {0}, errors
    throttle_ms = answer.throttle_time.total_seconds() * 1000
    assert 1000 < throttle_ms <= 2000  # 4 tokens owed at 2 per second
    limit(bootstrap, "permissive", None)


def test_validate_only_and_invalid_topics_take_nothing(cluster):
    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "careful", RATE)
    for _ in range(3):  # 3 x 100 partitions, only validated
        _, errors = create_raw(
            bootstrap, "careful", names("v", 1), version=7, partitions=100, validate_only=True
        )
        assert set(errors.values()) == {0}
    _, errors = create_raw(bootstrap, "careful", ["bad name!"], version=7, partitions=100)
    assert errors == {"bad name!": 17}  # INVALID_TOPIC_EXCEPTION, nothing taken
    answer, errors = create_raw(bootstrap, "careful", names("real", 3), version=7)
    assert set(errors.values()) == {0}  # the whole bucket (6) was still there
    assert answer.throttle_time.total_seconds() == 0
    limit(bootstrap, "careful", None)


def test_create_partitions_and_delete_topics_count_partitions(cluster):
    bootstrap = cluster.bootstrap_servers
    topics = names("grow", 2)
    _, errors = create_raw(bootstrap, "grower", topics, version=7, partitions=1)
    assert set(errors.values()) == {0}
    limit(bootstrap, "grower", RATE)

    grow = request(ApiKey.CREATE_PARTITIONS, 3, timeout=TIMEOUT)
    topic_type = entry_type(type(grow), "topics")
    grow = replace(grow, topics=tuple(fill(topic_type, name=t, count=8) for t in topics))
    answer = call(bootstrap, grow, "grower")  # +7 to the first: 6 -> -1; the second refused
    assert [r.error_code for r in answer.results] == [0, THROTTLING_QUOTA_EXCEEDED]
    assert answer.throttle_time.total_seconds() > 0

    time.sleep(1.0)  # -1 + 2 = 1: a deletion is admitted, the next refused
    delete = request(ApiKey.DELETE_TOPICS, 5, topic_names=tuple(topics), timeout=TIMEOUT)
    answer = call(bootstrap, delete, "grower")
    assert [r.error_code for r in answer.responses] == [0, THROTTLING_QUOTA_EXCEEDED]
    limit(bootstrap, "grower", None)


def test_topics_auto_created_by_metadata_drain_the_same_bucket(cluster):
    bootstrap = cluster.bootstrap_servers
    limit(bootstrap, "auto", RATE)
    wanted = names("auto", 7)  # at least 7 partitions (num.partitions each) against 6
    ask = request(ApiKey.METADATA, 12, allow_auto_topic_creation=True)
    topic_type = entry_type(type(ask), "topics")
    ask = replace(ask, topics=tuple(fill(topic_type, name=n) for n in wanted))
    answer = call(bootstrap, ask, "auto")
    # LEADER_NOT_AVAILABLE while being created (or already there: NONE)
    assert {t.error_code for t in answer.topics} <= {0, 5}, answer.topics
    assert answer.throttle_time.total_seconds() == 0  # counted, not throttled (as Kafka)
    _, errors = create_raw(bootstrap, "auto", names("after", 1), version=7)
    assert set(errors.values()) == {THROTTLING_QUOTA_EXCEEDED}
    limit(bootstrap, "auto", None)
