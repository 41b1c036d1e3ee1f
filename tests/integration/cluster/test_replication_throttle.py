"""Replication throttles on a real three-broker cluster: a follower catching up copies at about
follower.replication.throttled.rate (or leader.replication.throttled.rate on its leader) while
its partition is listed, far faster without; the rates are set and described with
confluent-kafka's AdminClient, and a running broker applies a removed throttle at once."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.common.topics import parse_log_directory_name
from odradek.local import cluster
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "throttled"
KIB = 1024
RATE_BYTES_PER_S = 256 * KIB  # the throttle under test
FETCH_MAX_BYTES = 64 * KIB  # replica.fetch.max.bytes: the throttle's granularity
DATA_BYTES = 4 * 1024 * KIB  # written while the follower is down: 16 s of catch-up throttled
RECORD_BYTES = KIB
MEASURE_S = 5.0  # the catch-up rate is measured over this long
# Generous bounds (the machine is shared): the throttled rate stays between a quarter of the
# limit and twice the limit, and unthrottled it is at least four times the limit.
THROTTLED_MIN_FACTOR = 0.25
THROTTLED_MAX_FACTOR = 2.0
UNTHROTTLED_MIN_FACTOR = 4.0
WAIT_S = 30.0
POLL_S = 0.05
OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "1",  # acks=all goes on while the follower is stopped
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.max.bytes": str(FETCH_MAX_BYTES),
}


@pytest.fixture(scope="module")
def running(tmp_path_factory, local_cluster):
    data_dir = tmp_path_factory.mktemp("throttle")
    with local_cluster(data_dir, brokers=3, broker_overrides=OVERRIDES) as state:
        admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=WAIT_S)
        wait_until(
            lambda: _state(state) is not None and _state(state).leader >= 0, "a leader", WAIT_S
        )
        yield data_dir, state, admin


def _state(state):
    return cluster.partition_state(state, TOPIC, 0)


def _member(state, broker_id):
    return state.member("broker", broker_id)


def _log_bytes(member) -> int:
    """Bytes of the partition's segment files on one broker (replicas copy them byte for byte)."""
    for log_dir in cluster.broker_log_dirs(member):
        if not log_dir.exists():
            continue
        for directory in log_dir.iterdir():
            if parse_log_directory_name(directory.name) == (TOPIC, 0):
                return sum(p.stat().st_size for p in directory.glob("*.log"))
    return 0


