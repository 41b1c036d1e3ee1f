"""The shapes' rounds (``fuzzing.shapes``), drawn without a cluster: a huge array is one
well-formed request within its budget and without a record set, a pipeline is well-formed
requests with consecutive correlation ids whose answers may wait behind each other, and the same
seed draws the same bytes (a failing run replays)."""

from __future__ import annotations

import dataclasses

import pytest
from fuzzing.shapes import (
    HUGE_ARRAY_BUDGETS_BYTES,
    HUGE_ARRAYS,
    PIPELINED,
    PIPELINED_COUNTS,
    PIPELINED_WORK_S,
    shaped_round,
)
from fuzzing.strategies import Pools, Round
from fuzzing.traffic import ANSWER_GRACE_S, _owed_deadlines
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from odradek.protocol.apis import SUPPORTED_VERSIONS
from odradek.protocol.codec import decode_request

POOLS = Pools(
    topics=("fuzz-plain", "fuzz-keyed"),
    led=(("fuzz-plain", 0), ("fuzz-keyed", 0)),
    scratch_topics=("fuzz-scratch-0",),
    partitions=3,
    broker_ids=(1, 2),
    max_frame_bytes=16 * 1024 * 1024,
    base_time_ms=1_796_000_000_000,
    work_shapes=True,
)
TARGETS = [(dict(SUPPORTED_VERSIONS), POOLS)]
SHAPED = st.sampled_from((HUGE_ARRAYS, PIPELINED)).flatmap(lambda k: shaped_round(TARGETS, k))
EXAMPLES = 30


def _draw_rounds(run_seed: int) -> list[Round]:
    drawn: list[Round] = []

    @seed(run_seed)
    @settings(
        max_examples=EXAMPLES,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        drawn.append(data.draw(SHAPED))

    draw()
    return drawn


def test_shapes_are_well_formed_requests_within_their_bounds():
    drawn = _draw_rounds(23)
    assert {r.kind for r in drawn} == {HUGE_ARRAYS, PIPELINED}
    for round_ in drawn:
        assert round_.pipelined == (True,) and set(round_.connection_of) == {0}
        for case in round_.cases:
            assert not case.mutated and not case.breaks_stream and case.produce == ()
            decoded = decode_request(case.frame[4:])
            assert (decoded.header.api_key, decoded.header.api_version) == (
                case.api_key,
                case.api_version,
            )
        if round_.kind == HUGE_ARRAYS:
            [case] = round_.cases
            assert len(case.frame) - 4 <= max(HUGE_ARRAY_BUDGETS_BYTES) + 64
            assert case.work_s > 0
        else:
            assert len(round_.cases) <= max(PIPELINED_COUNTS)
            ids = [decode_request(c.frame[4:]).header.correlation_id for c in round_.cases]
            assert ids == list(range(ids[0], ids[0] + len(ids)))


def test_a_pipelined_answer_may_wait_behind_those_before_it():
    [round_] = [r for r in _draw_rounds(23) if r.kind == PIPELINED][:1]
    cases = tuple(dataclasses.replace(c, wait_ms=0) for c in round_.cases)
    owed = _owed_deadlines(dataclasses.replace(round_, cases=cases), [True])
    assert owed[0][1] == ANSWER_GRACE_S + PIPELINED_WORK_S
    assert owed[-1][1] == pytest.approx(ANSWER_GRACE_S + len(cases) * PIPELINED_WORK_S)


def test_a_seed_draws_the_same_bytes():
    first, again = _draw_rounds(7), _draw_rounds(7)
    assert [[c.frame for c in r.cases] for r in first] == [
        [c.frame for c in r.cases] for r in again
    ]
