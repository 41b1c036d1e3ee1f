"""A partition whose leadership goes round (moved away by a reassignment, its old leader re-added
as a new replica, then made leader again by a preferred election) keeps replicating: the
follower that led an epoch in which nothing was written drops that epoch and fetches from the
new leader at once, so acks=all writes are acknowledged in milliseconds, with the ISR full.

Before the fix, the follower named that empty epoch as its last fetched one, was told to
diverge, truncated to its own end (a no-op that kept the epoch), and looped until the leader
dropped it from the ISR after ``replica.lag.time.max.ms``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.common.partitions import TopicPartition

pytestmark = pytest.mark.integration

TOPIC = "round-trip"
LAG_TIME_MAX_MS = 20_000  # a stuck follower stays in the ISR this long: the test sees the stall
ACK_BOUND_S = 10.0  # well below LAG_TIME_MAX_MS: acks must not wait for an ISR shrink
WATCH_TIMEOUT_S = 60.0
ADMIN_TIMEOUT_S = 30.0
RECORDS = 200


def _partition(bootstrap: str) -> ops.PartitionInfo:
    async def read() -> ops.ClusterView:
        async with ClusterClient(bootstrap) as client:
            return await ops.cluster.read_cluster(client)

    return asyncio.run(read()).partitions[TopicPartition(TOPIC, 0)]


def _reassign(bootstrap: str, replicas: list[int]) -> None:
    async def move() -> None:
        async with ClusterClient(bootstrap) as client:
            view = await ops.cluster.read_cluster(client)
        plan = ops.Plan.from_targets({TopicPartition(TOPIC, 0): replicas}, view)
        await ops.execute(bootstrap, plan)
        report = await ops.watch(bootstrap, plan, interval_s=0.2, timeout_s=WATCH_TIMEOUT_S)
        assert report.finished, report

    asyncio.run(move())


def _produce(bootstrap: str, records: int) -> list[float]:
    """Ack latencies (s) of ``records`` acks=all records sent one by one."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    latencies: list[float] = []
    failures: list[object] = []
    for _ in range(records):
        sent = time.monotonic()

        def acked(error, _message, sent=sent) -> None:
            if error:
                failures.append(error)
            else:
                latencies.append(time.monotonic() - sent)

        producer.produce(TOPIC, b"x" * 100, on_delivery=acked)
        producer.poll(0.005)
    assert producer.flush(ACK_BOUND_S * 3) == 0, "records left unacknowledged"
    assert not failures, failures
    return latencies


def test_a_leadership_round_trip_keeps_the_follower_fetching(tmp_path, local_cluster):
    overrides = {"replica.lag.time.max.ms": str(LAG_TIME_MAX_MS)}
    with local_cluster(tmp_path / "cluster", brokers=3, broker_overrides=overrides) as state:
        bootstrap = state.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]])
        admin.create_topics([new])[TOPIC].result(timeout=ADMIN_TIMEOUT_S)
        _produce(bootstrap, RECORDS)

        _reassign(bootstrap, [2, 3])  # 1 leaves: 2 leads, in a new epoch
        _reassign(bootstrap, [1, 2])  # 1 comes back as a new replica; 2 still leads
        assert _partition(bootstrap).leader == 2
        failed = asyncio.run(ops.elect_preferred_leaders(bootstrap, [TopicPartition(TOPIC, 0)]))
        assert failed == {}
        assert _partition(bootstrap).leader == 1

        latencies = sorted(_produce(bootstrap, RECORDS))
        assert latencies[-1] < ACK_BOUND_S, f"slowest ack {latencies[-1]:.1f} s"
        after = _partition(bootstrap)
        assert after.leader == 1 and sorted(after.isr) == [1, 2], after
