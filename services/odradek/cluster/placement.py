"""Where a partition's replicas live and which replica leads: Kafka's placement and election rules.

Pure functions: no I/O, no clock, no shared state, so any thread may call them. The only
randomness, where the round-robin starts, comes from an injected ``random.Random`` or an explicit
``start_index``, so a seeded run places replicas exactly the same way twice.

Placement (Kafka's ``AdminUtils.assignReplicasToBrokers``)
----------------------------------------------------------
An assignment maps each partition id to its replica list; the first replica is the partition's
*preferred leader*. Brokers are taken in ascending id order. (Kafka sorts them when it adds
partitions but not always when it creates a topic, so the two can disagree; we always sort.)

Rack-unaware, with ``n`` brokers, a start index ``s`` and a follower shift ``h``:

- the preferred leader of partition ``p`` is broker number ``(p + s) mod n``: a round-robin, so
  over any run of consecutive partitions the per-broker leader counts differ by at most one, and
  are all equal when the run is a multiple of ``n`` long;
- follower ``j`` (``j = 0 .. RF-2``) sits ``1 + (h + j) mod (n - 1)`` places after the leader, so
  it is never the leader and the followers of one partition are distinct;
- ``h`` grows by one each time ``p`` reaches a multiple of ``n``, so the partitions a broker
  leads do not all share the same followers. In every aligned block of ``n`` partitions (ids
  ``k*n .. k*n + n - 1``) each broker holds exactly ``RF`` replicas.

Rack-aware (every broker has a rack): the same round-robin over a *rack-alternated* broker list
(racks sorted by name, brokers by id, one broker from each rack in turn: ``a: 0, 1 | b: 2 |
c: 3, 4`` gives ``0, 2, 3, 1, 4``), with the shift multiplied by the number of racks. A candidate
follower is skipped while its rack already holds a replica and some rack holds none, or when its
broker already holds one. So each partition's replicas span ``min(RF, racks)`` racks, and with
equal-sized racks and ``RF == racks`` replicas are even across brokers. Rack-unaware placement is
rack-aware placement with all brokers in one rack: nothing is ever skipped.

When only some brokers have a rack, ``RackAwareMode.ENFORCED`` (Kafka's default) refuses,
``SAFE`` falls back to rack-unaware and ``DISABLED`` (``--disable-rack-aware``) ignores racks.

Adding partitions (CreatePartitions) leaves the existing ones alone, keeps partition 0's
replication factor, and continues the round-robin where partition 0 started: the start index is
the position of the first broker whose id is at least partition 0's preferred leader.

Leader election (Kafka's ``PartitionLeaderElectionAlgorithms``)
---------------------------------------------------------------
Every election scans the assignment in order, so the preferred leader wins whenever it qualifies.
Invariants of every election function below:

- the leader is a live broker from the assignment;
- a clean election never picks a replica outside the ISR;
- an unclean election happens only when the caller allows it and no ISR replica is live; the ISR
  after it is just the new leader (the other replicas may hold records the new leader never had);
- when no replica qualifies the result has ``leader=None`` and the ISR unchanged: the partition
  stays offline until a qualifying replica comes back.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import zip_longest
from typing import NamedTuple

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "PlacementError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "RackAwareMode",
    "LeaderElection",
    "assign_replicas",
    "assign_additional_partitions",
    "rack_alternated_brokers",
    "racks_to_use",
    "elect_leader_offline",
    "elect_leader_for_reassignment",
    "elect_preferred_leader",
    "elect_leader_for_controlled_shutdown",
]


class PlacementError(OdradekError):
    """Replicas cannot be placed: rack information is incomplete or the assignment is malformed.

    Kafka raises ``AdminOperationException`` in these cases, which reaches clients as
    UNKNOWN_SERVER_ERROR with the message: the cause is the cluster's state, not the request.
    """

    error_code = ErrorCode.unknown_server_error


class InvalidPartitionsError(PlacementError):
    """The partition count is not positive, or CreatePartitions would not increase it."""

    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(PlacementError):
    """The replication factor is not positive, or larger than the number of live brokers."""

    error_code = ErrorCode.invalid_replication_factor


class RackAwareMode(enum.Enum):
    """What to do with racks when only some brokers have one (Kafka's ``RackAwareMode``)."""

    ENFORCED = "enforced"  # use racks; refuse to place if some brokers have none
    SAFE = "safe"  # use racks if every broker has one, otherwise place rack-unaware
    DISABLED = "disabled"  # ignore racks


class LeaderElection(NamedTuple):
    """The outcome of one election: ``leader`` is None when no replica qualifies."""

    leader: int | None
    isr: list[int]
    unclean: bool = False


# --- placement ------------------------------------------------------------------------------


def assign_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    start_partition_id: int = 0,
    start_index: int | None = None,
    rng: random.Random | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Place ``partitions`` new partitions, ids from ``start_partition_id``, on ``brokers``.

    ``brokers`` maps each live broker id to its rack (None without one). With ``start_index``
    the round-robin starts there and the follower shift equals it, as Kafka's fixed start index
    does; without it both are drawn from ``rng`` (a fresh unseeded one if None).
    """
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    if start_partition_id < 0:
        raise ValueError(f"start_partition_id must be >= 0, not {start_partition_id}")
    if start_index is not None and start_index < 0:
        raise ValueError(f"start_index must be >= 0, not {start_index}")

    rack_of = racks_to_use(brokers, rack_aware_mode)
    if rack_of is None:
        arranged = sorted(brokers)
        rack_of = dict.fromkeys(arranged, "")
    else:
        arranged = rack_alternated_brokers(rack_of)

    if start_index is None:
        rng = rng if rng is not None else random.Random()
        start_index = rng.randrange(len(arranged))
        shift = rng.randrange(len(arranged))
    else:
        shift = start_index
    return _place(
        arranged, rack_of, partitions, replication_factor, start_partition_id, start_index, shift
    )


def assign_additional_partitions(
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    brokers: Mapping[int, str | None],
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Place the partitions ``len(existing) .. new_total - 1`` of a topic that grows (only those).

    The replication factor is partition 0's; placement is deterministic, continuing the
    round-robin from partition 0's preferred leader.
    """
    partition0 = existing.get(0)
    if not partition0:
        raise PlacementError(
            f"Unexpected existing replica assignment, partition id 0 is missing or has no "
            f"replicas. Assignment: {dict(existing)}"
        )
    if sorted(existing) != list(range(len(existing))):
        raise PlacementError(
            f"Unexpected existing replica assignment, partition ids are not 0..{len(existing) - 1}:"
            f" {sorted(existing)}"
        )
    if new_total <= len(existing):
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. The topic currently "
            f"has {len(existing)} partitions, {new_total} would not be an increase."
        )
    ids = sorted(brokers)
    start_index = next((i for i, broker in enumerate(ids) if broker >= partition0[0]), 0)
    return assign_replicas(
        new_total - len(existing),
        len(partition0),
        brokers,
        start_partition_id=len(existing),
        start_index=start_index,
        rack_aware_mode=rack_aware_mode,
    )


