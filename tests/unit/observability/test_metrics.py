"""Metric holders register Kafka-named series on their own registry, move, and stay bounded."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek import __version__
from odradek.errors import ErrorCode
from odradek.observability.metrics import (
    OVERFLOW_LABEL,
    REQUEST_LATENCY_BUCKETS_S,
    broker_metrics,
    common_metrics,
    controller_metrics,
    new_registry,
)


def sample(registry, name: str, **labels: str) -> float | None:
    """The value of one sample, or None if the registry has no such series."""
    return registry.get_sample_value(name, labels)


def test_broker_counters_move_per_topic():
    registry = new_registry()
    metrics = broker_metrics(registry)
    metrics.record_produce("events", bytes_in=1000, messages_in=10)
    metrics.record_produce("events", bytes_in=500, messages_in=5)
    metrics.record_fetch("events", bytes_out=700, messages_out=7)
    metrics.record_produce("clicks", bytes_in=1, messages_in=1)

    assert sample(registry, "odradek_broker_bytes_in_total", topic="events") == 1500
    assert sample(registry, "odradek_broker_messages_in_total", topic="events") == 15
    assert sample(registry, "odradek_broker_bytes_out_total", topic="events") == 700
    assert sample(registry, "odradek_broker_messages_out_total", topic="events") == 7
    assert sample(registry, "odradek_broker_bytes_in_total", topic="clicks") == 1


def test_requests_are_counted_per_api_and_error():
    registry = new_registry()
    metrics = broker_metrics(registry)
    metrics.observe_request("Produce", 0.0004)
    metrics.observe_request("Produce", 0.002, ErrorCode.not_leader_or_follower)
    metrics.observe_request("Fetch", 0.5)

    assert sample(registry, "odradek_requests_total", api="Produce", error="none") == 1
    assert (
        sample(registry, "odradek_requests_total", api="Produce", error="not_leader_or_follower")
        == 1
    )
    assert sample(registry, "odradek_request_latency_seconds_count", api="Produce") == 2
    assert sample(registry, "odradek_request_latency_seconds_bucket", api="Fetch", le="0.5") == 1
    assert sample(registry, "odradek_request_latency_seconds_bucket", api="Fetch", le="0.25") == 0


def test_latency_buckets_span_a_tenth_of_a_millisecond_to_ten_seconds():
    assert REQUEST_LATENCY_BUCKETS_S[0] == 0.0001
    assert REQUEST_LATENCY_BUCKETS_S[-1] == 10.0
    assert list(REQUEST_LATENCY_BUCKETS_S) == sorted(set(REQUEST_LATENCY_BUCKETS_S))


def test_gauges_start_at_zero_and_are_set_directly():
    registry = new_registry()
    metrics = broker_metrics(registry)
    for name in (
        "partitions",
        "leader_partitions",
        "under_replicated_partitions",
        "offline_partitions",
        "offline_log_dirs",
    ):
        assert sample(registry, f"odradek_broker_{name}") == 0
    metrics.partitions.set(12)
    metrics.leader_partitions.set(4)
    metrics.connections.labels(listener="PLAINTEXT").inc()
    assert sample(registry, "odradek_broker_partitions") == 12
    assert sample(registry, "odradek_broker_leader_partitions") == 4
    assert sample(registry, "odradek_connections", listener="PLAINTEXT") == 1


def test_topics_beyond_the_budget_share_the_overflow_series():
    registry = new_registry()
    metrics = broker_metrics(registry, topic_labels_max=2)
    for topic in ("a", "b", "c", "d"):
        metrics.record_produce(topic, bytes_in=10, messages_in=1)

    assert sample(registry, "odradek_broker_bytes_in_total", topic="a") == 10
    assert sample(registry, "odradek_broker_bytes_in_total", topic="c") is None
    assert sample(registry, "odradek_broker_bytes_in_total", topic=OVERFLOW_LABEL) == 20


def test_removing_a_topic_drops_its_series_and_frees_its_slot():
    registry = new_registry()
    metrics = broker_metrics(registry, topic_labels_max=1)
    metrics.record_produce("old", bytes_in=10, messages_in=1)
    metrics.remove_topic("old")
    metrics.remove_topic("never-seen")
    metrics.record_produce("new", bytes_in=3, messages_in=1)

    assert sample(registry, "odradek_broker_bytes_in_total", topic="old") is None
    assert sample(registry, "odradek_broker_bytes_in_total", topic="new") == 3


def test_apis_beyond_the_budget_share_the_overflow_series():
    registry = new_registry()
    metrics = broker_metrics(registry, api_labels_max=1)
    metrics.observe_request("Produce", 0.001)
    metrics.observe_request("Bogus", 0.001, ErrorCode.unsupported_version)

    assert sample(registry, "odradek_requests_total", api="Produce", error="none") == 1
    assert (
        sample(registry, "odradek_requests_total", api=OVERFLOW_LABEL, error="unsupported_version")
        == 1
    )


def test_controller_gauges():
    registry = new_registry()
    metrics = controller_metrics(registry)
    assert sample(registry, "odradek_controller_active") == 0
    metrics.active.set(1)
    metrics.epoch.set(7)
    metrics.live_brokers.set(3)
    assert sample(registry, "odradek_controller_active") == 1
    assert sample(registry, "odradek_controller_epoch") == 7
    assert sample(registry, "odradek_controller_live_brokers") == 3
    assert sample(registry, "odradek_controller_offline_partitions") == 0


def test_zookeeper_session_state_has_exactly_one_current_state():
    registry = new_registry()
    metrics = common_metrics(registry)

    def states() -> dict[str, float]:
        return {
            s: sample(registry, "odradek_zookeeper_session_state", state=s)
            for s in ("connected", "suspended", "lost")
        }

    assert states() == {"connected": 0, "suspended": 0, "lost": 1}
    metrics.set_zookeeper_session_state("CONNECTED")  # kazoo's KazooState.CONNECTED
    assert states() == {"connected": 1, "suspended": 0, "lost": 0}
    assert metrics.zookeeper_session_state == "connected"
    with pytest.raises(ValueError, match="unknown state"):
        metrics.set_zookeeper_session_state("expired")


def test_build_info_and_process_metrics():
    registry = new_registry()
    common_metrics(registry, version="1.2.3")
    assert sample(registry, "odradek_build_info", version="1.2.3") == 1
    assert sample(registry, "process_resident_memory_bytes") > 0
    registry = new_registry()
    common_metrics(registry)
    assert sample(registry, "odradek_build_info", version=__version__) == 1


def test_every_metric_has_help_text_and_the_odradek_prefix():
    # A broker's and a controller's registries (both hold the connection quotas' counters).
    broker, controller = new_registry(), new_registry()
    common_metrics(broker)
    broker_metrics(broker)
    controller_metrics(controller)
    families = [
        family
        for registry in (broker, controller)
        for family in text_string_to_metric_families(generate_latest(registry).decode())
    ]
    # prometheus_client adds a "<name>_created" family to unlabelled histograms in text format.
    ours = {
        f.name: f
        for f in families
        if not f.name.startswith("process_") and not f.name.endswith("_created")
    }
    # Counter families are named without "_total"; their samples carry it.
    assert set(ours) == {
        "odradek_broker_under_min_isr_partitions",
        "odradek_controller_clean_leader_elections",
        "odradek_controller_controlled_shutdowns",
        "odradek_controller_controlled_shutdown_unmoved_partitions",
        "odradek_controller_shutting_down_brokers",
        "odradek_broker_isr_expands",
        "odradek_broker_isr_shrinks",
        "odradek_broker_reassignment_bytes_in",
        "odradek_broker_purgatory_size",
        "odradek_broker_replica_max_lag",
        "odradek_broker_replica_lag",
        "odradek_broker_bytes_in",
        "odradek_broker_bytes_out",
        "odradek_broker_messages_in",
        "odradek_broker_messages_out",
        "odradek_request_latency_seconds",
        "odradek_requests",
        "odradek_broker_partitions",
        "odradek_broker_replica_budget",
        "odradek_broker_replicas_unloaded",
        "odradek_broker_leader_partitions",
        "odradek_broker_under_replicated_partitions",
        "odradek_broker_offline_partitions",
        "odradek_broker_offline_log_dirs",
        "odradek_broker_log_dir_moves",
        "odradek_broker_log_dir_move_bytes",
        "odradek_connections",
        "odradek_connections_closed",
        "odradek_connections_rejected",
        "odradek_connection_accept_throttle_seconds",
        "odradek_connections_evicted",
        "odradek_sasl_authentications",
        "odradek_broker_request_memory_used_bytes",
        "odradek_broker_requests_queued",
        "odradek_event_loop_lag_seconds",
        "odradek_event_loop_lag_last_seconds",
        "odradek_broker_refused_controller_requests",
        "odradek_controller_active",
        "odradek_controller_epoch",
        "odradek_controller_live_brokers",
        "odradek_controller_offline_partitions",
        "odradek_controller_preferred_replica_imbalance",
        "odradek_controller_unclean_leader_elections",
        "odradek_controller_reassigning_partitions",
        "odradek_controller_reassignments_completed",
        "odradek_controller_reassignments_cancelled",
        "odradek_zookeeper_session_state",
        "odradek_build_info",
    }
    for family in ours.values():
        assert family.documentation, family.name


def test_two_registries_in_one_process_do_not_collide():
    first, second = new_registry(), new_registry()
    metrics_one = broker_metrics(first)
    metrics_two = broker_metrics(second)
    common_metrics(first)
    common_metrics(second)
    metrics_one.record_produce("events", bytes_in=5, messages_in=1)

    assert sample(first, "odradek_broker_bytes_in_total", topic="events") == 5
    assert sample(second, "odradek_broker_bytes_in_total", topic="events") is None
    metrics_two.record_produce("events", bytes_in=2, messages_in=1)
    assert sample(first, "odradek_broker_bytes_in_total", topic="events") == 5


def test_the_same_holder_twice_on_one_registry_is_refused():
    registry = new_registry()
    broker_metrics(registry)
    common_metrics(registry)
    with pytest.raises(ValueError, match="Duplicated"):
        broker_metrics(registry)
    with pytest.raises(ValueError, match="Duplicated"):
        common_metrics(registry)
