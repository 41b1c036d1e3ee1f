"""Replica placement and leader election follow Kafka's algorithms, test cases and invariants."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.cluster.placement import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    LeaderElection,
    PlacementError,
    RackAwareMode,
    assign_additional_partitions,
    assign_replicas,
    elect_leader_for_controlled_shutdown,
    elect_leader_for_reassignment,
    elect_leader_offline,
    elect_preferred_leader,
    rack_alternated_brokers,
)
from odradek.errors import ErrorCode, OdradekError

# Broker -> rack maps used throughout Kafka's AdminRackAwareTest.
SIX_BROKERS_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
UNEVEN_RACKS = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
RACK2_HEAVY = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
TWELVE_BROKERS = {
    **{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
    **{6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
}


def no_racks(*ids: int) -> dict[int, str | None]:
    return dict.fromkeys(ids)


def counts(broker_ids: Iterable[int], brokers: Mapping) -> dict[int, int]:
    """Occurrences of every broker (zero included) in the given broker ids."""
    tally = dict.fromkeys(brokers, 0)
    for broker in broker_ids:
        tally[broker] += 1
    return tally


def check_distribution(
    assignment: Mapping[int, Sequence[int]],
    rack_of: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    *,
    rack_aware: bool = True,
    leaders_even: bool = True,
    replicas_even: bool = True,
) -> None:
    """Kafka's ``RackAwareTest.checkReplicaDistribution``."""
    n = len(rack_of)
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas) == replication_factor
    if rack_aware:
        for replicas in assignment.values():
            assert len({rack_of[b] for b in replicas}) == replication_factor
    if leaders_even:
        leaders = counts((r[0] for r in assignment.values()), rack_of)
        assert set(leaders.values()) == {partitions // n}
    if replicas_even:
        replicas = counts((b for r in assignment.values() for b in r), rack_of)
        assert set(replicas.values()) == {partitions * replication_factor // n}


# --- Kafka's own expectations ---------------------------------------------------------------


def test_kafka_admin_test_replica_assignment():
    # AdminTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start index 0.
    brokers = no_racks(0, 1, 2, 3, 4)
    assert assign_replicas(10, 3, brokers, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    for bad_replication_factor in (0, 6):
        with pytest.raises(InvalidReplicationFactorError):
            assign_replicas(10, bad_replication_factor, brokers)


def test_kafka_rack_alternated_list_and_assignment():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    rack_of = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(rack_of) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in rack_of.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(7, 3, rack_of, start_index=0, start_partition_id=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the second round shifts the followers instead of repeating partition 0
    }


def test_kafka_rack_aware_fixed_start_index():
    # AdminRackAwareTest.testAssignmentWithRackAware.
    assignment = assign_replicas(6, 3, SIX_BROKERS_THREE_RACKS, start_index=2)
    check_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 3)


def test_kafka_rack_aware_uneven_replicas():
    # AdminRackAwareTest.testAssignmentWithRackAwareWithUnevenReplicas.
    assignment = assign_replicas(13, 3, SIX_BROKERS_THREE_RACKS, start_index=0)
    check_distribution(
        assignment, SIX_BROKERS_THREE_RACKS, 13, 3, leaders_even=False, replicas_even=False
    )


def test_kafka_skip_broker_with_replica_already_assigned():
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: RF 4 over 3 racks.
    rack_of = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(6, 4, rack_of, start_index=2)
    check_distribution(
        assignment, rack_of, 6, 4, rack_aware=False, leaders_even=False, replicas_even=False
    )


# Kafka's random-start cases: (rack map, partitions, RF, start_partition_id, checks).
KAFKA_RANDOM_START_CASES = {
    "testAssignmentWithRackAwareWithRandomStartIndex": (SIX_BROKERS_THREE_RACKS, 6, 3, 0, {}),
    "testAssignmentWithRackAwareWithUnevenRacks": (
        UNEVEN_RACKS,
        12,
        3,
        0,
        {"replicas_even": False},
    ),
    "testAssignmentWith2ReplicasRackAware": (SIX_BROKERS_THREE_RACKS, 12, 2, 0, {}),
    "testRackAwareExpansion": (
        {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"},
        12,
        2,
        12,
        {},
    ),
    "testAssignmentWith2ReplicasRackAwareWith6Partitions": (SIX_BROKERS_THREE_RACKS, 6, 2, 0, {}),
    "testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers": (
        {0: "rack1", 1: "rack2", 4: "rack3"},
        3,
        2,
        0,
        {},
    ),
    "testLargeNumberPartitionsAssignment": (TWELVE_BROKERS, 96, 3, 0, {}),
}


@pytest.mark.parametrize("case", sorted(KAFKA_RANDOM_START_CASES))
@given(rng=st.randoms(use_true_random=False))
@settings(max_examples=50, deadline=None)
def test_kafka_rack_aware_random_start(case, rng):
    rack_of, partitions, replication_factor, start_partition_id, checks = KAFKA_RANDOM_START_CASES[
        case
    ]
    assignment = assign_replicas(
        partitions, replication_factor, rack_of, start_partition_id=start_partition_id, rng=rng
    )
    assert sorted(assignment) == list(range(start_partition_id, start_partition_id + partitions))
    check_distribution(assignment, rack_of, partitions, replication_factor, **checks)


@given(rng=st.randoms(use_true_random=False))
def test_kafka_more_and_fewer_replicas_than_racks(rng):
    # AdminRackAwareTest.testMoreReplicasThanRacks, testLessReplicasThanRacks, testSingleRack.
    for replication_factor, racks_per_partition in ((5, 3), (2, 2)):
        assignment = assign_replicas(6, replication_factor, RACK2_HEAVY, rng=rng)
        for replicas in assignment.values():
            assert len(replicas) == replication_factor
            assert len({RACK2_HEAVY[b] for b in replicas}) == racks_per_partition
    one_rack = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(6, 3, one_rack, rng=rng)
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    assert set(counts((r[0] for r in assignment.values()), one_rack).values()) == {1}


def test_kafka_add_partitions_all_servers():
    # AddPartitionsTest.testReplicaPlacementAllServers: 4 brokers, partition 0 on [2, 3, 0, 1].
    added = assign_additional_partitions({0: [2, 3, 0, 1]}, 7, no_racks(0, 1, 2, 3))
    leaders = {partition: replicas[0] for partition, replicas in added.items()}
    assert leaders == {1: 3, 2: 0, 3: 1, 4: 2, 5: 3, 6: 0}
    assert all(sorted(replicas) == [0, 1, 2, 3] for replicas in added.values())


def test_kafka_add_partitions_partial_servers():
    # AddPartitionsTest.testReplicaPlacementPartialServers: partition 0 on [1, 2].
    added = assign_additional_partitions({0: [1, 2]}, 3, no_racks(0, 1, 2, 3))
    assert {p: (r[0], set(r)) for p, r in added.items()} == {1: (2, {0, 2}), 2: (3, {1, 3})}


def test_kafka_add_partitions_missing_partition_0():
    # AddPartitionsTest.testMissingPartition0.
    with pytest.raises(PlacementError, match="partition id 0 is missing"):
        assign_additional_partitions({1: [0, 1]}, 3, no_racks(0, 1, 2, 3))


# Kafka's PartitionLeaderElectionAlgorithmsTest, case by case: (function, arguments, leader).
KAFKA_ELECTION_CASES = {
    "testOfflinePartitionLeaderElection": (elect_leader_offline, ([2, 4], [2, 4], {4}, False), 4),
    "testOfflinePartitionLeaderElectionLastIsrOfflineUncleanLeaderElectionDisabled": (
        elect_leader_offline,
        ([2, 4], [2], {4}, False),
        None,
    ),
    "testOfflinePartitionLeaderElectionLastIsrOfflineUncleanLeaderElectionEnabled": (
        elect_leader_offline,
        ([2, 4], [2], {4}, True),
        4,
    ),
    "testReassignPartitionLeaderElection": (
        elect_leader_for_reassignment,
        ([2, 4], [2, 4], {4}),
        4,
    ),
    "testReassignPartitionLeaderElectionWithNoLiveIsr": (
        elect_leader_for_reassignment,
        ([2, 4], [2], set()),
        None,
    ),
    "testReassignPartitionLeaderElectionWithEmptyIsr": (
        elect_leader_for_reassignment,
        ([2, 4], [], {2}),
        None,
    ),
    "testPreferredReplicaPartitionLeaderElection": (
        elect_preferred_leader,
        ([2, 4], [2, 4], {2, 4}),
        2,
    ),
    "testPreferredReplicaPartitionLeaderElectionPreferredReplicaInIsrNotLive": (
        elect_preferred_leader,
        ([2, 4], [2], set()),
        None,
    ),
    "testPreferredReplicaPartitionLeaderElectionPreferredReplicaNotInIsrLive": (
        elect_preferred_leader,
        ([2, 4], [4], {2, 4}),
        None,
    ),
    "testPreferredReplicaPartitionLeaderElectionPreferredReplicaNotInIsrNotLive": (
        elect_preferred_leader,
        ([2, 4], [], set()),
        None,
    ),
    "testControlledShutdownPartitionLeaderElection": (
        elect_leader_for_controlled_shutdown,
        ([2, 4], [2, 4], {2, 4}, {2}),
        4,
    ),
    "testControlledShutdownPartitionLeaderElectionLastIsrShuttingDown": (
        elect_leader_for_controlled_shutdown,
        ([2, 4], [2], {2, 4}, {2}),
        None,
    ),
    "testControlledShutdownPartitionLeaderElectionAllIsrSimultaneouslyShutdown": (
        elect_leader_for_controlled_shutdown,
        ([2, 4], [2, 4], {2, 4}, {2, 4}),
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(KAFKA_ELECTION_CASES))
def test_kafka_election_cases(case):
    elect, arguments, expected_leader = KAFKA_ELECTION_CASES[case]
    assert elect(*arguments).leader == expected_leader


def test_election_isr_follows_kafka():
    # Kafka's Election.leaderFor*: the ISR each kind of election writes with its leader.
    assert elect_leader_offline([2, 4, 5], [2, 4, 5], {4, 5}, False) == LeaderElection(4, [4, 5])
    assert elect_leader_offline([2, 4], [2], {4}, True) == LeaderElection(4, [4], unclean=True)
    assert elect_leader_offline([2, 4], [2], {4}, False) == LeaderElection(None, [2])
    assert elect_preferred_leader([2, 4], [4, 2], {2, 4}) == LeaderElection(2, [4, 2])
    assert elect_leader_for_controlled_shutdown([2, 4, 5], [2, 4, 5], {2, 4, 5}, {2}) == (
        LeaderElection(4, [4, 5])
    )


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "code"),
    [
        (lambda: assign_replicas(0, 1, no_racks(1)), InvalidPartitionsError, 37),
        (lambda: assign_replicas(-3, 1, no_racks(1)), InvalidPartitionsError, 37),
        (lambda: assign_replicas(3, 0, no_racks(1)), InvalidReplicationFactorError, 38),
        (lambda: assign_replicas(3, 2, no_racks(1)), InvalidReplicationFactorError, 38),
        (lambda: assign_replicas(3, 1, {}), InvalidReplicationFactorError, 38),
        (lambda: assign_replicas(3, 1, {1: "a", 2: None}), PlacementError, -1),
        (
            lambda: assign_additional_partitions({0: [1], 1: [2]}, 2, no_racks(1, 2)),
            InvalidPartitionsError,
            37,
        ),
        (
            lambda: assign_additional_partitions({0: [1], 2: [2]}, 4, no_racks(1, 2)),
            PlacementError,
            -1,
        ),
    ],
)
def test_errors_carry_kafka_codes(call, error, code):
    with pytest.raises(error) as raised:
        call()
    assert isinstance(raised.value, OdradekError)
    assert raised.value.error_code is ErrorCode(code)
    assert not raised.value.retriable


def test_partial_rack_information():
    brokers = {1: "a", 2: None, 3: "b"}
    with pytest.raises(PlacementError, match=r"Not all brokers have rack information.*\[2\]"):
        assign_replicas(3, 2, brokers, start_index=0)
    unaware = assign_replicas(3, 2, no_racks(1, 2, 3), start_index=0)
    for mode in (RackAwareMode.SAFE, RackAwareMode.DISABLED):
        assert assign_replicas(3, 2, brokers, start_index=0, rack_aware_mode=mode) == unaware
    # DISABLED ignores racks even when every broker has one; SAFE then uses them.
    full = {1: "a", 2: "a", 3: "b"}
    disabled = RackAwareMode.DISABLED
    assert assign_replicas(3, 2, full, start_index=0, rack_aware_mode=disabled) == unaware
    safe = assign_replicas(3, 2, full, start_index=0, rack_aware_mode=RackAwareMode.SAFE)
    assert all(len({full[b] for b in replicas}) == 2 for replicas in safe.values())


# --- properties -----------------------------------------------------------------------------


@st.composite
def clusters(draw, *, racks: bool | None = None) -> dict[int, str | None]:
    """Up to 12 live brokers with arbitrary ids, each with a rack from up to 4, or none."""
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    with_racks = draw(st.booleans()) if racks is None else racks
    if not with_racks:
        return dict.fromkeys(ids)
    names = st.sampled_from(["r0", "r1", "r2", "r3"][: draw(st.integers(1, 4))])
    return {broker: draw(names) for broker in ids}


@st.composite
def placements(draw, *, racks: bool | None = None):
    brokers = draw(clusters(racks=racks))
    replication_factor = draw(st.integers(1, len(brokers)))
    partitions = draw(st.integers(1, 60))
    start_partition_id = draw(st.integers(0, 40))
    rng = draw(st.randoms(use_true_random=False))
    assignment = assign_replicas(
        partitions, replication_factor, brokers, start_partition_id=start_partition_id, rng=rng
    )
    return brokers, replication_factor, partitions, start_partition_id, assignment


@given(placements())
def test_every_partition_gets_distinct_replicas_from_the_brokers(placement):
    brokers, replication_factor, partitions, start_partition_id, assignment = placement
    assert list(assignment) == list(range(start_partition_id, start_partition_id + partitions))
    for replicas in assignment.values():
        assert len(replicas) == len(set(replicas)) == replication_factor
        assert set(replicas) <= set(brokers)


@given(placements())
def test_leaders_are_round_robin(placement):
    # Kafka guarantees at most one partition of difference between any two brokers' preferred
    # leader counts, for any partition count; equal counts when it is a multiple of the brokers.
    brokers, _, partitions, _, assignment = placement
    leaders = counts((r[0] for r in assignment.values()), brokers).values()
    assert max(leaders) - min(leaders) <= 1
    if partitions % len(brokers) == 0:
        assert set(leaders) == {partitions // len(brokers)}


@given(placements(racks=False))
def test_rack_unaware_replicas_are_even_over_aligned_blocks(placement):
    brokers, replication_factor, partitions, start_partition_id, assignment = placement
    n = len(brokers)
    replicas = counts((b for r in assignment.values() for b in r), brokers).values()
    if start_partition_id % n == 0 and partitions % n == 0:
        assert set(replicas) == {partitions * replication_factor // n}


@given(placements(racks=True))
def test_replicas_span_as_many_racks_as_they_can(placement):
    brokers, replication_factor, _, _, assignment = placement
    num_racks = len(set(brokers.values()))
    for replicas in assignment.values():
        assert len({brokers[b] for b in replicas}) == min(replication_factor, num_racks)


@given(
    num_racks=st.integers(1, 4),
    rack_size=st.integers(1, 4),
    blocks=st.integers(1, 5),
    start_block=st.integers(0, 3),
    rng=st.randoms(use_true_random=False),
)
def test_equal_racks_with_one_replica_each_are_even(num_racks, rack_size, blocks, start_block, rng):
    # Kafka's "perfect situation": RF == racks, racks of equal size, whole rounds of partitions.
    brokers = {b: f"rack{b % num_racks}" for b in range(num_racks * rack_size)}
    n = len(brokers)
    assignment = assign_replicas(
        blocks * n, num_racks, brokers, start_partition_id=start_block * n, rng=rng
    )
    replicas = counts((b for r in assignment.values() for b in r), brokers).values()
    assert set(replicas) == {blocks * num_racks}


@given(clusters(racks=False), st.integers(1, 40), st.integers(0, 20), st.integers(0, 2**32))
def test_placement_is_reproducible(brokers, partitions, start_partition_id, seed):
    def place(**kwargs):
        return assign_replicas(
            partitions, len(brokers), brokers, start_partition_id=start_partition_id, **kwargs
        )

    assert place(rng=random.Random(seed)) == place(rng=random.Random(seed))
    assert place(start_index=seed % 50) == place(start_index=seed % 50)
    # A single rack places exactly as no racks at all.
    one_rack = dict.fromkeys(brokers, "only")
    assert assign_replicas(partitions, 1, one_rack, start_index=seed % 7) == assign_replicas(
        partitions, 1, brokers, start_index=seed % 7
    )


@given(
    clusters(),
    st.integers(1, 30),
    st.integers(1, 30),
    st.data(),
)
def test_added_partitions_continue_the_topic(brokers, initial, more, data):
    replication_factor = data.draw(st.integers(1, len(brokers)))
    rng = data.draw(st.randoms(use_true_random=False))
    existing = assign_replicas(initial, replication_factor, brokers, rng=rng)
    added = assign_additional_partitions(existing, initial + more, brokers)
    assert list(added) == list(range(initial, initial + more))
    for replicas in added.values():
        assert len(replicas) == len(set(replicas)) == replication_factor
    if all(rack is None for rack in brokers.values()):
        # The preferred leaders of the whole grown topic are still one round-robin.
        ids = sorted(brokers)
        offset = ids.index(existing[0][0])
        everything = {**existing, **added}
        assert [everything[p][0] for p in everything] == [
            ids[(p + offset) % len(ids)] for p in range(initial + more)
        ]


@st.composite
def partition_states(draw):
    """An assignment, an ISR within it, and which brokers are live and which shutting down."""
    assignment = draw(st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True))
    shuffled = draw(st.permutations(assignment))
    isr = shuffled[: draw(st.integers(0, len(shuffled)))]
    live = draw(st.sets(st.integers(0, 7)))
    shutting_down = draw(st.sets(st.sampled_from(sorted(live)))) if live else set()
    return assignment, isr, live, shutting_down


@given(partition_states(), st.booleans())
def test_offline_election(state, unclean_allowed):
    assignment, isr, live, _ = state
    leader, new_isr, unclean = elect_leader_offline(assignment, isr, live, unclean_allowed)
    live_isr = [r for r in assignment if r in live and r in isr]
    if leader is None:
        assert not live_isr
        assert not unclean_allowed or not live & set(assignment)
        assert new_isr == isr
    elif not unclean:
        assert leader == live_isr[0]  # the first qualifying replica: the preferred one if it can
        assert leader in new_isr and set(new_isr) <= set(isr) & live
    else:
        assert unclean_allowed and not live_isr
        assert leader in live and leader in assignment
        assert new_isr == [leader]


@given(partition_states())
def test_preferred_and_reassignment_elections(state):
    assignment, isr, live, _ = state
    preferred = elect_preferred_leader(assignment, isr, live)
    qualifies = assignment[0] in live and assignment[0] in isr
    assert preferred == LeaderElection(assignment[0] if qualifies else None, isr)
    reassigned = elect_leader_for_reassignment(assignment, isr, live)
    assert reassigned.isr == isr and not reassigned.unclean
    assert reassigned.leader is None or (reassigned.leader in isr and reassigned.leader in live)


@given(partition_states())
def test_controlled_shutdown_election(state):
    assignment, isr, live, shutting_down = state
    leader, new_isr, unclean = elect_leader_for_controlled_shutdown(
        assignment, isr, live, shutting_down
    )
    assert not unclean
    if leader is None:
        assert new_isr == isr
        assert all(r not in live or r not in isr or r in shutting_down for r in assignment)
    else:
        assert leader in live and leader in isr and leader not in shutting_down
        assert leader in new_isr and not set(new_isr) & shutting_down
        assert new_isr == [r for r in isr if r not in shutting_down]
