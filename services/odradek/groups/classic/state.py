"""The states of a classic group and the transitions Kafka allows (``ClassicGroupState``).

::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                  ^      |                                   |      |
      |                  |      +--no member left--> Empty          |   leader's SyncGroup
      |                  +-----------a member joins/leaves----------+      v
      |                  +-----------a member joins/leaves/leader rejoins- Stable
    Dead: the group was deleted (its tombstone replayed); nothing leaves Dead.
"""

from __future__ import annotations

import enum

__all__ = ["ClassicGroupState"]


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset[ClassicGroupState]:
        return _PREVIOUS[self]


_S = ClassicGroupState
_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
}
