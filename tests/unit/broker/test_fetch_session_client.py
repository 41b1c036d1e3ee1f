"""The fetcher's session handler builds KIP-227 requests, merges answers, and restarts sessions."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.fetch.v12 import response as v12

from odradek.broker.fetch_session_client import FetchedPartition, FetchSessionHandler
from odradek.broker.fetch_sessions import EPOCH_MAX, INITIAL_EPOCH, INVALID_SESSION_ID
from odradek.broker.replica_manager import FetchPartitionRequest
from odradek.errors import ErrorCode


def want(topic: str, partition: int, offset: int = 0, **fields) -> FetchPartitionRequest:
    return FetchPartitionRequest(topic, partition, offset, 1 << 20, **fields)


def answer(
    session_id: int,
    partitions: list[tuple[str, int, int]] = (),  # (topic, partition, high watermark)
    *,
    error: ErrorCode = ErrorCode.none,
    records: bytes = b"",
    diverging: tuple[int, int] | None = None,
) -> v12.FetchResponse:
    """A decoded Fetch v12 answer, as kio gives it."""
    by_topic: dict[str, list[v12.PartitionData]] = {}
    for topic, index, hw in partitions:
        extra = {}
        if diverging is not None:
            extra["diverging_epoch"] = v12.EpochEndOffset(
                epoch=diverging[0], end_offset=diverging[1]
            )
        by_topic.setdefault(topic, []).append(
            v12.PartitionData(
                partition_index=index,
                error_code=ErrorCode.none,
                high_watermark=hw,
                last_stable_offset=hw,
                log_start_offset=0,
                aborted_transactions=(),
                records=records,
                **extra,
            )
        )
    return v12.FetchResponse(
        throttle_time=timedelta(0),
        error_code=error,
        session_id=session_id,
        responses=tuple(
            v12.FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )


def opened(handler: FetchSessionHandler, partitions, session_id: int = 77):
    request = handler.build(partitions)
    assert request.is_full
    results = handler.handle_response(
        answer(session_id, [(p.topic, p.partition, 10) for p in partitions])
    )
    assert results is not None
    return results


def test_the_first_request_is_full_and_asks_for_a_session():
    handler = FetchSessionHandler(node_id=1)
    request = handler.build([want("a", 0), want("a", 1)])
    assert (request.session_id, request.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert request.to_send == (want("a", 0), want("a", 1)) and request.to_forget == ()


def test_in_a_session_only_new_and_changed_partitions_are_sent():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0), want("a", 1), want("b", 0)])
    request = handler.build([want("a", 0), want("a", 1, offset=5), want("c", 0)])
    assert (request.session_id, request.session_epoch) == (77, 1)
    assert request.to_send == (want("c", 0), want("a", 1, offset=5))
    assert request.to_forget == (("b", 0),)
    assert set(request.session_partitions) == {("a", 0), ("a", 1), ("c", 0)}
    # Nothing changed: an empty request, the next epoch.
    handler.handle_response(answer(77))
    request = handler.build([want("a", 0), want("a", 1, offset=5), want("c", 0)])
    assert (request.session_epoch, request.to_send, request.to_forget) == (2, (), ())


def test_every_field_of_the_fetch_state_counts_as_a_change():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0)])
    for changed in [
        want("a", 0, current_leader_epoch=3),
        want("a", 0, current_leader_epoch=3, last_fetched_epoch=2),
        want("a", 0, current_leader_epoch=3, last_fetched_epoch=2, log_start_offset=1),
    ]:
        assert handler.build([changed]).to_send == (changed,)
        assert handler.handle_response(answer(77)) is not None


def test_an_incremental_answer_is_merged_with_the_unchanged_partitions():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0), want("a", 1)])
    handler.build([want("a", 0), want("a", 1)])
    results = handler.handle_response(answer(77, [("a", 1, 12)], records=b"batch"))
    assert results == {
        ("a", 1): FetchedPartition("a", 1, ErrorCode.none, 12, 12, 0, b"batch"),
        ("a", 0): FetchedPartition("a", 0, ErrorCode.none, 10, 10, 0, in_response=False),
    }


def test_the_diverging_epoch_is_read_only_when_the_leader_set_it():
    handler = FetchSessionHandler(node_id=1)
    (result,) = opened(handler, [want("a", 0)]).values()
    assert result.diverging_epoch is None
    handler.build([want("a", 0)])
    (result,) = handler.handle_response(answer(77, [("a", 0, 10)], diverging=(4, 90))).values()
    assert result.diverging_epoch == (4, 90)


def test_epochs_wrap_from_the_largest_to_one():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0)])
    handler.epoch = EPOCH_MAX
    assert handler.build([want("a", 0)]).session_epoch == EPOCH_MAX
    handler.handle_response(answer(77))
    assert handler.build([want("a", 0)]).session_epoch == 1


def test_session_id_not_found_starts_over_without_an_id():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0)])
    handler.build([want("a", 0)])
    assert handler.handle_response(answer(0, error=ErrorCode.fetch_session_id_not_found)) is None
    request = handler.build([want("a", 0)])
    assert (request.session_id, request.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert request.to_send == (want("a", 0),)


def test_other_session_errors_and_lost_requests_close_the_session_with_a_full_request():
    for fail in (
        lambda h: h.handle_response(answer(0, error=ErrorCode.invalid_fetch_session_epoch)),
        lambda h: h.handle_response(answer(0, error=ErrorCode.fetch_session_topic_id_error)),
        lambda h: h.handle_error(),
    ):
        handler = FetchSessionHandler(node_id=1)
        opened(handler, [want("a", 0), want("b", 0)])
        handler.build([want("a", 0), want("b", 0)])
        assert fail(handler) is None
        request = handler.build([want("a", 0), want("b", 0)])
        assert (request.session_id, request.session_epoch) == (77, INITIAL_EPOCH)
        assert request.to_send == (want("a", 0), want("b", 0))


def test_answers_that_do_not_match_the_request_are_dropped():
    handler = FetchSessionHandler(node_id=1)
    handler.build([want("a", 0), want("a", 1)])
    assert handler.handle_response(answer(5, [("a", 0, 1)])) is None  # a full answer omits a-1
    assert handler.build([want("a", 0)]).session_epoch == INITIAL_EPOCH
    opened(handler, [want("a", 0)])
    handler.build([want("a", 0)])
    assert handler.handle_response(answer(77, [("x", 0, 1)])) is None  # outside the session
    assert handler.build([want("a", 0)]).session_epoch == INITIAL_EPOCH


def test_an_answer_without_a_session_keeps_requests_full():
    handler = FetchSessionHandler(node_id=1)
    opened(handler, [want("a", 0)], session_id=INVALID_SESSION_ID)
    request = handler.build([want("a", 0)])
    assert (request.session_id, request.session_epoch) == (0, 0) and request.to_send
    # An incremental answer with id 0: the broker closed the session.
    opened(handler, [want("a", 0)])
    handler.build([want("a", 0)])
    assert handler.handle_response(answer(INVALID_SESSION_ID)) is not None
    assert handler.build([want("a", 0)]).session_epoch == INITIAL_EPOCH
