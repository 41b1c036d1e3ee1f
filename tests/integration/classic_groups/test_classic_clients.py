"""Real consumers in classic groups against a real broker process: kafka-python, aiokafka and
confluent-kafka members (each its own process, ``tests/groups/group_proof``) with the range,
roundrobin and cooperative-sticky assignors share a topic's partitions, take over those of a
member that leaves, and of one that crashes once its session times out."""

from __future__ import annotations

import pytest
from group_proof.members import Members, assignment_now, consumed
from group_proof.traffic import create_topic, produce

from support.waiting import wait_until

pytestmark = [pytest.mark.integration]

PARTITIONS = 6
WAIT_S = 90.0


@pytest.fixture(scope="module")
def bootstrap(classic_cluster) -> str:
    return classic_cluster.bootstrap_servers


def settled(members: list, partitions: int = PARTITIONS) -> list[set[int]] | None:
    """Each member's partitions once every partition has exactly one owner and none is idle."""
    held = [assignment_now(m.events()) for m in members]
    owned = sorted(p for h in held for p in h)
    return held if owned == list(range(partitions)) and all(held) else None


CASES = [
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "cooperative-sticky"),
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
]


@pytest.mark.parametrize(("library", "assignor"), CASES)
def test_members_share_the_partitions_and_take_over_from_one_that_leaves(
    bootstrap, unique, tmp_path, library, assignor
):
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, 120, partitions=PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        started = [
            members.start(library, assignor=assignor, session_timeout_ms=6000) for _ in range(3)
        ]
        wait_until(lambda: settled(started), f"3 {library} members over {topic}", WAIT_S)
        members.stop(started[0])  # closes its consumer: LeaveGroup
        wait_until(lambda: settled(started[1:]), "2 members after one left", WAIT_S)
        wait_until(
            lambda: set(consumed(members.journals())) >= set(acked),
            "every acknowledged record consumed",
            WAIT_S,
        )
    finally:
        members.close()


@pytest.mark.parametrize("library", ["kafka-python", "aiokafka", "confluent"])
def test_a_crashed_member_is_removed_after_its_session_timeout(
    bootstrap, unique, tmp_path, library
):
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        started = [members.start(library, session_timeout_ms=3000) for _ in range(2)]
        wait_until(lambda: settled(started), f"2 {library} members over {topic}", WAIT_S)
        members.kill(started[0])  # no LeaveGroup: only its session timeout removes it
        wait_until(lambda: settled(started[1:]), "the survivor owns every partition", WAIT_S)
    finally:
        members.close()
