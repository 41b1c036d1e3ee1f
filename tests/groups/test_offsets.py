"""Proves committed offsets on a replicated cluster with real clients: simple consumers
(``assign()`` and commit, no group membership) of confluent-kafka and kafka-python commit and
read back their offsets, their admin clients list, alter and delete them; a commit survives
kill -9 of its coordinator (the next leader replays it from the log); a commit is acknowledged
only once the ISR has it; bad requests get Kafka's error codes (OffsetCommit v8 and v9,
OffsetFetch v1 and v8 with several groups, OffsetDelete)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from group_proof.traffic import committed, create_topic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.client.connection import BrokerConnection
from odradek.common.topics import OFFSETS_TOPIC
from odradek.coordinator.partitioner import partition_for
from odradek.errors import ErrorCode
from odradek.local import cluster
from odradek.protocol import schemas
from support.proof_lookups import GROUP_KEY, coordinator_of
from support.waiting import wait_until

pytestmark = [pytest.mark.integration]

OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47
PARTITIONS = 3
TIMEOUT_S = 30.0
WAIT_S = 90.0
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of the group cluster (conftest)


def address_of(state, broker_id: int) -> tuple[str, int]:
    member = next(m for m in state.members if m.role == "broker" and m.id == broker_id)
    host, port = member.address.rsplit(":", 1)
    return host, int(port)


def call(address: tuple[str, int], request):
    async def send():
        connection = await BrokerConnection.open(*address)
        try:
            return await connection.send(request, timeout_s=TIMEOUT_S)
        finally:
            await connection.close()

    return asyncio.run(send())


def commit_request(version: int, group: str, offsets: dict[tuple[str, int], int], **fields):
    request_type = schemas.request_schema(OFFSET_COMMIT, version)
    topic_type = request_type.__dataclass_fields__["topics"].type.__args__[0]
    partition_type = topic_type.__dataclass_fields__["partitions"].type.__args__[0]
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            partition_type(
                partition_index=partition, committed_offset=offset, committed_metadata=""
            )
        )
    values = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": ""}
    values.update(fields)
    topics = tuple(topic_type(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return request_type(**values, topics=topics)


def commit_errors(response) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def fresh_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )


def test_a_confluent_simple_consumer_commits_and_its_admin_reads_and_alters(group_cluster, unique):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    consumer = fresh_consumer(bootstrap, group)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 10, "zero"), TopicPartition(topic, 2, 30)],
            asynchronous=False,
        )
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S
        )
    finally:
        consumer.close()
    assert [(tp.partition, tp.offset) for tp in found] == [(0, 10), (1, -1001), (2, 30)]
    assert found[0].metadata == "zero"
    assert committed(bootstrap, group, topic, PARTITIONS) == {0: 10, 2: 30}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    every = listed.result(timeout=TIMEOUT_S).topic_partitions  # topics null: all of them
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in every) == [
        (topic, 0, 10),
        (topic, 2, 30),
    ]
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1, 20)])]
    )[group]
    assert [tp.error for tp in altered.result(timeout=TIMEOUT_S).topic_partitions] == [None]
    assert committed(bootstrap, group, topic, PARTITIONS) == {0: 10, 1: 20, 2: 30}


def test_a_kafka_python_simple_consumer_commits_and_its_admin_lists_and_deletes(
    group_cluster, unique
):
    bootstrap = group_cluster.bootstrap_servers
    topic, group, other = unique("topic"), unique("group"), unique("other")
    create_topic(bootstrap, topic, PARTITIONS)
    partitions = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign(partitions)
        consumer.commit({partitions[0]: OffsetAndMetadata(5, "five", -1)})
        consumer.commit({partitions[1]: OffsetAndMetadata(6, "", -1)})
        assert consumer.committed(partitions[0]) == 5
        assert consumer.committed(partitions[2]) is None
    finally:
        consumer.close()

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_group_offsets(other, {partitions[2]: OffsetAndMetadata(7, "", -1)})
        listed = admin.list_group_offsets({group: None, other: None})  # OffsetFetch v8+
        assert {tp.partition: o.offset for tp, o in listed[group].items()} == {0: 5, 1: 6}
        assert listed[group][partitions[0]].metadata == "five"
        assert {tp.partition: o.offset for tp, o in listed[other].items()} == {2: 7}
        deleted = admin.delete_group_offsets(group, [partitions[0]])
        assert [error.errno for error in deleted.values()] == [0]
        assert admin.list_group_offsets(group)[group].keys() == {partitions[1]}
    finally:
        admin.close()


def test_a_commit_survives_its_coordinator_killed(group_cluster, unique):
    state = group_cluster
    bootstrap = state.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    consumer = fresh_consumer(bootstrap, group)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.commit(
            offsets=[TopicPartition(topic, p, 100 + p) for p in range(PARTITIONS)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    coordinator = coordinator_of(bootstrap, group, GROUP_KEY)
    current = cluster.ClusterState.read(Path(state.data_dir))
    assert cluster.kill(current.member("broker", coordinator))
    try:
        survivors = ",".join(
            m.address for m in current.members if m.role == "broker" and m.id != coordinator
        )
        wait_until(
            lambda: coordinator_of(survivors, group, GROUP_KEY) != coordinator,
            "a new coordinator",
            WAIT_S,
        )
        assert committed(bootstrap, group, topic, PARTITIONS) == {0: 100, 1: 101, 2: 102}
    finally:
        cluster.restart_broker(Path(state.data_dir), coordinator)
    consumer = fresh_consumer(bootstrap, group)
    try:  # a commit to the new coordinator
        consumer.assign([TopicPartition(topic, 1)])
        consumer.commit(offsets=[TopicPartition(topic, 1, 201)], asynchronous=False)
    finally:
        consumer.close()
    expected = {0: 100, 1: 201, 2: 102}
    assert committed(bootstrap, group, topic, PARTITIONS) == expected

    # The restarted broker leads the group's partition again (it is its preferred leader): it
    # loads the group from its own log, with what its successor committed meanwhile.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    metadata = admin.list_topics(OFFSETS_TOPIC, timeout=TIMEOUT_S).topics[OFFSETS_TOPIC]
    if metadata.partitions[offsets_partition].replicas[0] != coordinator:
        return  # an earlier test moved the preferred leader: the reload was proven above

    def led_by_the_restarted_broker() -> bool:
        asked = [TopicPartition(OFFSETS_TOPIC, offsets_partition)]
        admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=TIMEOUT_S)
        return coordinator_of(bootstrap, group, GROUP_KEY) == coordinator

    wait_until(led_by_the_restarted_broker, "the restarted broker coordinating again", WAIT_S)
    assert committed(bootstrap, group, topic, PARTITIONS) == expected


def test_a_commit_is_acknowledged_only_once_the_isr_has_it(group_cluster, unique):
    state = group_cluster
    bootstrap = state.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    coordinator = coordinator_of(bootstrap, group, GROUP_KEY)
    address = address_of(state, coordinator)
    assert commit_errors(call(address, commit_request(8, group, {(topic, 0): 1}))) == {
        (topic, 0): ErrorCode.none
    }
    current = cluster.ClusterState.read(Path(state.data_dir))
    followers = [m.id for m in current.members if m.role == "broker" and m.id != coordinator]
    for broker_id in followers:
        assert cluster.kill(current.member("broker", broker_id))
    try:
        # The two other replicas are gone: min.insync.replicas (2) cannot be met; the commit
        # is refused (or times out waiting for the ISR), never acknowledged.
        errors = commit_errors(call(address, commit_request(8, group, {(topic, 0): 2})))
        assert errors[(topic, 0)] in (
            ErrorCode.coordinator_not_available,
            ErrorCode.not_coordinator,
        ), errors
    finally:
        for broker_id in followers:
            cluster.restart_broker(Path(state.data_dir), broker_id)

    def commits() -> bool:
        coordinator_now = coordinator_of(bootstrap, group, GROUP_KEY)
        request = commit_request(8, group, {(topic, 0): 3})
        errors = commit_errors(call(address_of(state, coordinator_now), request))
        return errors[(topic, 0)] == ErrorCode.none

    wait_until(commits, "a commit once the ISR is back", WAIT_S, poll_s=1.0)
    assert committed(bootstrap, group, topic, PARTITIONS) == {0: 3}


def test_bad_offset_requests_get_kafka_error_codes(group_cluster, unique):
    state = group_cluster
    bootstrap = state.bootstrap_servers
    topic, group, ghost = unique("topic"), unique("group"), unique("ghost")
    create_topic(bootstrap, topic, PARTITIONS)
    address = address_of(state, coordinator_of(bootstrap, group, GROUP_KEY))
    ghost_address = address_of(state, coordinator_of(bootstrap, ghost, GROUP_KEY))

    # A generation for a group that does not exist: ILLEGAL_GENERATION, from v9 GROUP_ID_NOT_FOUND.
    for version, code in [(8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)]:
        request = commit_request(
            version, ghost, {(topic, 0): 1}, generation_id_or_member_epoch=3, member_id="m"
        )
        assert commit_errors(call(ghost_address, request)) == {(topic, 0): code}
    empty_id = commit_request(8, "", {(topic, 0): 1})
    assert set(commit_errors(call(address, empty_id)).values()) == {ErrorCode.invalid_group_id}
    assert commit_errors(
        call(address, commit_request(8, group, {(topic, 0): 4, (topic, PARTITIONS): 4}))
    ) == {(topic, 0): ErrorCode.none, (topic, PARTITIONS): ErrorCode.unknown_topic_or_partition}

    # OffsetFetch v1: one group, -1 for what is not committed.
    v1 = schemas.request_schema(OFFSET_FETCH, 1)
    v1_topic = v1.__dataclass_fields__["topics"].type.__args__[0]
    fetched = call(
        address, v1(group_id=group, topics=(v1_topic(name=topic, partition_indexes=(0, 1)),))
    )
    assert [
        (p.partition_index, p.committed_offset, p.error_code) for p in fetched.topics[0].partitions
    ] == [
        (0, 4, ErrorCode.none),
        (1, -1, ErrorCode.none),
    ]
    # OffsetFetch v8: several groups; a group this broker does not coordinate is its own error.
    v8 = schemas.request_schema(OFFSET_FETCH, 8)
    v8_group = v8.__dataclass_fields__["groups"].type.__args__[0]
    answer = call(
        address,
        v8(groups=(v8_group(group_id=group, topics=None), v8_group(group_id="", topics=None))),
    )
    by_group = {g.group_id: g for g in answer.groups}
    assert by_group[group].error_code == ErrorCode.none
    assert [
        (t.name, [p.committed_offset for p in t.partitions]) for t in by_group[group].topics
    ] == [(topic, [4])]
    assert by_group[""].error_code == ErrorCode.invalid_group_id

    # OffsetDelete: an unknown group, an unknown topic.
    delete = schemas.request_schema(OFFSET_DELETE, 0)
    delete_topic = delete.__dataclass_fields__["topics"].type.__args__[0]
    delete_partition = delete_topic.__dataclass_fields__["partitions"].type.__args__[0]

    def delete_request(group_id: str, name: str):
        return delete(
            group_id=group_id,
            topics=(delete_topic(name=name, partitions=(delete_partition(partition_index=0),)),),
        )

    assert call(ghost_address, delete_request(ghost, topic)).error_code == (
        ErrorCode.group_id_not_found
    )
    missing = call(address, delete_request(group, unique("missing")))
    assert missing.error_code == ErrorCode.none
    assert missing.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    assert call(address, delete_request(group, topic)).topics[0].partitions[0].error_code == 0
    assert committed(bootstrap, group, topic, PARTITIONS) == {}
