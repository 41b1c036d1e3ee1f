"""Transaction markers on a real 3-broker cluster: the marker sender writes COMMIT and ABORT
markers through WriteTxnMarkers, a read_committed consumer (librdkafka) then sees committed data
only and stops at an open transaction; followers replicate the markers with their producer
state, so after kill -9 of the leader the new leader has the same LSO, aborted transactions and
coordinator epochs, and the sender finds it (after a refused connection to the dead one); the
killed leader, restarted and elected again, recovers the same view. And a transaction of a
real transactional producer commits through the coordinator's own sender after kill -9 of one
of its partitions' leaders.

The transactions are a test's own (no coordinator involved: InitProducerId without a
transactional id, transactional batches produced as a client's), so the markers are the test's
to send and every offset is known.
"""

from __future__ import annotations

import asyncio
import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.find_coordinator.v4 import request as find_request
from kio.schema.init_producer_id.v4 import request as init_request
from kio.schema.list_offsets.v7 import request as list_request
from kio.schema.metadata.v12 import request as metadata_request
from kio.schema.produce.v9 import request as produce_request
from kio.schema.write_txn_markers.v1 import request as markers_request
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from odradek.broker.metadata_cache import (
    LiveBroker,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.broker.txn_markers import TxnMarkerSender
from odradek.client.connection import BrokerConnection
from odradek.config.endpoints import HostPort
from odradek.coordinator.partitioner import partition_for
from odradek.errors import ErrorCode
from odradek.local import cluster
from odradek.local.cluster import ClusterState, pid_alive
from odradek.observability.metrics import txn_marker_metrics
from odradek.storage.records import Record, encode_batch
from odradek.transactions.result import TxnMarker
from support.clusters import running_cluster
from support.consuming import poll_messages
from support.listener_ports import listener_addresses
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

TOPIC = "txn"
WAIT_S = 30.0
NOW_MS = 1_700_000_000_000
COORDINATOR_EPOCH = 1
TXN_STATE_TOPIC = "__transaction_state"
# __transaction_state with 2 replicas: a partition leader can die outside the ISR of the
# coordinator's partition, so a commit goes on to its markers while that leader is dead.
TXN_PARTITIONS = 3
OVERRIDES = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "transaction.state.log.replication.factor": "2",
    "transaction.max.timeout.ms": "120000",
}


@pytest.fixture(scope="module")
def markers_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, ClusterState]]:
    data_dir = tmp_path_factory.mktemp("markers-cluster")
    with running_cluster(data_dir, brokers=3, broker_overrides=OVERRIDES) as state:
        yield data_dir, state


# -- the wire, through odradek's client ---------------------------------------------------------


def _address(state: ClusterState, broker_id: int) -> HostPort:
    """The broker's inter-broker listener: where a coordinator's markers go (WriteTxnMarkers
    is served there only), and where this test plays the coordinator."""
    member = state.member("broker", broker_id)
    bound = listener_addresses(member)
    host, port = bound[state.internal_listener or state.client_listener].rsplit(":", 1)
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
            # A transactional batch comes with its transactional id, as Kafka requires.
            transactional_id=None if pid is None else "markers-test",
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


def test_markers_end_transactions_on_every_replica(markers_cluster):
    data_dir, state = markers_cluster
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])
    futures[TOPIC].result(WAIT_S)
    leader = wait_until(
        lambda: (s := cluster.partition_state(state, TOPIC, 0)) and len(s.isr) == 3 and s.leader,
        "the topic's leader with 3 replicas in sync",
        WAIT_S,
    )
    # the first live replica of the assignment: the preferred one, elected again at the end
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

    # The killed leader recovers its log (producer state from its snapshot and the log), catches
    # up as a follower (the last abort comes by replication) and leads again: same view.
    cluster.restart_broker(data_dir, leader)
    wait_until(
        lambda: (s := cluster.partition_state(state, TOPIC, 0)) and len(s.isr) == 3,
        f"broker {leader} back in the ISR",
        WAIT_S,
    )
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(WAIT_S)
    wait_until(
        lambda: (s := cluster.partition_state(state, TOPIC, 0)) and s.leader == leader,
        f"broker {leader} leading again",
        WAIT_S,
    )
    to_leader = _address(state, leader)  # restarted: its INTERNAL listener has a new port
    wait_until(lambda: _leads(to_leader), f"broker {leader} to lead again", WAIT_S)
    wait_until(lambda: end_offset(to_leader, committed=False) == 9, "the HW back at 9", WAIT_S)
    assert end_offset(to_leader, committed=True) == 9
    assert consume(state.bootstrap_servers, "read_committed", 4) == [b"a1", b"a2", b"p1", b"p2"]
    assert consume(state.bootstrap_servers, "read_uncommitted", 6) == everything
    assert (left_open, 6, 8) in aborted_on_disk(state.member("broker", leader))
    assert (
        write_marker(to_leader, committing, committed=True, coordinator_epoch=COORDINATOR_EPOCH - 1)
        == ErrorCode.transaction_coordinator_fenced
    )


