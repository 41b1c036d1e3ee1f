"""What a leader election is asked and what it answers, apart from any wire format: Kafka's
``ElectionType`` (PREFERRED or UNCLEAN), one partition's ``Outcome`` (an error code, ``none``
once elected, and Kafka's message), and ``ElectionAsked``, a request's election type, partitions
(None: every partition) and timeout.

The controller decides elections in these terms (``controller.leader_balance``); the broker
forwards a client's request and waits for the leaders in them (``broker.admin.leader_election``);
the wire codec of ElectLeaders reads and writes them (``elect_leaders``). Pure values; any thread.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode

__all__ = ["ElectionType", "Outcome", "ELECTED", "ElectionAsked"]


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType`` byte."""

    PREFERRED = 0
    UNCLEAN = 1


class Outcome(NamedTuple):
    """One partition's answer: an error code (``none`` once elected) and Kafka's message."""

    error: ErrorCode
    message: str | None = None


ELECTED = Outcome(ErrorCode.none)


@dataclass(frozen=True, slots=True)
class ElectionAsked:
    """What an ElectLeaders request asks, whatever its version."""

    election_type: ElectionType
    partitions: tuple[TopicPartition, ...] | None  # None: every partition
    timeout_ms: int
