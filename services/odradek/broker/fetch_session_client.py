"""Incremental fetch sessions (KIP-227), the fetcher's side: Kafka's ``FetchSessionHandler``.

A replica fetcher keeps one handler per leader broker. Each round it calls ``build`` with every
partition it wants and the current fetch state of each (a ``FetchPartitionRequest``: fetch
offset, partition max bytes, current leader epoch, last fetched epoch, its log start offset);
the handler says what the request carries (``FetchRequestData``: session id and epoch, the
partitions to send, the partitions to forget). Given the decoded answer, ``handle_response``
gives the result of every partition of the request, the unchanged ones an incremental answer
left out included (``FetchedPartition.in_response`` False, no records, the last state the
leader sent), or ``None`` when the answer must be dropped: the session restarts and the next
request is a full one. ``handle_error`` is for a request that got no answer (connection lost,
timeout): the next request is full too.

The rules, as Kafka's client applies them:

- with no session (the first request, or after an error) the request is full: epoch 0, every
  partition sent, and ``session_id`` the old session's, which closes it on the broker;
- in a session, a partition is sent when it is new or any of its fetch state changed (after
  records arrive, its fetch offset has moved); a partition no longer wanted is forgotten; the
  epoch goes up by one each request, wrapping from 2^31-1 to 1;
- an answer to a full request must name exactly its partitions, and one to an incremental
  request no partition outside the session; otherwise the answer is dropped and the session
  restarts (Kafka: "invalid full/incremental fetch response");
- a top-level error: FETCH_SESSION_ID_NOT_FOUND starts over without a session id; any other
  (INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR, ...) closes the session with the
  next, full, request;
- an answer with session id 0 ends the session (none was made, or the broker closed it): the
  next request is full.

Pure: no I/O, no clock. Not thread-safe, and made for one request in flight at a time per
handler, as Kafka's fetchers send them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from odradek.broker.fetch_sessions import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    is_full,
    next_epoch,
)
from odradek.broker.replica_manager import FetchPartitionRequest
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

NO_DIVERGING_EPOCH = -1  # the wire's EpochEndOffset.epoch when the leader found no divergence


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What one Fetch request carries, from ``FetchSessionHandler.build``."""

    session_id: int
    session_epoch: int
    to_send: tuple[FetchPartitionRequest, ...]  # in the order to send them
    to_forget: tuple[TopicPartition, ...]
    session_partitions: tuple[TopicPartition, ...]  # every partition the request covers

    @property
    def is_full(self) -> bool:
        return is_full(self.session_epoch)


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition's result; ``in_response`` False: unchanged, left out of the answer."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # the record set as decoded (bytes or a memoryview); None: nothing new
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset), KIP-320
    in_response: bool = True


class FetchSessionHandler:
    """The fetch session of one fetcher with one leader broker; see the module docstring."""

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # of the next request
        # The partitions of the session, in order, as last sent; and the state last heard.
        self._sent: dict[TopicPartition, FetchPartitionRequest] = {}
        # (high watermark, last stable offset, log start offset); never records, whose
        # memoryviews would keep whole answers alive.
        self._heard: dict[TopicPartition, tuple[int, int, int]] = {}

    def build(self, wanted: Iterable[FetchPartitionRequest]) -> FetchRequestData:
        """The next request for the partitions in ``wanted`` (each once; the last one wins)."""
        wanted_by_key = {(p.topic, p.partition): p for p in wanted}
        if is_full(self.epoch):
            self._sent = wanted_by_key
            self._heard = {}
            return FetchRequestData(
                self.session_id,
                self.epoch,
                tuple(wanted_by_key.values()),
                (),
                tuple(wanted_by_key),
            )
        added = [p for key, p in wanted_by_key.items() if key not in self._sent]
        altered = []
        forgotten = []
        for key, sent in list(self._sent.items()):
            now = wanted_by_key.get(key)
            if now is None:
                del self._sent[key]
                self._heard.pop(key, None)
                forgotten.append(key)
            elif now != sent:
                self._sent[key] = now
                altered.append(now)
        for partition in added:
            self._sent[(partition.topic, partition.partition)] = partition
        return FetchRequestData(
            self.session_id,
            self.epoch,
            tuple(added + altered),
            tuple(forgotten),
            tuple(self._sent),
        )

    def handle_response(self, response: Any) -> dict[TopicPartition, FetchedPartition] | None:
        """Every partition's result from a decoded Fetch answer (v7+), or ``None`` when the
        answer is dropped and the next request is full."""
        error = ErrorCode(response.error_code)
        if error != ErrorCode.none:
            log.info(
                "broker %d refused fetch session %d epoch %d: %s",
                self.node_id,
                self.session_id,
                self.epoch,
                error.name,
            )
            if error == ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return None
        answered = {(p.topic, p.partition): p for p in _partitions(response)}
        session = self._sent.keys()
        incremental = not is_full(self.epoch)
        if len(answered) != sum(len(t.partitions) for t in response.responses):
            problem = "names a partition twice"
        elif not incremental and answered.keys() != session:
            problem = "a full answer names other partitions than its request"
        elif incremental and not answered.keys() <= session:
            problem = "an incremental answer names partitions outside the session"
        else:
            problem = None
        if problem is not None:
            log.info("broker %d: fetch answer dropped: %s", self.node_id, problem)
            if not incremental:  # close the session the broker may have made for it
                self.session_id = response.session_id
            self.epoch = INITIAL_EPOCH
            return None
        if response.session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif incremental:
            self.epoch = next_epoch(self.epoch)
        else:
            self.session_id, self.epoch = response.session_id, next_epoch(INITIAL_EPOCH)
        for key, fetched in answered.items():
            self._heard[key] = (
                fetched.high_watermark,
                fetched.last_stable_offset,
                fetched.log_start_offset,
            )
        results = dict(answered)
        if incremental:
            for key in session - answered.keys():
                high_watermark, last_stable_offset, log_start_offset = self._heard.get(
                    key, (-1, -1, -1)
                )
                results[key] = FetchedPartition(
                    key[0],
                    key[1],
                    high_watermark=high_watermark,
                    last_stable_offset=last_stable_offset,
                    log_start_offset=log_start_offset,
                    in_response=False,
                )
        return results

    def handle_error(self) -> None:
        """The request got no answer: close the session with a full request next."""
        self.epoch = INITIAL_EPOCH


def _partitions(response: Any) -> Iterable[FetchedPartition]:
    for topic in response.responses:
        for data in topic.partitions:
            diverging = getattr(data, "diverging_epoch", None)
            yield FetchedPartition(
                topic.topic,
                data.partition_index,
                ErrorCode(data.error_code),
                data.high_watermark,
                data.last_stable_offset,
                data.log_start_offset,
                data.records,
                None
                if diverging is None or diverging.epoch == NO_DIVERGING_EPOCH
                else (diverging.epoch, diverging.end_offset),
            )