def find_transaction_coordinator(address: HostPort, transactional_id: str) -> int | None:
    """Its coordinator (creating ``__transaction_state`` on first use), None while there is
    none yet."""
    response = send(
        address,
        find_request.FindCoordinatorRequest(key_type=1, coordinator_keys=(transactional_id,)),
    )
    (found,) = response.coordinators
    return found.node_id if found.error_code == ErrorCode.none else None


def markers_metrics(member: cluster.Member) -> dict[str, float]:
    """The marker sender's samples on a broker's /metrics (errors as ``error:<name>``)."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "odradek_broker_txn_markers_written_total":
                found["written"] = sample.value
            elif sample.name == "odradek_broker_txn_marker_errors_total":
                found[f"error:{sample.labels['error']}"] = sample.value
    return found


def test_a_transaction_commits_after_kill_of_a_partition_leader(markers_cluster):
    """The coordinator's own sender (in its broker) writes the COMMIT markers of a transaction
    whose partition leader died after its records: it retries that partition (the dead leader
    refuses connections) until the controller has moved it, then the transaction completes."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    data_dir, _ = markers_cluster
    state = ClusterState.read(data_dir)  # pids as of now: a broker may have been restarted
    topic = "eos"
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(
        WAIT_S
    )
    leaders = wait_until(
        lambda: (
            all(
                (s := cluster.partition_state(state, topic, p)) and len(s.isr) == 3
                for p in range(3)
            )
            and {p: cluster.partition_state(state, topic, p).leader for p in range(3)}
        ),
        f"{topic} led with 3 replicas in sync",
        WAIT_S,
    )
    wait_until(
        lambda: find_transaction_coordinator(_address(state, 1), "any") is not None,
        "a transaction coordinator",
        WAIT_S,
    )
    txn_isrs = wait_until(
        lambda: (
            all(
                (s := cluster.partition_state(state, TXN_STATE_TOPIC, p)) and len(s.isr) == 2
                for p in range(TXN_PARTITIONS)
            )
            and {
                p: cluster.partition_state(state, TXN_STATE_TOPIC, p) for p in range(TXN_PARTITIONS)
            }
        ),
        f"{TXN_STATE_TOPIC} led with 2 replicas in sync",
        WAIT_S,
    )
    # A transactional id whose coordinator's partition does not have a leader of ours in its
    # ISR: that leader is the one to kill.
    for attempt in range(100):
        transactional_id = f"tid-{attempt}"
        txn_state = txn_isrs[partition_for(transactional_id, TXN_PARTITIONS)]
        victims = [b for b in leaders.values() if b not in txn_state.isr]
        if victims:
            break
    else:
        pytest.fail(f"no transactional id whose coordinator's ISR misses a leader of {leaders}")
    coordinator, victim = txn_state.leader, victims[0]
    producer = Producer(
        {
            "bootstrap.servers": state.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 90_000,
        }
    )
    producer.init_transactions(WAIT_S)
    assert find_transaction_coordinator(_address(state, coordinator), transactional_id) == (
        coordinator
    )
    producer.begin_transaction()
    values = [f"v{i}".encode() for i in range(30)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 3)
    assert producer.flush(WAIT_S) == 0
    member = state.member("broker", victim)
    assert cluster.kill(member)  # SIGKILL, before the markers are sent
    wait_until(lambda: not pid_alive(member.pid), f"broker {victim} gone", WAIT_S)

    producer.commit_transaction(3 * WAIT_S)

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": state.bootstrap_servers,
            "group.id": f"unused-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        read = poll_messages(consumer, len(values), 2 * WAIT_S, poll_s=0.2)
        received = [m.value() for m in read]
    finally:
        consumer.close()
    assert sorted(received) == sorted(values)
    # The sender counts the marker once the last partition's answer is back, which may be just
    # after a consumer saw that partition's marker (CI read 0 here once).
    sender = wait_until(
        lambda: (
            (found := markers_metrics(state.member("broker", coordinator))).get("written", 0) >= 1
            and found
        ),
        "the coordinator's sender to count the marker written",
        WAIT_S,
    )
    print(f"coordinator {coordinator}, dead leader {victim}: sender {sender}")
    retried = sender.get("error:network_exception", 0) + sender.get("error:leader_not_available", 0)
    assert retried >= 1, sender


def _leads(address: HostPort) -> bool:
    try:
        end_offset(address, committed=False)
    except AssertionError:
        return False
    return True