def _metric(member, name: str) -> float:
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def _alter(admin, resource_type, name, **settings: str | None) -> None:
    """IncrementalAlterConfigs: SET each key given a value, DELETE each given None."""
    entries = [
        ConfigEntry(
            key.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for key, value in settings.items()
    ]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(WAIT_S)


def _describe(admin, resource_type, name):
    [future] = admin.describe_configs([ConfigResource(resource_type, name)]).values()
    return future.result(WAIT_S)


def _produce(state, total_bytes: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": state.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 16 * KIB,
            "message.timeout.ms": 30_000,
        }
    )
    failures = []
    value = b"x" * RECORD_BYTES
    for _ in range(total_bytes // RECORD_BYTES):
        producer.produce(TOPIC, value, on_delivery=lambda e, m: e and failures.append(e))
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    assert failures == []


def _roles(state) -> tuple[int, int]:
    """(leader, the follower to stop): the last replica, so never the preferred leader."""
    leader = _state(state).leader
    follower = max(b for b in (1, 2, 3) if b != leader)
    return leader, follower


def _catch_up_after_a_stop(
    data_dir, state, follower: int, before_restart=lambda: None
) -> tuple[float, int, int]:
    """Stop ``follower``, write ``DATA_BYTES``, call ``before_restart``, start the follower
    again; then measure how fast it copies.

    Returns (bytes per second it copied over ``MEASURE_S`` from the moment it served again, or
    until it had everything; bytes it held then; bytes the leader holds)."""
    member = _member(state, follower)
    cluster.stop_broker(data_dir, follower)
    wait_until(
        lambda: follower not in _state(state).isr, f"broker {follower} out of the ISR", WAIT_S
    )
    before = _log_bytes(member)
    _produce(state, DATA_BYTES)
    leader_bytes = _log_bytes(_member(state, _state(state).leader))
    assert leader_bytes - before >= DATA_BYTES
    before_restart()
    cluster.restart_broker(data_dir, follower)  # returns once it serves: copying starts now
    start_s = time.monotonic()
    while time.monotonic() - start_s < MEASURE_S and _log_bytes(member) < leader_bytes:
        time.sleep(POLL_S)
    held = _log_bytes(member)
    return (held - before) / (time.monotonic() - start_s), held, leader_bytes


def _unthrottled_s(remaining_bytes: int) -> float:
    """Time the rest may take once the throttle is gone: half what the throttle would need."""
    return max(remaining_bytes / RATE_BYTES_PER_S / 2, 3.0)


def _caught_up(state, follower: int, leader_bytes: int, timeout_s: float = WAIT_S) -> None:
    """Within ``timeout_s``, the follower holds all the leader's bytes, then it is in the ISR."""
    wait_until(
        lambda: _log_bytes(_member(state, follower)) >= leader_bytes,
        f"broker {follower} to catch up",
        timeout_s,
    )
    wait_until(lambda: follower in _state(state).isr, f"broker {follower} back in the ISR", WAIT_S)


def test_a_follower_catching_up_is_held_to_the_follower_rate(running):
    data_dir, state, admin = running
    leader, follower = _roles(state)
    _alter(
        admin,
        ResourceType.BROKER,
        str(follower),
        follower_replication_throttled_rate=str(RATE_BYTES_PER_S),
    )
    _alter(
        admin, ResourceType.TOPIC, TOPIC, follower_replication_throttled_replicas=f"0:{follower}"
    )
    described = _describe(admin, ResourceType.BROKER, str(follower))
    rate = described["follower.replication.throttled.rate"]
    assert (rate.value, rate.source) == (
        str(RATE_BYTES_PER_S),
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    listed = _describe(admin, ResourceType.TOPIC, TOPIC)["follower.replication.throttled.replicas"]
    assert (listed.value, listed.source) == (
        f"0:{follower}",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )

    bytes_per_s, held, leader_bytes = _catch_up_after_a_stop(data_dir, state, follower)
    print(
        f"follower-throttled catch-up: {bytes_per_s / KIB:.0f} KiB/s "
        f"(limit {RATE_BYTES_PER_S // KIB})"
    )
    assert bytes_per_s >= RATE_BYTES_PER_S * THROTTLED_MIN_FACTOR
    assert bytes_per_s <= RATE_BYTES_PER_S * THROTTLED_MAX_FACTOR
    assert held < leader_bytes  # still copying: the limit held it back
    member = _member(state, follower)
    assert _metric(member, 'odradek_replication_throttled_bytes_total{side="follower"}') > 0
    assert (
        _metric(member, 'odradek_replication_throttled_partitions_held_back_total{side="follower"}')
        > 0
    )

    # The running follower applies the removal: the rest comes at full speed.
    _alter(admin, ResourceType.BROKER, str(follower), follower_replication_throttled_rate=None)
    _caught_up(state, follower, leader_bytes, _unthrottled_s(leader_bytes - held))
    _alter(admin, ResourceType.TOPIC, TOPIC, follower_replication_throttled_replicas=None)


def test_a_leader_over_its_rate_holds_back_an_out_of_sync_follower(running):
    """Listed after the writes: the leader counts what it sends for a listed partition to every
    follower, in sync or not, so the writes' own replication would use up the rate first."""
    data_dir, state, admin = running
    leader, follower = _roles(state)

    def throttle_the_leader():
        _alter(
            admin,
            ResourceType.BROKER,
            str(leader),
            leader_replication_throttled_rate=str(RATE_BYTES_PER_S),
        )
        _alter(
            admin, ResourceType.TOPIC, TOPIC, leader_replication_throttled_replicas=f"0:{leader}"
        )

    bytes_per_s, held, leader_bytes = _catch_up_after_a_stop(
        data_dir, state, follower, throttle_the_leader
    )
    print(
        f"leader-throttled catch-up: {bytes_per_s / KIB:.0f} KiB/s "
        f"(limit {RATE_BYTES_PER_S // KIB})"
    )
    assert bytes_per_s >= RATE_BYTES_PER_S * THROTTLED_MIN_FACTOR
    assert bytes_per_s <= RATE_BYTES_PER_S * THROTTLED_MAX_FACTOR
    assert held < leader_bytes
    member = _member(state, leader)
    assert _metric(member, 'odradek_replication_throttled_bytes_total{side="leader"}') > 0
    assert (
        _metric(member, 'odradek_replication_throttled_partitions_held_back_total{side="leader"}')
        > 0
    )

    _alter(admin, ResourceType.BROKER, str(leader), leader_replication_throttled_rate=None)
    _caught_up(state, follower, leader_bytes, _unthrottled_s(leader_bytes - held))
    _alter(admin, ResourceType.TOPIC, TOPIC, leader_replication_throttled_replicas=None)


def test_without_a_throttle_the_catch_up_is_much_faster(running):
    data_dir, state, admin = running
    _, follower = _roles(state)
    bytes_per_s, _, leader_bytes = _catch_up_after_a_stop(data_dir, state, follower)
    print(f"unthrottled catch-up: {bytes_per_s / KIB:.0f} KiB/s")
    assert bytes_per_s >= RATE_BYTES_PER_S * UNTHROTTLED_MIN_FACTOR
    _caught_up(state, follower, leader_bytes)
