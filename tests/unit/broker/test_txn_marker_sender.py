"""The transaction marker sender against scripted brokers: markers to one leader go in one
request, a moved leader is found again, a fenced coordinator's marker is dropped without
completing, a resigned owner's markers are never completed, a deleted partition is left out."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable

import pytest
from kio.schema.write_txn_markers.v1 import response as wire
from prometheus_client import CollectorRegistry

from odradek.broker import txn_markers
from odradek.broker.metadata_cache import (
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.txn_markers import TxnMarkerSender
from odradek.client.errors import ConnectionClosedError
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode
from odradek.observability.metrics import txn_marker_metrics
from odradek.transactions.result import TxnMarker

LISTENER = "PLAINTEXT"
TIMEOUT_S = 10

Answer = Callable[[int, tuple[str, int]], ErrorCode]


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(txn_markers, "RETRY_BACKOFF_S_FIRST", 0.01)
    monkeypatch.setattr(txn_markers, "RETRY_BACKOFF_S_MAX", 0.02)


class FakeBroker:
    """Answers each partition of each marker with ``answer(producer_id, tp)``; records what it
    was sent. ``gate``, when set, holds every answer until it is opened."""

    def __init__(self, broker_id: int, answer: Answer | None = None):
        self.broker_id = broker_id
        self.answer: Answer = answer or (lambda pid, tp: ErrorCode.none)
        self.requests: list = []
        self.gate: asyncio.Event | None = None
        self.connects = 0
        self.refuse_connects = 0
        self.fail_sends = 0

    @property
    def port(self) -> int:
        return 9000 + self.broker_id

    def written(self) -> list[tuple[int, str, int]]:
        return [
            (m.producer_id, t.name, p)
            for r in self.requests
            for m in r.markers
            for t in m.topics
            for p in t.partition_indexes
        ]

    async def handle(self, request):
        self.requests.append(request)
        if self.gate is not None:
            await self.gate.wait()
        return wire.WriteTxnMarkersResponse(
            markers=tuple(
                wire.WritableTxnMarkerResult(
                    producer_id=m.producer_id,
                    topics=tuple(
                        wire.WritableTxnMarkerTopicResult(
                            name=t.name,
                            partitions=tuple(
                                wire.WritableTxnMarkerPartitionResult(
                                    partition_index=p,
                                    error_code=self.answer(m.producer_id, (t.name, p)),
                                )
                                for p in t.partition_indexes
                            ),
                        )
                        for t in m.topics
                    ),
                )
                for m in request.markers
            )
        )


class FakeConnection:
    def __init__(self, broker: FakeBroker):
        self.broker = broker
        self.closed = False

    async def send(self, request):
        if self.broker.fail_sends:
            self.broker.fail_sends -= 1
            raise RuntimeError("a bug in the sender's path")
        return await self.broker.handle(request)

    async def close(self) -> None:
        self.closed = True


class Cluster:
    def __init__(self, *broker_ids: int):
        self.brokers = {b: FakeBroker(b) for b in broker_ids}
        self.metadata = MetadataCache("c")
        self.metadata.update_brokers(
            [
                LiveBroker(b.broker_id, {LISTENER: HostPort("127.0.0.1", b.port)})
                for b in self.brokers.values()
            ]
        )

    def lead(self, topic: str, leaders: dict[int, int]) -> None:
        self.metadata.update_topic(
            TopicMetadata(
                topic,
                uuid.uuid4(),
                {
                    p: PartitionMetadata(p, leader, 0, tuple(self.brokers), tuple(self.brokers))
                    for p, leader in leaders.items()
                },
            )
        )

    async def connect(self, host: str, port: int):
        broker = self.brokers[port - 9000]
        broker.connects += 1
        if broker.refuse_connects:
            broker.refuse_connects -= 1
            raise ConnectionClosedError(f"cannot connect to {host}:{port}")
        return FakeConnection(broker)

    def sender(self, registry: CollectorRegistry | None = None) -> TxnMarkerSender:
        metrics = txn_marker_metrics(registry) if registry is not None else None
        return TxnMarkerSender(self.metadata, LISTENER, connect=self.connect, metrics=metrics)


def marker(pid: int, *partitions: tuple[str, int], committed: bool = True) -> TxnMarker:
    return TxnMarker(f"txn-{pid}", pid, 0, committed, 3, tuple(partitions))


class Completions:
    def __init__(self):
        self.done: list[TxnMarker] = []
        self.changed = asyncio.Event()

    async def __call__(self, m: TxnMarker) -> None:
        self.done.append(m)
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT_S):
            while len(self.done) < count:
                self.changed.clear()
                await self.changed.wait()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


def test_markers_for_one_leader_go_in_one_request():
    async def scenario():
        cluster = Cluster(1, 2)
        cluster.lead("t", {0: 1, 1: 2, 2: 1})
        sender = cluster.sender(registry := CollectorRegistry())
        done = Completions()
        for pid in (10, 11, 12):
            sender.submit(marker(pid, ("t", 0), ("t", 1), ("t", 2)), done, owner=0)
        assert registry.get_sample_value("odradek_broker_txn_markers_pending") == 3
        await done.wait_for(3)
        await sender.close()
        return cluster, done, registry

    cluster, done, registry = asyncio.run(scenario())
    one, two = cluster.brokers[1], cluster.brokers[2]
    assert len(one.requests) == 1 and len(two.requests) == 1
    assert sorted(one.written()) == [(pid, "t", p) for pid in (10, 11, 12) for p in (0, 2)]
    assert sorted(two.written()) == [(pid, "t", 1) for pid in (10, 11, 12)]
    assert [m.producer_id for m in done.done] == [10, 11, 12]
    assert (one.connects, two.connects) == (1, 1)  # one connection per destination
    assert one.requests[0].markers[0].coordinator_epoch == 3
    assert registry.get_sample_value("odradek_broker_txn_markers_pending") == 0
    assert registry.get_sample_value("odradek_broker_txn_markers_written_total") == 3


def test_two_markers_of_one_producer_never_share_a_request():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: 1})
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0), committed=False), done, owner=0)
        sender.submit(marker(10, ("t", 0)), done, owner=1)
        await done.wait_for(2)
        await sender.close()
        return cluster

    cluster = asyncio.run(scenario())
    requests = cluster.brokers[1].requests
    assert [len(r.markers) for r in requests] == [1, 1]
    assert [r.markers[0].transaction_result for r in requests] == [False, True]


def test_not_leader_is_retried_at_the_moved_leader():
    async def scenario():
        cluster = Cluster(1, 2)
        cluster.lead("t", {0: 1})
        old = cluster.brokers[1]
        old.answer = lambda pid, tp: ErrorCode.not_leader_or_follower
        sender = cluster.sender(registry := CollectorRegistry())
        done = Completions()
        sender.submit(marker(10, ("t", 0)), done, owner=0)
        async with asyncio.timeout(TIMEOUT_S):
            while len(old.requests) < 2:  # it keeps asking the old leader meanwhile
                await asyncio.sleep(0.005)
        assert not done.done
        cluster.lead("t", {0: 2})
        await done.wait_for(1)
        await sender.close()
        return cluster, registry

    cluster, registry = asyncio.run(scenario())
    assert cluster.brokers[2].written() == [(10, "t", 0)]
    errors = registry.get_sample_value(
        "odradek_broker_txn_marker_errors_total", {"error": "not_leader_or_follower"}
    )
    assert errors >= 2


def test_unknown_leader_refused_connections_and_failures_are_retried():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: -1})  # no leader elected yet
        cluster.brokers[1].refuse_connects = 2
        cluster.brokers[1].fail_sends = 1
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0)), done, owner=0)
        await settle()
        assert not cluster.brokers[1].requests
        cluster.lead("t", {0: 1})
        await done.wait_for(1)
        await sender.close()
        return cluster

    cluster = asyncio.run(scenario())
    assert cluster.brokers[1].connects == 4  # and once more after the failed send
    assert cluster.brokers[1].written() == [(10, "t", 0)]


def test_a_fenced_coordinator_drops_the_whole_marker():
    async def scenario():
        cluster = Cluster(1, 2)
        cluster.lead("t", {0: 1, 1: 2})
        one, two = cluster.brokers[1], cluster.brokers[2]
        one.answer = lambda pid, tp: ErrorCode.transaction_coordinator_fenced
        two.answer = lambda pid, tp: ErrorCode.not_leader_or_follower
        one.gate, two.gate = asyncio.Event(), asyncio.Event()
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0), ("t", 1)), done, owner=0)
        async with asyncio.timeout(TIMEOUT_S):
            while not (one.requests and two.requests):
                await asyncio.sleep(0.005)
        one.gate.set()  # t-0 is fenced first, while t-1's answer is still in flight
        async with asyncio.timeout(TIMEOUT_S):
            while sender.pending_count:
                await asyncio.sleep(0.005)
        two.gate.set()
        await settle()
        await sender.close()
        return cluster, done

    cluster, done = asyncio.run(scenario())
    assert done.done == []  # never completed: the newer coordinator finishes the transaction
    assert len(cluster.brokers[1].requests) == 1
    assert len(cluster.brokers[2].requests) == 1  # its NOT_LEADER answer is not retried


def test_cancel_owner_drops_its_markers_and_ignores_answers_in_flight():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: 1, 1: 1})
        broker = cluster.brokers[1]
        broker.gate = asyncio.Event()
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0)), done, owner=0)
        async with asyncio.timeout(TIMEOUT_S):
            while not broker.requests:
                await asyncio.sleep(0.005)
        # queued behind the request in flight: owner 0's is never sent, owner 1's is
        sender.submit(marker(11, ("t", 1)), done, owner=0)
        sender.submit(marker(12, ("t", 1)), done, owner=1)
        sender.cancel_owner(0)
        assert sender.pending_count == 1
        broker.gate.set()
        await done.wait_for(1)
        await settle()
        await sender.close()
        return broker, done

    broker, done = asyncio.run(scenario())
    assert [m.producer_id for m in done.done] == [12]
    assert sorted(broker.written()) == [(10, "t", 0), (12, "t", 1)]


def test_a_deleted_partition_is_left_out():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: 1, 1: 1})
        cluster.lead("gone", {0: 1})
        broker = cluster.brokers[1]
        broker.answer = lambda pid, tp: (
            ErrorCode.unknown_topic_or_partition if tp[0] == "gone" else ErrorCode.none
        )
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0), ("gone", 0)), done, owner=0)
        async with asyncio.timeout(TIMEOUT_S):  # the metadata still has it: retried
            while len(broker.requests) < 3:
                await asyncio.sleep(0.005)
        assert not done.done
        cluster.metadata.remove_topic("gone")
        await done.wait_for(1)
        # never in the metadata at all: not even sent
        sender.submit(marker(11, ("t", 1), ("never", 0)), done, owner=0)
        await done.wait_for(2)
        await sender.close()
        return broker

    broker = asyncio.run(scenario())
    assert (11, "never", 0) not in broker.written()
    assert (11, "t", 1) in broker.written()


def test_a_marker_submitted_again_while_pending_is_written_once():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: 1})
        broker = cluster.brokers[1]
        broker.gate = asyncio.Event()
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0)), done, owner=0)
        async with asyncio.timeout(TIMEOUT_S):
            while not broker.requests:
                await asyncio.sleep(0.005)
        sender.submit(marker(10, ("t", 0)), done, owner=0)  # the coordinator's timer, say
        broker.gate.set()
        await done.wait_for(1)
        await settle()
        await sender.close()
        return broker, done

    broker, done = asyncio.run(scenario())
    assert broker.written() == [(10, "t", 0)]
    assert len(done.done) == 1


def test_close_stops_everything_and_later_submits_do_nothing():
    async def scenario():
        cluster = Cluster(1)
        cluster.lead("t", {0: 1})
        cluster.brokers[1].gate = asyncio.Event()  # never answers
        sender = cluster.sender()
        done = Completions()
        sender.submit(marker(10, ("t", 0)), done, owner=0)
        await settle()
        await asyncio.wait_for(sender.close(), TIMEOUT_S)
        sender.submit(marker(11, ("t", 0)), done, owner=0)
        await settle()
        return cluster, sender, done

    cluster, sender, done = asyncio.run(scenario())
    assert sender.pending_count == 0 and done.done == []
    assert len(cluster.brokers[1].requests) == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_under_moving_leaders_and_failures_every_marker_completes_once_after_all_writes(seed):
    """Leaders move and brokers fail at random (seeded); each marker is completed exactly once,
    and only once every one of its partitions has been written at its leader of the moment."""
    rng = random.Random(seed)
    partitions = [(t, p) for t in ("a", "b") for p in range(4)]

    async def scenario():
        cluster = Cluster(1, 2, 3)
        leaders = {tp: rng.choice((1, 2, 3)) for tp in partitions}

        def publish() -> None:
            for topic in ("a", "b"):
                cluster.lead(topic, {p: leaders[(topic, p)] for p in range(4)})

        publish()
        written: set[tuple[int, tuple[str, int]]] = set()
        for broker in cluster.brokers.values():

            def answer(pid, tp, broker_id=broker.broker_id):
                if leaders[tp] != broker_id:
                    return ErrorCode.not_leader_or_follower
                if rng.random() < 0.2:
                    return rng.choice((ErrorCode.request_timed_out, ErrorCode.not_enough_replicas))
                written.add((pid, tp))
                return ErrorCode.none

            broker.answer = answer
            broker.fail_sends = rng.randrange(3)
            broker.refuse_connects = rng.randrange(2)
        sender = cluster.sender()
        completed: list[TxnMarker] = []
        complete_at: dict[int, bool] = {}

        async def on_written(m: TxnMarker) -> None:
            complete_at[m.producer_id] = all((m.producer_id, tp) in written for tp in m.partitions)
            completed.append(m)

        markers = [
            marker(pid, *rng.sample(partitions, rng.randrange(1, 5)), committed=rng.random() < 0.5)
            for pid in range(40)
        ]
        for m in markers:
            sender.submit(m, on_written, owner=0)
            if rng.random() < 0.3:
                sender.submit(m, on_written, owner=0)  # re-driven meanwhile
        for _ in range(30):  # leaders move while the markers go out; then they settle
            await asyncio.sleep(0.01)
            leaders[rng.choice(partitions)] = rng.choice((1, 2, 3))
            publish()
        async with asyncio.timeout(TIMEOUT_S):
            while len(completed) < len(markers):
                await asyncio.sleep(0.01)
        await settle()
        await sender.close()
        return markers, completed, complete_at

    markers, completed, complete_at = asyncio.run(scenario())
    assert sorted(m.producer_id for m in completed) == [m.producer_id for m in markers]
    assert all(complete_at.values()), [pid for pid, ok in complete_at.items() if not ok]
