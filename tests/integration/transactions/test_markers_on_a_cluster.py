"""Transaction markers on a real 3-broker cluster: the marker sender writes COMMIT and ABORT
markers through WriteTxnMarkers, a read_committed consumer (librdkafka) then sees committed data
only and stops at an open transaction; followers replicate the markers with their producer
state, so after kill -9 of the leader the new leader has the same LSO, aborted transactions and
coordinator epochs, and the sender finds it (after a refused connection to the dead one).

Producers' transactional batches are accepted here through a test-only hook
(``txn_site/sitecustomize.py``), since clients may not write them before the coordinator exists.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.init_producer_id.v4 import request as init_request
from kio.schema.list_offsets.v7 import request as list_request
from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.produce.v9 import request as produce_request
from kio.schema.write_txn_markers.v1 import request as markers_request
from prometheus_client import CollectorRegistry

from odradek.broker.metadata_cache import (
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.txn_markers import TxnMarkerSender
from odradek.client.connection import BrokerConnection
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode
from odradek.local import cluster
from odradek.local.cluster import ClusterState, pid_alive
from odradek.observability.metrics import txn_marker_metrics
from odradek.storage.records import Record, encode_batch
from odradek.transactions.result import TxnMarker
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TOPIC = "txn"
SITE = Path(__file__).parent / "txn_site"
WAIT_S = 30.0
NOW_MS = 1_700_000_000_000
COORDINATOR_EPOCH = 1


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ClusterState]]:
    data_dir = tmp_path_factory.mktemp("txn-cluster")
    path = os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")]))
    with pytest.MonkeyPatch.context() as patch:  # the brokers inherit it; this process not
        patch.setenv("PYTHONPATH", path)
        try:
            state, started = cluster.up(data_dir, brokers=3)
        except BaseException:
            cluster.down(data_dir)
            raise
    try:
        assert started, f"a cluster was already running in {data_dir}"
        yield data_dir, state
    finally:
        cluster.down(data_dir)
        alive = [m for m in (ClusterState.read(data_dir) or state).members if pid_alive(m.pid)]
        assert not alive, f"still running after down: {alive}"


# -- the wire, through odradek's client ---------------------------------------------------------


def _address(state: ClusterState, broker_id: int) -> HostPort:
    host, port = state.member("broker", broker_id).address.rsplit(":", 1)
    return HostPort(host, int(port))


async def _send(address: HostPort, request):
    async with await BrokerConnection.open(address.host, address.port) as connection:
        return await connection.send(request)


def send(address: HostPort, request):
    return asyncio.run(asyncio.wait_for(_send(address, request), WAIT_S))


def producer_id(address: HostPort) -> int:
    response = send(
        address,
        init_request.InitProducerIdRequest(
            transactional_id=None, transaction_timeout=timedelta(seconds=60)
        ),
    )
    assert response.error_code == ErrorCode.none
    assert response.producer_epoch == 0
    return response.producer_id


def produce(address: HostPort, values: list[bytes], pid: int | None = None) -> None:
    batch = encode_batch(
        [Record(i, NOW_MS, b"k", v) for i, v in enumerate(values)],
        base_offset=0,
        producer_id=-1 if pid is None else pid,
        producer_epoch=-1 if pid is None else 0,
        base_sequence=-1 if pid is None else 0,
        is_transactional=pid is not None,
    )
    response = send(
        address,
        produce_request.ProduceRequest(
            acks=-1,
            timeout=timedelta(seconds=10),
            topic_data=(
                produce_request.TopicProduceData(
                    name=TOPIC,
                    partition_data=(produce_request.PartitionProduceData(index=0, records=batch),),
                ),
            ),
        ),
    )
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.none, partition


def end_offset(address: HostPort, *, committed: bool) -> int:
    """ListOffsets latest: the LSO with read_committed, else the high watermark."""
    response = send(
        address,
        list_request.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=1 if committed else 0,
            topics=(
                list_request.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=(
                        list_request.ListOffsetsPartition(partition_index=0, timestamp=-1),
                    ),
                ),
            ),
        ),
    )
    (partition,) = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none, partition
    return partition.offset


def write_marker(address: HostPort, pid: int, *, committed: bool, coordinator_epoch: int):
    response = send(
        address,
        markers_request.WriteTxnMarkersRequest(
            markers=(
                markers_request.WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=0,
                    transaction_result=committed,
                    topics=(
                        markers_request.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),
                    ),
                    coordinator_epoch=coordinator_epoch,
                ),
            )
        ),
    )
    return response.markers[0].topics[0].partitions[0].error_code


def refresh(metadata: MetadataCache, address: HostPort) -> None:
    """What UpdateMetadata gives a broker's cache: brokers and the topic, from Metadata."""
    response = send(
        address,
        metadata_request.MetadataRequest(
            topics=(metadata_request.MetadataRequestTopic(topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    metadata.update_brokers(
        [LiveBroker(b.node_id, {"PLAINTEXT": HostPort(b.host, b.port)}) for b in response.brokers]
    )
    (topic,) = response.topics
    metadata.update_topic(
        TopicMetadata(
            TOPIC,
            topic.topic_id or uuid.uuid4(),
            {
                p.partition_index: PartitionMetadata(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                )
                for p in topic.partitions
            },
        )
    )


def submit_and_wait(
    metadata: MetadataCache, markers: list[TxnMarker], before_wait=None
) -> dict[str, float]:
    """The sender writes ``markers``; ``before_wait(metadata)`` runs once they are submitted.
    Returns the sender's errors by name."""
    registry = CollectorRegistry()

    async def scenario():
        sender = TxnMarkerSender(metadata, "PLAINTEXT", metrics=txn_marker_metrics(registry))
        written: list[TxnMarker] = []

        async def on_written(marker: TxnMarker) -> None:
            written.append(marker)

        try:
            for marker in markers:
                sender.submit(marker, on_written, owner=0)
            if before_wait is not None:
                await before_wait(metadata)
            async with asyncio.timeout(WAIT_S):
                while len(written) < len(markers):
                    await asyncio.sleep(0.05)
        finally:
            await sender.close()
        assert sorted(m.producer_id for m in written) == sorted(m.producer_id for m in markers)

    asyncio.run(scenario())
    return {
        sample.labels["error"]: sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == "odradek_broker_txn_marker_errors_total"
    }


def marker(pid: int, *, committed: bool) -> TxnMarker:
    return TxnMarker(f"t-{pid}", pid, 0, committed, COORDINATOR_EPOCH, ((TOPIC, 0),))


# -- reading --------------------------------------------------------------------------------------


def consume(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    """What librdkafka reads from the start with ``isolation`` (at most a few seconds more than
    it takes to get ``expected`` records, to see that nothing else comes)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"unused-{uuid.uuid4().hex[:6]}",  # assign() needs no coordinator
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        received: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        quiet_until = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append(message.value())
            if len(received) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() > quiet_until:
                    break
        return received
    finally:
        consumer.close()


def aborted_on_disk(member: cluster.Member) -> list[tuple[int, int, int]]:
    """(producer_id, first_offset, last_offset) of the .txnindex files of the partition there."""
    entry = struct.Struct(">hqqqq")
    found = []
    for log_dir in cluster.broker_log_dirs(member):
        for path in sorted((log_dir / f"{TOPIC}-0").glob("*.txnindex")):
            data = path.read_bytes()
            for position in range(0, len(data) - len(data) % entry.size, entry.size):
                _, pid, first, last, _ = entry.unpack_from(data, position)
                found.append((pid, first, last))
    return found


# -- the test -------------------------------------------------------------------------------------


def test_markers_end_transactions_on_every_replica(txn_cluster):
    data_dir, state = txn_cluster
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])
    futures[TOPIC].result(WAIT_S)
    leader = wait_until(
        lambda: (s := cluster.partition_state(state, TOPIC, 0)) and len(s.isr) == 3 and s.leader,
        "the topic's leader with 3 replicas in sync",
        WAIT_S,
    )
    to_leader = _address(state, leader)
    wait_until(lambda: _leads(to_leader), f"broker {leader} to lead {TOPIC}-0", WAIT_S)
    committing, aborting, left_open = (producer_id(to_leader) for _ in range(3))

    produce(to_leader, [b"a1", b"a2"], committing)  # 0-1
    produce(to_leader, [b"b1"], aborting)  # 2
    produce(to_leader, [b"p1"])  # 3
    metadata = MetadataCache()
    refresh(metadata, to_leader)
    errors = submit_and_wait(
        metadata, [marker(aborting, committed=False), marker(committing, committed=True)]
    )  # 4, 5
    assert errors == {}
    produce(to_leader, [b"c1"], left_open)  # 6: never ended here
    produce(to_leader, [b"p2"])  # 7
    assert (end_offset(to_leader, committed=False), end_offset(to_leader, committed=True)) == (8, 6)
    assert consume(state.bootstrap_servers, "read_committed", 3) == [b"a1", b"a2", b"p1"]
    everything = [b"a1", b"a2", b"b1", b"p1", b"c1", b"p2"]
    assert consume(state.bootstrap_servers, "read_uncommitted", 6) == everything

    followers = [b for b in (1, 2, 3) if b != leader]
    assert (
        write_marker(_address(state, followers[0]), left_open, committed=False, coordinator_epoch=1)
        == ErrorCode.not_leader_or_follower
    )
    for broker_id in (1, 2, 3):  # every replica indexed the aborted transaction
        member = state.member("broker", broker_id)
        wait_until(
            lambda m=member: (aborting, 2, 4) in aborted_on_disk(m),
            f"broker {broker_id}'s .txnindex to hold producer {aborting}'s abort",
            WAIT_S,
        )

    old = state.member("broker", leader)
    assert cluster.kill(old)  # SIGKILL
    wait_until(lambda: not pid_alive(old.pid), f"broker {leader} gone", WAIT_S)
    new_leader = wait_until(
        lambda: (
            (s := cluster.partition_state(state, TOPIC, 0))
            and s.leader not in (-1, leader)
            and s.leader
        ),
        "a new leader",
        WAIT_S,
    )
    to_new = _address(state, new_leader)
    wait_until(lambda: _leads(to_new), f"broker {new_leader} to lead", WAIT_S)
    # once the ISR has caught up the new leader's high watermark, the LSO is the old leader's
    wait_until(lambda: end_offset(to_new, committed=False) == 8, "the HW back at 8", WAIT_S)
    assert end_offset(to_new, committed=True) == 6
    assert consume(state.bootstrap_servers, "read_committed", 3) == [b"a1", b"a2", b"p1"]
    assert consume(state.bootstrap_servers, "read_uncommitted", 6) == everything
    # the follower kept the coordinator epoch of the producers' last markers
    assert (
        write_marker(to_new, committing, committed=True, coordinator_epoch=COORDINATOR_EPOCH - 1)
        == ErrorCode.transaction_coordinator_fenced
    )

    async def leader_moves_later(metadata: MetadataCache) -> None:
        await asyncio.sleep(1.0)  # meanwhile the sender knocks at the dead leader's door
        await asyncio.to_thread(refresh, metadata, to_new)

    errors = submit_and_wait(metadata, [marker(left_open, committed=False)], leader_moves_later)
    assert errors.get("network_exception", 0) >= 1, errors  # it retried the dead leader
    assert (end_offset(to_new, committed=False), end_offset(to_new, committed=True)) == (9, 9)
    assert consume(state.bootstrap_servers, "read_committed", 4) == [b"a1", b"a2", b"p1", b"p2"]
    survivor = next(b for b in followers if b != new_leader)
    for broker_id in (new_leader, survivor):
        member = state.member("broker", broker_id)
        wait_until(
            lambda m=member: (left_open, 6, 8) in aborted_on_disk(m),
            f"broker {broker_id}'s .txnindex to hold producer {left_open}'s abort",
            WAIT_S,
        )


def _leads(address: HostPort) -> bool:
    try:
        end_offset(address, committed=False)
    except AssertionError:
        return False
    return True
