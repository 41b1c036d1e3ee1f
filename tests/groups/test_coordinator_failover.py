"""Proves that a group survives the loss of its coordinator: kill -9 the broker leading the
group's partition of __consumer_offsets while members commit, and while the group rebalances;
another replica takes over from the ISR, reloads the group from the log, the members find it,
every acknowledged record is still consumed at least once and no acknowledged commit is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from group_proof.matrix import libraries
from group_proof.members import Members, assignment_now, consumed, last_commits
from group_proof.traffic import GroupWatch, committed, create_topic, produce

from odradek.local import cluster
from support.proof_lookups import GROUP_KEY, coordinator_of, end_offsets
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

PARTITIONS = 6
RECORDS = 3000
WAIT_S = 120.0


def kill_broker(state, broker_id: int, killed: list[int]) -> None:
    """kill -9 the broker, by the pid the state file has now (restarts change it)."""
    current = cluster.ClusterState.read(Path(state.data_dir))
    member = next(m for m in current.members if m.role == "broker" and m.id == broker_id)
    assert cluster.kill(member), f"broker {broker_id} was not running"
    killed.append(broker_id)


def restart_killed(state, killed: list[int]) -> None:
    for broker_id in killed:
        cluster.restart_broker(Path(state.data_dir), broker_id)


@pytest.mark.parametrize("library", libraries(ci="aiokafka"))
def test_commits_survive_the_coordinator_killed_while_members_commit(
    group_cluster, unique, tmp_path, library
):
    state = group_cluster
    bootstrap = state.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, RECORDS, partitions=PARTITIONS)
    ends = end_offsets(acked)
    members = Members(bootstrap, group, topic, tmp_path)
    coordinator = coordinator_of(bootstrap, group, GROUP_KEY)
    killed: list[int] = []
    try:
        for _ in range(3):
            members.start(library, mode="at-least-once", process_ms=4)
        wait_until(
            lambda: sum(consumed(members.journals()).values()) >= RECORDS // 4,
            "a quarter of the records consumed",
            WAIT_S,
        )
        acknowledged_before = last_commits(members.journals())
        kill_broker(state, coordinator, killed)
        wait_until(
            lambda: coordinator_of(bootstrap, group, GROUP_KEY) != coordinator,
            "a new coordinator",
            WAIT_S,
        )
        wait_until(
            lambda: last_commits(members.journals()) == ends,
            "commits up to the end of every partition",
            WAIT_S,
        )
        for member in members.members:
            members.stop(member)
    finally:
        members.close()
        restart_killed(state, killed)

    final = committed(bootstrap, group, topic, PARTITIONS)
    assert final == ends
    assert all(final[p] >= offset for p, offset in acknowledged_before.items())
    skipped = sorted(set(acked) - set(consumed(members.journals())))
    assert not skipped, f"{len(skipped)} acknowledged records never consumed: {skipped[:5]}"


@pytest.mark.parametrize("library", libraries(ci="confluent", among=("confluent", "kafka-python")))
def test_a_rebalance_completes_after_the_coordinator_is_killed_during_it(
    group_cluster, unique, tmp_path, library
):
    state = group_cluster
    bootstrap = state.bootstrap_servers
    topic, group = unique("topic"), unique("group")
    create_topic(bootstrap, topic, PARTITIONS)
    acked = produce(bootstrap, topic, RECORDS // 3, partitions=PARTITIONS)
    members = Members(bootstrap, group, topic, tmp_path)
    coordinator = coordinator_of(bootstrap, group, GROUP_KEY)
    killed: list[int] = []
    try:
        debug = {"client_debug": "cgrp"} if library == "confluent" else {}
        pair = [members.start(library, **debug) for _ in range(2)]
        wait_until(lambda: settled(pair), "a stable group of two", WAIT_S, explain=members.report)
        third = members.start(library, **debug)  # the join starts a rebalance ...
        watch = GroupWatch(bootstrap, group)
        wait_until(lambda: has_third_join(watch), "the third member's join", WAIT_S, poll_s=0.02)
        kill_broker(state, coordinator, killed)  # ... which loses its coordinator
        wait_until(
            lambda: settled([*pair, third]),
            "a stable group of three",
            WAIT_S,
            explain=lambda: (
                f"coordinator {coordinator} killed\n{members.report()}\n"
                + coordinator_log(state, group)
            ),
        )
        wait_until(
            lambda: set(consumed(members.journals())) >= set(acked),
            "every record consumed",
            WAIT_S,
        )
    finally:
        members.close()
        restart_killed(state, killed)


def coordinator_log(state, group: str, lines: int = 20) -> str:
    """The brokers' log lines about ``group`` (the coordinators' view of its rebalances), in
    time order, the last ``lines`` of them."""
    found = []
    for log in sorted(Path(state.data_dir).glob("broker-*/broker.log")):
        broker = log.parent.name
        found += [
            f"{line[:23]} {broker}: {line[24:].replace(group, '<group>')[:200]}"
            for line in _lines_about(log, group)
        ]
    return "\n".join(sorted(found)[-lines:])


def _lines_about(log: Path, group: str) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines() if group in line]


def has_third_join(watch: GroupWatch) -> bool:
    """The coordinator has the third member's join: the group rebalances (or, if the look came
    late, is stable with three members already)."""
    state, members = watch.look()
    return state in ("PREPARING_REBALANCING", "COMPLETING_REBALANCING") or members == 3


def settled(started: list) -> bool:
    held = [assignment_now(m.events()) for m in started]
    return sorted(p for h in held for p in h) == list(range(PARTITIONS)) and all(held)
