"""Partition and replica states, each with its legal previous states, as Kafka declares them.

Kafka's controller (ZooKeeper mode) tracks every partition in a ``PartitionStateMachine`` and
every replica (a partition on one broker) in a ``ReplicaStateMachine``. A state names the states
it may be entered from; a transition from any other state is illegal: it is logged as an error
(with the ``IllegalStateTransitionError`` that explains it) and that key keeps its state, while
the other keys of the same batch move on, as Kafka's ``logInvalidTransition`` does.

Partitions::

    NonExistent -> New -> Online <-> Offline -> NonExistent
                     \\-> Offline

- New: its assignment is known, it has no leader and ISR yet (no state znode).
- Online: it has a live leader.
- Offline: its leader died, or it is being deleted.

Replicas::

    NonExistent -> New -> Online <-> Offline -> DeletionStarted -> DeletionSuccessful
    DeletionSuccessful -> NonExistent
    Offline | DeletionStarted -> DeletionIneligible -> Online | Offline

``StateTable`` holds the states of one kind; keys it has not seen are NonExistent. It is plain
data, changed only by the controller's event loop.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return _PARTITION_PREVIOUS[self]


_P = PartitionState
_PARTITION_PREVIOUS = {
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
}


class ReplicaState(enum.Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return _REPLICA_PREVIOUS[self]


_R = ReplicaState
_REPLICA_PREVIOUS = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}


class IllegalStateTransitionError(Exception):
    """A key asked to enter a state its current state may not lead to (Kafka's
    ``IllegalStateException``): a bug in the caller, logged, never applied."""


K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionState, ReplicaState)


class StateTable(Generic[K, S]):
    """The current state of every key of one kind; an unknown key is ``non_existent``."""

    def __init__(self, non_existent: S, kind: str):
        self.non_existent = non_existent
        self.kind = kind  # "partition" or "replica", for the log
        self._states: dict[K, S] = {}
        self.illegal_transitions = 0  # counted for tests and metrics; each is also logged

    def get(self, key: K) -> S:
        return self._states.get(key, self.non_existent)

    def keys_in(self, *states: S) -> list[K]:
        return [key for key, state in self._states.items() if state in states]

    def check(self, key: K, target: S) -> None:
        """Raise ``IllegalStateTransitionError`` unless ``key`` may enter ``target`` now."""
        current = self.get(key)
        if current not in target.valid_previous_states:
            raise IllegalStateTransitionError(
                f"{self.kind} {key} cannot move from {current.value} to {target.value}; "
                f"{target.value} may only follow "
                f"{sorted(s.value for s in target.valid_previous_states)}"
            )

    def legal(self, keys: Iterable[K], target: S) -> list[K]:
        """The keys that may enter ``target``; each other one is logged as an error."""
        allowed = []
        for key in keys:
            try:
                self.check(key, target)
            except IllegalStateTransitionError as e:
                self.illegal_transitions += 1
                log.error("illegal state transition: %s", e)
                continue
            allowed.append(key)
        return allowed

    def put(self, key: K, target: S) -> None:
        """Move ``key`` to ``target``; raises ``IllegalStateTransitionError`` if not legal."""
        self.check(key, target)
        if target is self.non_existent:
            self._states.pop(key, None)
        else:
            self._states[key] = target

    def move(self, keys: Iterable[K], target: S) -> list[K]:
        """Move every key that may enter ``target`` there (each other one is logged, as
        ``legal`` does); the keys moved. A transition with nothing to do but change state."""
        moved = self.legal(keys, target)
        for key in moved:
            self.put(key, target)
        return moved

    def forget(self, key: K) -> None:
        """Drop ``key`` without a transition (the controller lost its view: stepped down)."""
        self._states.pop(key, None)

    def clear(self) -> None:
        self._states.clear()

    def __len__(self) -> int:
        return len(self._states)