def rack_alternated_brokers(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered one from each rack in turn; racks by name, brokers within a rack by id."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [broker for row in zip_longest(*columns) for broker in row if broker is not None]


def racks_to_use(brokers: Mapping[int, str | None], mode: RackAwareMode) -> dict[int, str] | None:
    """Each broker's rack if placement should be rack-aware, None if it should not; with racks on
    only some brokers, ENFORCED raises ``PlacementError`` (it cannot spread over racks it does not
    know) and SAFE places rack-unaware."""
    with_rack = {broker: rack for broker, rack in brokers.items() if rack is not None}
    if mode is RackAwareMode.DISABLED or not with_rack:
        return None
    if len(with_rack) < len(brokers):
        if mode is RackAwareMode.SAFE:
            return None
        missing = sorted(set(brokers) - set(with_rack))
        raise PlacementError(
            f"Not all brokers have rack information for replica rack aware assignment "
            f"(brokers without a rack: {missing}); disable rack awareness to place without it."
        )
    return with_rack


def _place(
    arranged: Sequence[int],
    rack_of: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    start_partition_id: int,
    start_index: int,
    shift: int,
) -> dict[int, list[int]]:
    n = len(arranged)
    num_racks = len(set(rack_of.values()))
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition_id, start_partition_id + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [arranged[first]]
        racks_used = {rack_of[replicas[0]]}
        # Kafka's candidate counter runs on across the partition's followers: a skipped broker
        # is not retried for the next follower until the counter comes round again.
        candidate = 0
        while len(replicas) < replication_factor:
            # n - 1 consecutive candidates are every other broker once; one of them always fits
            # (RF <= n, and a rack without replicas has brokers without replicas).
            for _ in range(n - 1):
                broker = arranged[_follower_index(first, shift * num_racks, candidate, n)]
                candidate += 1
                rack = rack_of[broker]
                if broker not in replicas and (
                    rack not in racks_used or len(racks_used) == num_racks
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
            else:
                raise PlacementError(f"no broker can take a replica of partition {partition}")
        assignment[partition] = replicas
    return assignment


def _follower_index(first: int, shift: int, candidate: int, n: int) -> int:
    """Position of a follower candidate: 1 .. n-1 places after the leader, never the leader."""
    return (first + 1 + (shift + candidate) % (n - 1)) % n


# --- leader election ------------------------------------------------------------------------


def elect_leader_offline(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
    unclean_allowed: bool,
) -> LeaderElection:
    """A new leader when the partition is new or its leader died.

    Clean: the first live replica of the assignment that is in the ISR; the ISR keeps its live
    members. Unclean, only if allowed and no ISR replica is live: the first live replica; the ISR
    becomes just that replica.
    """
    live, in_sync = frozenset(live_brokers), frozenset(isr)
    leader = _first(assignment, lambda r: r in live and r in in_sync)
    if leader is not None:
        return LeaderElection(leader, [r for r in isr if r in live])
    if unclean_allowed:
        leader = _first(assignment, live.__contains__)
        if leader is not None:
            return LeaderElection(leader, [leader], unclean=True)
    return LeaderElection(None, list(isr))


def elect_leader_for_reassignment(
    target_replicas: Sequence[int], isr: Sequence[int], live_brokers: Collection[int]
) -> LeaderElection:
    """A leader from the reassignment's target replicas: the first live one in the ISR."""
    live, in_sync = frozenset(live_brokers), frozenset(isr)
    leader = _first(target_replicas, lambda r: r in live and r in in_sync)
    return LeaderElection(leader, list(isr))


def elect_preferred_leader(
    assignment: Sequence[int], isr: Sequence[int], live_brokers: Collection[int]
) -> LeaderElection:
    """Move leadership back to the preferred (first) replica, if it is live and in the ISR."""
    preferred = assignment[0] if assignment else None
    if preferred is not None and preferred in frozenset(live_brokers) and preferred in isr:
        return LeaderElection(preferred, list(isr))
    return LeaderElection(None, list(isr))


def elect_leader_for_controlled_shutdown(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
    shutting_down: Collection[int],
) -> LeaderElection:
    """Move leadership off brokers that are shutting down, before they stop.

    The leader is the first live ISR replica that is not shutting down (``live_brokers`` may
    include the shutting-down brokers or not); the ISR loses the shutting-down brokers.
    """
    live, in_sync, leaving = frozenset(live_brokers), frozenset(isr), frozenset(shutting_down)
    leader = _first(assignment, lambda r: r in live and r in in_sync and r not in leaving)
    if leader is None:
        return LeaderElection(None, list(isr))
    return LeaderElection(leader, [r for r in isr if r not in leaving])


def _first(replicas: Iterable[int], qualifies: Callable[[int], bool]) -> int | None:
    return next((r for r in replicas if qualifies(r)), None)
