"""Proves the consumer group's guarantees with confluent-kafka, kafka-python and aiokafka as
real member processes on a replicated 3-broker cluster: a group of three shares a six-partition
topic; members join, leave cleanly and are killed (kill -9); committing after processing, every
acknowledged record is consumed at least once (none skipped); committing before processing, none
is consumed twice (at most once); two groups on one topic each see every record."""

from __future__ import annotations

import pytest
from group_proof.matrix import ALL_LIBRARIES, libraries
from group_proof.members import Members, assignment_now, consumed, last_commits
from group_proof.traffic import committed, create_topic, produce

from support.proof_lookups import end_offsets
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

PARTITIONS = 6
RECORDS = 3000
PROCESS_MS = 4  # per record: 3000 records take a group of three about 4 s, faults land inside
WAIT_S = 90.0


def test_a_group_of_three_splits_the_topic_evenly(group_cluster, unique, tmp_path):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        started = [members.start(library) for library in ALL_LIBRARIES]  # one group, 3 libraries

        # The first member may hold all six for a while: it can be alone in the first generation
        # when the others' processes start later than the initial rebalance delay.
        def settled() -> list[set[int]] | None:
            held = [assignment_now(m.events()) for m in started]
            covered = sorted(p for h in held for p in h) == list(range(PARTITIONS))
            return held if covered and all(held) else None

        held = wait_until(settled, "six partitions over three members, each holding some", WAIT_S)
        assert [len(h) for h in held] == [2, 2, 2], held
    finally:
        members.close()


@pytest.mark.parametrize("library", libraries(ci="confluent"))
def test_commit_after_processing_consumes_every_record_at_least_once(
    group_cluster, unique, tmp_path, library
):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, RECORDS, partitions=PARTITIONS)
    ends = end_offsets(acked)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        first, second, third = (
            members.start(library, mode="at-least-once", process_ms=PROCESS_MS) for _ in range(3)
        )
        wait_until(
            lambda: sum(consumed(members.journals()).values()) >= RECORDS // 6,
            "a sixth of the records consumed",
            WAIT_S,
        )
        members.kill(first)  # a crash: what it processed but did not commit comes again
        members.start(library, mode="at-least-once", process_ms=PROCESS_MS)  # a join
        wait_until(
            lambda: sum(consumed(members.journals()).values()) >= RECORDS // 2,
            "half of the records consumed",
            WAIT_S,
        )
        members.stop(second)  # a clean leave
        wait_until(
            lambda: last_commits(members.journals()) == ends,
            "commits up to the end of every partition",
            WAIT_S,
        )
        members.stop(third)
    finally:
        members.close()

    counts = consumed(members.journals())
    skipped = sorted(set(acked) - set(counts))
    assert not skipped, f"{len(skipped)} acknowledged records never consumed: {skipped[:5]}"
    assert committed(bootstrap, group, topic, PARTITIONS) == ends


@pytest.mark.parametrize("library", libraries(ci="kafka-python"))
def test_commit_before_processing_consumes_no_record_twice(
    group_cluster, unique, tmp_path, library
):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, RECORDS, partitions=PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        first, *others = (
            members.start(library, mode="at-most-once", process_ms=PROCESS_MS) for _ in range(3)
        )
        wait_until(
            lambda: sum(consumed(members.journals()).values()) >= RECORDS // 6,
            "a sixth of the records consumed",
            WAIT_S,
        )
        members.kill(first)  # what it committed but had not processed is lost, not repeated
        others.append(members.start(library, mode="at-most-once", process_ms=PROCESS_MS))
        wait_until(
            lambda: last_commits(members.journals()) == end_offsets(acked),
            "commits up to the end of every partition",
            WAIT_S,
        )
        for member in others:
            members.stop(member)
    finally:
        members.close()

    counts = consumed(members.journals())
    twice = sorted(record for record, count in counts.items() if count > 1)
    assert not twice, f"{len(twice)} records consumed more than once: {twice[:5]}"
    assert set(counts) <= set(acked)


@pytest.mark.parametrize("library", libraries(ci="aiokafka"))
def test_two_groups_on_one_topic_each_see_every_record(group_cluster, unique, tmp_path, library):
    bootstrap = group_cluster.bootstrap_servers
    topic = unique("topic")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, RECORDS // 3, partitions=PARTITIONS)
    groups = [Members(bootstrap, unique(f"group{n}"), topic, tmp_path) for n in range(2)]
    try:
        for members in groups:
            for _ in range(2):
                members.start(library, idle_exit_s=3)
        for members in groups:
            wait_until(
                lambda members=members: set(consumed(members.journals())) >= set(acked),
                f"{members.group} to see every record",
                WAIT_S,
            )
    finally:
        for members in groups:
            members.close()
