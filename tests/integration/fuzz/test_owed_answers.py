"""The harness's rule for owed answers (``traffic._owed_deadlines``): what follows a well-formed
request on its connection never excuses its answer, pipelined or not, as Kafka answers a request
before it reads the next one; after a request that is not well-formed nothing is owed."""

from __future__ import annotations

from fuzzing.strategies import Case, Round
from fuzzing.traffic import ANSWER_GRACE_S, _owed_deadlines


def _case(*, mutated: bool = False, breaks_stream: bool = False, wait_ms: int = 0) -> Case:
    return Case(
        target=0,
        api_key=0,
        api_version=9,
        frame=b"\0\0\0\0",
        description="",
        mutated=mutated or breaks_stream,
        breaks_stream=breaks_stream,
        answer_expected=not (mutated or breaks_stream),
        wait_ms=wait_ms,
        produce=(),
    )


def test_a_bad_request_or_frame_behind_a_pipelined_request_leaves_its_answer_owed():
    cases = (
        _case(wait_ms=1000),  # connection 0: an acks=all produce that may wait 1 s
        _case(),
        _case(mutated=True),  # a request that does not parse
        _case(),  # after it: nothing owed
        _case(),  # connection 1: answered before a broken size prefix
        _case(breaks_stream=True),
        _case(),
    )
    owed = _owed_deadlines(Round(cases, (0, 0, 0, 0, 1, 1, 1), (True, True)), [True])
    assert [o for o, _ in owed] == [True, True, False, False, True, False, False]
    # A later answer waits behind an earlier one's wait: its deadline includes it.
    assert owed[1][1] == 1.0 + ANSWER_GRACE_S


def test_a_target_that_answers_nothing_is_owed_nothing():
    # Kafka requests in the clear on a TLS listener (``Role.RAW``): its answer is a TLS alert.
    owed = _owed_deadlines(Round((_case(), _case()), (0, 0), (False,)), [False])
    assert [o for o, _ in owed] == [False, False]
