"""Any sequence of adds, removes, changes and appends over a session reads as a sessionless fetch.

The fetcher's ``FetchSessionHandler`` and the broker's ``FetchSessionCache`` talk through real
kio Fetch v12 answers, over a leader modelled as plain numbers per partition. After every round
the broker must have read exactly the partitions the fetcher wanted with the fetcher's current
parameters, and the handler's merged results must say what a sessionless fetch of them would:
the same records, errors and offsets, a partition left out only when nothing about it changed.
Sessions lost on the broker (evicted) and requests lost on the way only cost a full fetch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12 import response as v12

from odradek.broker.fetch_session_client import FetchSessionHandler
from odradek.broker.fetch_sessions import FetchResponseData, FetchSessionCache
from odradek.broker.replica_manager import FetchPartitionRequest, FetchResult
from odradek.errors import ErrorCode
from odradek.storage.segment import FileSlice

PARTITIONS = [("a", 0), ("a", 1), ("b", 0)]
ROUND_RETRIES_MAX = 3  # a round needs at most: an error answer, then a full fetch


@dataclass
class LeaderPartition:
    """A partition's offsets; the fetcher is a follower, so it reads up to the log end."""

    log_end_offset: int = 0
    high_watermark: int = 0  # lags the log end until "replicate"
    last_stable_offset: int = 0  # lags the high watermark until "stabilise"
    log_start_offset: int = 0
    failing: bool = False

    def read(self, request: FetchPartitionRequest) -> FetchResult:
        if self.failing:
            return FetchResult(request.topic, request.partition, ErrorCode.not_leader_or_follower)
        if not self.log_start_offset <= request.fetch_offset <= self.log_end_offset:
            return FetchResult(request.topic, request.partition, ErrorCode.offset_out_of_range)
        size = min(self.log_end_offset - request.fetch_offset, request.max_bytes)
        slice_ = FileSlice(None, 0, size, request.fetch_offset + size) if size else None  # type: ignore[arg-type]
        return FetchResult(
            request.topic,
            request.partition,
            high_watermark=self.high_watermark,
            last_stable_offset=self.last_stable_offset,
            log_start_offset=self.log_start_offset,
            records=slice_,
        )


def encode(answer: FetchResponseData) -> v12.FetchResponse:
    """The answer as the fetcher decodes it; a record set of n bytes stands for n records."""
    by_topic: dict[str, list[v12.PartitionData]] = {}
    for r in answer.results:
        by_topic.setdefault(r.topic, []).append(
            v12.PartitionData(
                partition_index=r.partition,
                error_code=r.error,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted_transactions=(),
                records=b"x" * r.size if r.records is not None else b"",
            )
        )
    return v12.FetchResponse(
        throttle_time=timedelta(0),
        error_code=answer.error,
        session_id=answer.session_id,
        responses=tuple(
            v12.FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )


ACTIONS = [
    "add",  # the fetcher wants one more partition
    "remove",  # and one less
    "rewind",  # fetches a partition from its log start again
    "max_bytes",
    "epoch",  # learns a new leader epoch
    "append",  # records land on the leader
    "replicate",  # every high watermark reaches its log end, no new records
    "stabilise",  # every last stable offset reaches its high watermark
    "truncate_start",  # every log start moves up (retention, DeleteRecords)
    "fail",  # the partition answers with an error
    "recover",
    "evict",  # the broker loses every session
    "lose_request",  # a request never gets its answer
    "nothing",
]
steps = st.lists(
    st.tuples(
        st.sampled_from(ACTIONS),
        st.sampled_from(PARTITIONS),
        st.integers(min_value=1, max_value=5),
    ),
    max_size=60,
)


@settings(max_examples=1000, deadline=None)
@given(
    first=st.sets(st.sampled_from(PARTITIONS), min_size=1),
    steps=steps,
    seed=st.integers(0, 2**32 - 1),
)
def test_an_incremental_session_reads_what_a_sessionless_fetch_would(first, steps, seed):
    leader = {key: LeaderPartition() for key in PARTITIONS}
    wanted = {key: FetchPartitionRequest(key[0], key[1], 0, 3) for key in sorted(first)}
    sessions = FetchSessionCache(10, 100, rng=random.Random(seed))
    handler = FetchSessionHandler(node_id=1)

    fetch_round(leader, wanted, sessions, handler)
    for action, key, amount in steps:
        partition = leader[key]
        if action == "add" and key not in wanted:
            wanted[key] = FetchPartitionRequest(key[0], key[1], partition.log_start_offset, 3)
        elif action == "remove":
            wanted.pop(key, None)
        elif action == "rewind" and key in wanted:
            wanted[key] = replace(wanted[key], fetch_offset=partition.log_start_offset)
        elif action == "max_bytes" and key in wanted:
            wanted[key] = replace(wanted[key], max_bytes=amount)
        elif action == "epoch" and key in wanted:
            wanted[key] = replace(wanted[key], current_leader_epoch=amount)
        elif action == "append":
            partition.log_end_offset += amount
        elif action == "replicate":
            for each in leader.values():
                each.high_watermark = each.log_end_offset
        elif action == "stabilise":
            for each in leader.values():
                each.last_stable_offset = each.high_watermark
        elif action == "truncate_start":
            for each in leader.values():
                each.log_start_offset = min(each.log_start_offset + amount, each.high_watermark)
        elif action == "fail":
            partition.failing = True
        elif action == "recover":
            partition.failing = False
        elif action == "evict":
            for session_id in list(sessions.sessions):
                sessions.remove(session_id)
        elif action == "lose_request":
            handler.build(wanted.values())
            handler.handle_error()
        fetch_round(leader, wanted, sessions, handler)  # after every step


def fetch_round(leader, wanted, sessions, handler) -> None:
    for _ in range(ROUND_RETRIES_MAX):
        request = handler.build(wanted.values())
        context = sessions.new_context(
            request.session_id,
            request.session_epoch,
            request.to_send,
            request.to_forget,
            privileged=True,
        )
        if not context.error:
            read = {(p.topic, p.partition): p for p in context.partitions}
            assert read == wanted, "the broker reads what the fetcher wants, as it wants it"
        results = [leader[(p.topic, p.partition)].read(p) for p in context.partitions]
        merged = handler.handle_response(encode(context.respond(results)))
        if merged is None:
            assert context.error, "only a session error drops an answer"
            continue
        assert merged.keys() == wanted.keys()
        for key, request in wanted.items():
            sessionless = leader[key].read(request)
            got = merged[key]
            assert (got.error, got.high_watermark, got.last_stable_offset) == (
                sessionless.error,
                sessionless.high_watermark,
                sessionless.last_stable_offset,
            )
            assert got.log_start_offset == sessionless.log_start_offset
            assert len(got.records or b"") == sessionless.size
            if not got.in_response:
                assert sessionless.size == 0 and sessionless.error == ErrorCode.none
        for key, got in merged.items():  # the fetcher moves past the records it got
            if got.records:
                wanted[key] = replace(
                    wanted[key], fetch_offset=wanted[key].fetch_offset + len(got.records)
                )
        return
    raise AssertionError(f"no answer within {ROUND_RETRIES_MAX} requests")
