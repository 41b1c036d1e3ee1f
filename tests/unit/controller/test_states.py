"""Every partition and replica state accepts exactly the previous states Kafka declares, and an
illegal transition is logged, counted and never applied."""

from __future__ import annotations

import itertools
import logging

import pytest

from odradek.controller.states import (
    IllegalStateTransitionError,
    PartitionState,
    ReplicaState,
    StateTable,
)

P, R = PartitionState, ReplicaState

# Kafka's PartitionStateMachine / ReplicaStateMachine (ZooKeeper mode), written out again here
# so that a change to the module's table has to be a deliberate change to this one too.
KAFKA_PARTITION_PREVIOUS = {
    P.NEW: {P.NON_EXISTENT},
    P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.NON_EXISTENT: {P.OFFLINE},
}
KAFKA_REPLICA_PREVIOUS = {
    R.NEW: {R.NON_EXISTENT},
    R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.DELETION_STARTED: {R.OFFLINE},
    R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
    R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
    R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
}

# How to reach each state from NonExistent by legal steps, to set a table up.
PARTITION_PATHS = {
    P.NON_EXISTENT: [],
    P.NEW: [P.NEW],
    P.ONLINE: [P.NEW, P.ONLINE],
    P.OFFLINE: [P.NEW, P.OFFLINE],
}
REPLICA_PATHS = {
    R.NON_EXISTENT: [],
    R.NEW: [R.NEW],
    R.ONLINE: [R.NEW, R.ONLINE],
    R.OFFLINE: [R.NEW, R.OFFLINE],
    R.DELETION_STARTED: [R.NEW, R.OFFLINE, R.DELETION_STARTED],
    R.DELETION_SUCCESSFUL: [R.NEW, R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL],
    R.DELETION_INELIGIBLE: [R.NEW, R.OFFLINE, R.DELETION_INELIGIBLE],
}


def test_the_declared_previous_states_are_kafkas():
    assert {s: set(s.valid_previous_states) for s in P} == KAFKA_PARTITION_PREVIOUS
    assert {s: set(s.valid_previous_states) for s in R} == KAFKA_REPLICA_PREVIOUS


def _table_at(kind, paths, non_existent, state):
    table = StateTable(non_existent, kind)
    for step in paths[state]:
        table.put("k", step)
    assert table.get("k") is state
    return table


@pytest.mark.parametrize(
    ("current", "target"),
    list(itertools.product(P, P)),
    ids=lambda s: s.value,
)
def test_every_partition_transition(current, target):
    table = _table_at("partition", PARTITION_PATHS, P.NON_EXISTENT, current)
    if current in KAFKA_PARTITION_PREVIOUS[target]:
        table.put("k", target)
        assert table.get("k") is target
    else:
        with pytest.raises(IllegalStateTransitionError, match=target.value):
            table.put("k", target)
        assert table.get("k") is current


@pytest.mark.parametrize(
    ("current", "target"),
    list(itertools.product(R, R)),
    ids=lambda s: s.value,
)
def test_every_replica_transition(current, target):
    table = _table_at("replica", REPLICA_PATHS, R.NON_EXISTENT, current)
    if current in KAFKA_REPLICA_PREVIOUS[target]:
        table.put("k", target)
        assert table.get("k") is target
    else:
        with pytest.raises(IllegalStateTransitionError):
            table.put("k", target)
        assert table.get("k") is current


def test_a_batch_moves_its_legal_keys_and_logs_the_others(caplog):
    table = StateTable(P.NON_EXISTENT, "partition")
    table.put(("a", 0), P.NEW)
    table.put(("a", 1), P.NEW)
    table.put(("a", 1), P.ONLINE)
    with caplog.at_level(logging.ERROR, logger="odradek.controller.states"):
        legal = table.legal([("a", 0), ("a", 1), ("a", 2)], P.NEW)
    assert legal == [("a", 2)]  # only the unknown (NonExistent) one may become New
    assert table.illegal_transitions == 2
    assert "partition ('a', 0) cannot move from NewPartition to NewPartition" in caplog.text
    assert "partition ('a', 1) cannot move from OnlinePartition to NewPartition" in caplog.text
    assert table.get(("a", 0)) is P.NEW and table.get(("a", 1)) is P.ONLINE


def test_non_existent_forgets_the_key():
    table = StateTable(R.NON_EXISTENT, "replica")
    for step in REPLICA_PATHS[R.DELETION_SUCCESSFUL]:
        table.put("k", step)
    table.put("k", R.NON_EXISTENT)
    assert len(table) == 0 and table.get("k") is R.NON_EXISTENT
