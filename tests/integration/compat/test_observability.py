"""Every member answers /healthz, /readyz and /metrics, and the metrics match what clients did."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from support.waiting import wait_until

pytestmark = pytest.mark.integration

TIMEOUT_S = 20
PARTITIONS = 6
PRODUCED = 1_234


def get(member, path):
    with urllib.request.urlopen(f"http://{member.admin}{path}", timeout=5) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def scrape(member) -> dict[str, list]:
    """Family name -> samples, parsed by prometheus_client's own parser."""
    status, content_type, body = get(member, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(body.decode())}


def value(families, family, sample_name=None, **labels) -> float | None:
    for sample in families.get(family, []):
        if sample_name is not None and sample.name != sample_name:
            continue
        if all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


@pytest.fixture
def served(cluster_state):
    """Members with an admin port: every controller and every broker (ZooKeeper has none)."""
    members = [m for m in cluster_state.members if m.admin]
    assert sorted(m.role for m in members) == ["broker"] * 3 + ["controller"]
    return members


def test_health_readiness_and_metrics_on_every_member(served):
    for member in served:
        assert get(member, "/healthz")[0] == 200, member
        status, content_type, body = get(member, "/readyz")
        assert (status, json.loads(body)) == (200, {"ready": True, "reasons": []}), member
        assert content_type.startswith("application/json")
        families = scrape(member)
        ours = [name for name in families if name.startswith("odradek_")]
        assert "odradek_build_info" in ours and "odradek_zookeeper_session_state" in ours
        if member.role == "broker":
            for name in (
                "odradek_broker_messages_in",
                "odradek_broker_bytes_in",
                "odradek_broker_partitions",
                "odradek_broker_leader_partitions",
                "odradek_broker_under_replicated_partitions",
                "odradek_request_latency_seconds",
                "odradek_connections",
            ):
                assert name in families, (member.role, member.id, name)
        else:
            assert "odradek_controller_active" in families


def test_exactly_one_active_controller_and_every_zookeeper_session_connected(served):
    active = []
    for member in served:
        families = scrape(member)
        session = {s.labels["state"]: s.value for s in families["odradek_zookeeper_session_state"]}
        assert session == {"connected": 1.0, "suspended": 0.0, "lost": 0.0}, member
        if member.role == "controller" and value(families, "odradek_controller_active") == 1.0:
            active.append(member.id)
            assert value(families, "odradek_controller_live_brokers") == 3.0
    assert len(active) == 1


@pytest.fixture
def produced_topic(bootstrap, wait_for_topic, topic_name):
    """A fresh 6-partition topic, every broker leading some of it, with PRODUCED records."""
    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10
    ).values()
    future.result(TIMEOUT_S)
    leaders = wait_for_topic(topic, PARTITIONS)
    assert set(leaders.values()) == {1, 2, 3}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(PRODUCED):
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 100, partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    return topic, leaders


def consume_all(bootstrap, topic) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compat-assign-only",
            # No commits: the broker serves no group coordinator yet, and librdkafka's close()
            # would wait ~45 s trying to find one to commit to.
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        received = 0
        deadline = time.monotonic() + TIMEOUT_S
        while received < PRODUCED and time.monotonic() < deadline:
            received += sum(1 for m in consumer.consume(500, timeout=0.2) if m.error() is None)
        return received
    finally:
        consumer.close()


def per_broker(brokers, family, topic):
    """broker id -> the ``topic``'s counter value there (0 when it has no series)."""
    return {m.id: value(scrape(m), family, f"{family}_total", topic=topic) or 0.0 for m in brokers}


def test_messages_and_bytes_in_per_topic_add_up(bootstrap, served, produced_topic):
    topic, leaders = produced_topic
    brokers = [m for m in served if m.role == "broker"]
    messages_in = per_broker(brokers, "odradek_broker_messages_in", topic)
    assert sum(messages_in.values()) == PRODUCED
    # Each broker counted what it leads: partition p got the records i with i % 6 == p.
    expected = {m.id: 0.0 for m in brokers}
    for i in range(PRODUCED):
        expected[leaders[i % PARTITIONS]] += 1
    assert messages_in == expected
    assert sum(per_broker(brokers, "odradek_broker_bytes_in", topic).values()) > PRODUCED * 100

    assert consume_all(bootstrap, topic) == PRODUCED
    bytes_out = per_broker(brokers, "odradek_broker_bytes_out", topic)
    assert all(bytes_out[m.id] > 0 for m in brokers)
    assert sum(bytes_out.values()) >= sum(
        per_broker(brokers, "odradek_broker_bytes_in", topic).values()
    )
    for m in brokers:
        families = scrape(m)
        for api in ("Produce", "Fetch", "Metadata"):
            count = value(
                families,
                "odradek_request_latency_seconds",
                "odradek_request_latency_seconds_count",
                api=api,
            )
            assert count and count > 0, (m.id, api)


def test_messages_out_per_topic_adds_up(bootstrap, served, produced_topic):
    topic, _ = produced_topic
    brokers = [m for m in served if m.role == "broker"]
    assert consume_all(bootstrap, topic) == PRODUCED
    messages_out = per_broker(brokers, "odradek_broker_messages_out", topic)
    # One consumer read every record once (a refetch could only add to it).
    assert sum(messages_out.values()) >= PRODUCED


def test_partition_gauges_match_the_metadata(bootstrap, served):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = [m for m in served if m.role == "broker"]

    def consistent():
        metadata = admin.list_topics(timeout=10)
        led = {m.id: 0 for m in brokers}
        hosted = {m.id: 0 for m in brokers}  # __consumer_offsets has replicas on every broker
        for described in metadata.topics.values():
            for partition in described.partitions.values():
                led[partition.leader] += 1
                for replica in partition.replicas:
                    hosted[replica] += 1
        gauges = {}
        for m in brokers:
            families = scrape(m)
            gauges[m.id] = (
                value(families, "odradek_broker_leader_partitions"),
                value(families, "odradek_broker_partitions"),
                value(families, "odradek_broker_under_replicated_partitions"),
            )
        expected = {b: (float(n), float(hosted[b]), 0.0) for b, n in led.items()}
        return gauges == expected or None

    # Other tests may still be deleting topics: let the cluster settle, with a bound.
    wait_until(
        consistent, "partition gauges equal to the leaders in Metadata", TIMEOUT_S, poll_s=0.1
    )
