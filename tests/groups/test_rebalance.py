"""Proves rebalances that do not stop the group: static members (KIP-345) restart without a
rebalance, and cooperative-sticky (KIP-429) and KIP-848 rebalances let the members whose
partitions do not move keep consuming while a new member joins (measured: records consumed by
the other members between the join and the new member's first assignment)."""

from __future__ import annotations

import time

import pytest
from group_proof.matrix import libraries
from group_proof.members import Members, assignment_now, rebalances
from group_proof.traffic import SteadyProducer, create_topic

from support.waiting import wait_until

pytestmark = [pytest.mark.integration]

PARTITIONS = 6
WAIT_S = 90.0
SESSION_TIMEOUT_MS = 10_000  # long enough for a static member to restart within it


def settled(members: list, partitions: int = PARTITIONS) -> list[set[int]] | None:
    held = [assignment_now(m.events()) for m in members]
    owned = sorted(p for h in held for p in h)
    return held if owned == list(range(partitions)) and all(held) else None


@pytest.mark.parametrize("library", libraries(ci="kafka-python"))
def test_a_static_member_restarts_without_a_rebalance(group_cluster, unique, tmp_path, library):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    options = {"session_timeout_ms": SESSION_TIMEOUT_MS}
    try:
        started = [
            members.start(library, name=f"static-{n}", instance_id=f"{group}-{n}", **options)
            for n in range(3)
        ]
        before = wait_until(lambda: settled(started), "a stable group of three", WAIT_S)
        time.sleep(2)  # the join wave is over: every rebalance from now on would be new
        callbacks = [rebalances(m.events()) for m in started[1:]]
        members.stop(started[0])  # a static member leaves no LeaveGroup behind
        back = members.start(library, name="static-0-again", instance_id=f"{group}-0", **options)
        wait_until(
            lambda: assignment_now(back.events()), "the restarted member's partitions", WAIT_S
        )
        time.sleep(3)  # a rebalance, had there been one, would show in the others' journals
        assert assignment_now(back.events()) == before[0]
        assert [rebalances(m.events()) for m in started[1:]] == callbacks
    finally:
        members.close()


@pytest.mark.parametrize(
    ("library", "options"),
    [
        ("confluent", {"assignor": "cooperative-sticky"}),
        ("kafka-python", {"assignor": "cooperative-sticky"}),
        ("confluent", {"protocol": "consumer"}),  # KIP-848
    ],
    ids=["confluent-cooperative-sticky", "kafka-python-cooperative-sticky", "confluent-kip848"],
)
def test_members_keep_consuming_while_another_joins(
    group_cluster, unique, tmp_path, library, options
):
    bootstrap = group_cluster.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    try:
        with SteadyProducer(bootstrap, topic, rate_per_s=300, partitions=PARTITIONS):
            first = [members.start(library, **options) for _ in range(3)]
            before = wait_until(lambda: settled(first), "a stable group of three", WAIT_S)
            time.sleep(2)
            joined_at = time.time()
            newcomer = members.start(library, **options)
            wait_until(
                lambda: assignment_now(newcomer.events()), "the newcomer's partitions", WAIT_S
            )
            assigned_at = next(
                e["t"] for e in newcomer.events() if e["e"] == "assigned" and e["partitions"]
            )
            after = wait_until(
                lambda: settled([*first, newcomer]), "a stable group of four", WAIT_S
            )
    finally:
        members.close()

    during = sum(
        1
        for m in first
        for e in m.events()
        if e["e"] == "record" and joined_at <= e["t"] <= assigned_at
    )
    print(
        f"\n{library} {options}: {during} records consumed by the three others during the "
        f"{assigned_at - joined_at:.2f} s from the join to the newcomer's first assignment"
    )
    assert during > 0, "the other members stopped consuming during the rebalance"
    # Only what moves is revoked: every old member keeps at least one partition it had.
    assert all(before[n] & after[n] for n in range(3)), (before, after)
