"""Incremental fetch sessions (KIP-227), the broker's side: the session cache and fetch contexts.

A fetcher that sends the same partitions every time (a follower with thousands of them, a
consumer) may open a session with a full Fetch; afterwards its incremental Fetches name only
the partitions whose fetch parameters changed (and ``forgotten_topics_data`` those it drops),
and the answers name only the partitions whose state changed. The request's ``session_id`` and
``session_epoch`` say which kind of Fetch it is:

==========  ======  ==========================================================================
session id  epoch   meaning
==========  ======  ==========================================================================
0           -1      sessionless full fetch (Fetch v4-6 always are): no session used or made
0           0       full fetch; a session is created if the cache has room (epoch 1 next)
ID          0       full fetch that closes session ID first, then may create a new one
ID          -1      full fetch that closes session ID and creates none
ID          N > 0   incremental fetch in session ID, whose expected epoch must be N
==========  ======  ==========================================================================

A session error answers with that error at the top level, session id 0 and no partitions:
FETCH_SESSION_ID_NOT_FOUND (no such session: never made, closed, evicted),
INVALID_FETCH_SESSION_EPOCH (an epoch other than the expected one: a duplicate or lost
request; the session is kept, the fetcher restarts with a full fetch), and
FETCH_SESSION_TOPIC_ID_ERROR (a session made by names used by topic ids, or the reverse;
Fetch is served up to v12, which names topics, so it cannot happen until v13+ is).

What is kept per session: for each partition the fetch parameters last sent (offset, partition
max bytes, current leader epoch, last fetched epoch, the follower's log start offset) and the
partition state last answered (high watermark, last stable offset, log start offset).
An incremental answer carries a partition only if it has records, an error or a diverging
epoch, or if one of those three offsets changed, as Kafka's ``IncrementalFetchContext``; an
error also forgets the cached high watermark, so the partition is answered again once the error
is gone. A partition answered with records moves to the end of the session's order, so the
next fetch reads the others first under ``max_bytes``.

The cache (Kafka's ``FetchSessionCache``) holds at most ``max_slots`` sessions
(``max.incremental.fetch.session.cache.slots``) and ``max_partitions`` cached partitions across
all sessions (``odradek.max.incremental.fetch.session.cache.partitions``; Kafka has no such
bound). A new session takes a free slot, or evicts, by Kafka's rules: first a session unused for
longer than ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``; otherwise the least valuable session
old enough to be evictable (created more than that long ago; a consumer's session is evictable
by a follower's at once), if the new one is worth more: a follower's (``replica_id >= 0``) over
a consumer's, then more partitions over fewer. Sessions are only evicted when that makes room
for the new one. A session that cannot be made leaves the fetch sessionless (session id 0),
which every client handles. An incremental fetch that would take the cache past
``max_partitions`` closes its session and is answered FETCH_SESSION_ID_NOT_FOUND, as if the
session had been evicted, and the fetcher's next full fetch competes for room like any other.
A topic name longer than any legal one (249 characters) is never cached (such a full fetch is
answered sessionless, such an incremental one as above), so each cached partition costs a
bounded amount of memory. Victims are chosen by scanning the sessions (at most ``max_slots``),
and only when the cache is full.

Session ids are random in 1..2^31-1, drawn from ``random.SystemRandom`` unless a generator is
injected; anyone who knows a session's id can close it with a full fetch, as in Kafka.

The clock is injected (``monotonic``, seconds). Runs on the broker's event loop only; nothing
here is thread-safe, and nothing awaits, so a context is never seen half-updated. A context
created for a request that long-polls checks at answer time that no other request of the same
session was handled meanwhile (INVALID_FETCH_SESSION_EPOCH), as Kafka does.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.broker.replica_manager import FetchPartitionRequest, FetchResult
from odradek.common.limits import INT32_MAX
from odradek.common.partitions import TopicPartition
from odradek.common.topics import TOPIC_NAME_LENGTH_MAX
from odradek.config.broker import BROKER_KEYS, BrokerConfig
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

Wanted = dict[TopicPartition, FetchPartitionRequest]  # a request's partitions, by partition

INVALID_SESSION_ID = 0  # "no session", in requests and answers
INITIAL_EPOCH = 0  # full fetch that asks for a (new) session
FINAL_EPOCH = -1  # full fetch that asks for no session
EPOCH_MAX = INT32_MAX  # the epoch after it is 1
SESSION_ID_MAX = INT32_MAX
# Kafka's constant (KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS), not a config key there.
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
SESSION_ID_DRAWS_MAX = 16  # a free id is found on the first draw but for ~slots/2^31 odds


def next_epoch(epoch: int) -> int:
    """The session epoch that follows ``epoch``: +1, wrapping to 1; negative stays final."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == EPOCH_MAX:
        return 1
    return epoch + 1


def is_full(epoch: int) -> bool:
    """Whether a request with this epoch is a full fetch (names every partition it wants)."""
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the fetch parameters last sent, the state last answered."""

    request: FetchPartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1  # the leader's, as last answered

    def must_respond(self, result: FetchResult) -> bool:
        """Whether an incremental answer must carry ``result``; remembers what it answers."""
        must = result.size > 0 or result.diverging_epoch is not None
        if result.high_watermark != self.high_watermark:
            self.high_watermark = result.high_watermark
            must = True
        if result.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = result.last_stable_offset
            must = True
        if result.log_start_offset != self.log_start_offset:
            self.log_start_offset = result.log_start_offset
            must = True
        if result.error != ErrorCode.none:
            # Forget the high watermark: once the error is gone the partition differs again,
            # so the fetcher hears that it is.
            self.high_watermark = -1
            must = True
        return must


class FetchSession:
    """One session: its partitions in fetch order and the epoch its next request must carry."""

    __slots__ = (
        "id",
        "privileged",
        "uses_topic_ids",
        "created_ms",
        "last_used_ms",
        "epoch",
        "partitions",
        "cached_size",
    )

    def __init__(
        self,
        session_id: int,
        *,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: dict[TopicPartition, CachedPartition],
        now_ms: int,
    ):
        self.id = session_id
        self.privileged = privileged  # made by a follower
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)  # expected in the next request
        self.partitions = partitions
        self.cached_size = 0  # partitions counted in the cache's total at the last touch

    def update(self, wanted: Wanted, forgotten: Iterable[TopicPartition]) -> None:
        """Apply an incremental request: add or update what it names, then drop the forgotten."""
        for key, request in wanted.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(request)
            else:
                cached.request = request
        for key in forgotten:
            self.partitions.pop(key, None)

    def size_after(self, wanted: Wanted, forgotten: Iterable[TopicPartition]) -> int:
        added = wanted.keys() - self.partitions.keys()
        removed = {key for key in forgotten if key in self.partitions or key in added}
        return len(self.partitions) + len(added) - len(removed)


@dataclass(frozen=True, slots=True)
class FetchResponseData:
    """What the Fetch answer carries: top-level error, session id, the partitions to send."""

    error: ErrorCode
    session_id: int
    results: list[FetchResult]


class SessionErrorContext:
    """A request with a session error: nothing is read; the answer is the error alone."""

    def __init__(self, error: ErrorCode):
        self.error = error
        self.partitions: list[FetchPartitionRequest] = []

    def respond(self, results: list[FetchResult]) -> FetchResponseData:
        return FetchResponseData(self.error, INVALID_SESSION_ID, [])

    def throttled(self) -> FetchResponseData:
        return self.respond([])


class SessionlessFetchContext:
    """A full fetch that uses no session: every partition is read and answered."""

    def __init__(self, wanted: Wanted):
        self.error = ErrorCode.none
        self.partitions = list(wanted.values())

    def respond(self, results: list[FetchResult]) -> FetchResponseData:
        return FetchResponseData(ErrorCode.none, INVALID_SESSION_ID, results)

    def throttled(self) -> FetchResponseData:
        """Kafka's ``getThrottledResponse``: empty, and no session made (a client over its
        consumer_byte_rate quota fetches again, whole, once its throttle is over)."""
        return FetchResponseData(ErrorCode.none, INVALID_SESSION_ID, [])


class FullFetchContext:
    """A full fetch that asks for a session: answered whole, the session made if there is room."""

    def __init__(
        self,
        cache: FetchSessionCache,
        wanted: Wanted,
        *,
        privileged: bool,
        uses_topic_ids: bool,
    ):
        self.error = ErrorCode.none
        self.partitions = list(wanted.values())
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def throttled(self) -> FetchResponseData:
        return FetchResponseData(ErrorCode.none, INVALID_SESSION_ID, [])

    def respond(self, results: list[FetchResult]) -> FetchResponseData:
        answered = {(r.topic, r.partition): r for r in results}
        cached = {}
        for request in self.partitions:
            key = (request.topic, request.partition)
            entry = CachedPartition(request)
            result = answered.get(key)
            if result is not None:
                entry.must_respond(result)  # remembers the state this answer carries
            cached[key] = entry
        session_id = self._cache.maybe_create_session(
            cached, privileged=self._privileged, uses_topic_ids=self._uses_topic_ids
        )
        return FetchResponseData(ErrorCode.none, session_id, results)


class IncrementalFetchContext:
    """An incremental fetch: reads every partition of the session, answers those that changed."""

    def __init__(self, session: FetchSession):
        self.error = ErrorCode.none
        self.partitions = [cached.request for cached in session.partitions.values()]
        self._session = session
        self._epoch = session.epoch  # the epoch the cache moved to for this request

    def throttled(self) -> FetchResponseData:
        """Empty, the session kept as it is (what it caches changes only with an answer)."""
        return FetchResponseData(ErrorCode.none, self._session.id, [])

    def respond(self, results: list[FetchResult]) -> FetchResponseData:
        session = self._session
        if session.epoch != self._epoch:
            # Another request of this session was handled while this one waited for data.
            log.info(
                "fetch session %d moved to epoch %d while a request expecting %d waited",
                session.id,
                session.epoch,
                self._epoch,
            )
            return FetchResponseData(ErrorCode.invalid_fetch_session_epoch, session.id, [])
        changed = []
        for result in results:
            key = (result.topic, result.partition)
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(result):
                continue
            changed.append(result)
            if result.size > 0:
                # Round robin under max_bytes: read it last next time.
                del session.partitions[key]
                session.partitions[key] = cached
        return FetchResponseData(ErrorCode.none, session.id, changed)


FetchContext = (
    SessionErrorContext | SessionlessFetchContext | FullFetchContext | IncrementalFetchContext
)


def _by_partition(
    partitions: Iterable[FetchPartitionRequest],
) -> Wanted:
    # A partition named twice is fetched once, with its last parameters (Kafka's map).
    return {(p.topic, p.partition): p for p in partitions}


def _cacheable(keys: Iterable[TopicPartition]) -> bool:
    return all(len(topic) <= TOPIC_NAME_LENGTH_MAX for topic, _ in keys)


class FetchSessionCache:
    """The broker's fetch sessions, bounded in count and in cached partitions; see the module."""

    def __init__(
        self,
        max_slots: int,
        max_partitions: int,
        *,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ):
        self.max_slots = max_slots
        self.max_partitions = max_partitions
        self.eviction_ms = eviction_ms
        self._monotonic = monotonic
        self._rng = rng if rng is not None else random.SystemRandom()
        self.sessions: dict[int, FetchSession] = {}
        self.total_partitions = 0  # Kafka's NumIncrementalFetchPartitionsCached
        self.evictions = 0  # sessions evicted to make room, or for growing past max_partitions

    @classmethod
    def of(cls, config: BrokerConfig | None = None) -> FetchSessionCache:
        """Sized by a broker's configuration, or by the keys' defaults without one (tests)."""
        if config is None:
            return cls(
                BROKER_KEYS["max.incremental.fetch.session.cache.slots"].default,
                BROKER_KEYS["odradek.max.incremental.fetch.session.cache.partitions"].default,
            )
        return cls(
            config.max_incremental_fetch_session_cache_slots,
            config.odradek_max_incremental_fetch_session_cache_partitions,
        )

    def __len__(self) -> int:
        return len(self.sessions)

    def _now_ms(self) -> int:
        return int(self._monotonic() * 1000)

    # -- the request's context (Kafka's FetchManager.newContext) ------------------------------

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: Iterable[FetchPartitionRequest],
        forgotten: Iterable[TopicPartition] = (),
        *,
        privileged: bool,
        uses_topic_ids: bool = False,
    ) -> FetchContext:
        """The context of one Fetch: which partitions to read, and how to answer."""
        wanted = _by_partition(partitions)
        if is_full(epoch):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(wanted)
            return FullFetchContext(
                self, wanted, privileged=privileged, uses_topic_ids=uses_topic_ids
            )
        session = self.sessions.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        forgotten = list(forgotten)
        size = session.size_after(wanted, forgotten)
        if (
            self.total_partitions - session.cached_size + size > self.max_partitions
            or not _cacheable(wanted.keys() - session.partitions.keys())
        ):
            log.info(
                "fetch session %d closed: %d partitions would pass the cache's bound of %d "
                "(or a topic name is longer than any topic's)",
                session.id,
                size,
                self.max_partitions,
            )
            self.remove(session_id)
            self.evictions += 1
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        session.update(wanted, forgotten)
        if not session.partitions:
            self.remove(session_id)  # nothing left to fetch: the session ends
            return SessionlessFetchContext(wanted)
        self._touch(session, self._now_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session)

    # -- the cache ---------------------------------------------------------------------------

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.total_partitions -= session.cached_size
        return session

    def maybe_create_session(
        self,
        partitions: dict[TopicPartition, CachedPartition],
        *,
        privileged: bool,
        uses_topic_ids: bool = False,
    ) -> int:
        """A new session holding ``partitions``, evicting others if the rules allow; its id,
        or ``INVALID_SESSION_ID`` when there is no room (the fetch then stays sessionless)."""
        size = len(partitions)
        if size == 0 or not _cacheable(partitions):
            return INVALID_SESSION_ID
        now_ms = self._now_ms()
        victims = self._victims(privileged=privileged, size=size, now_ms=now_ms)
        if victims is None:
            return INVALID_SESSION_ID
        session_id = self._new_session_id()
        if session_id == INVALID_SESSION_ID:
            return INVALID_SESSION_ID
        for victim in victims:
            log.debug("fetch session %d evicted for a new one of %d partitions", victim.id, size)
            self.remove(victim.id)
            self.evictions += 1
        session = FetchSession(
            session_id,
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
            partitions=partitions,
            now_ms=now_ms,
        )
        self.sessions[session_id] = session
        self._touch(session, now_ms)
        return session_id

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self.total_partitions += len(session.partitions) - session.cached_size
        session.cached_size = len(session.partitions)

    def _new_session_id(self) -> int:
        for _ in range(SESSION_ID_DRAWS_MAX):
            session_id = self._rng.randint(1, SESSION_ID_MAX)
            if session_id not in self.sessions:
                return session_id
        return INVALID_SESSION_ID

    def _victims(self, *, privileged: bool, size: int, now_ms: int) -> list[FetchSession] | None:
        """The sessions to evict so that a new one of ``size`` partitions fits: none when it
        fits already, ``None`` when Kafka's rules do not free enough room."""
        if self.max_slots <= 0 or size > self.max_partitions:
            return None
        remaining = dict(self.sessions)
        victims: list[FetchSession] = []
        used_partitions = self.total_partitions
        while len(remaining) >= self.max_slots or used_partitions + size > self.max_partitions:
            victim = self._victim(remaining.values(), privileged, size, now_ms)
            if victim is None:
                return None
            del remaining[victim.id]
            victims.append(victim)
            used_partitions -= victim.cached_size
        return victims

    def _victim(
        self, sessions: Iterable[FetchSession], privileged: bool, size: int, now_ms: int
    ) -> FetchSession | None:
        """Kafka's ``tryEvict``: the stalest session if it is stale, else the least valuable
        evictable one if the new session is worth more."""
        sessions = list(sessions)
        if not sessions:
            return None
        stalest = min(sessions, key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            return stalest
        evictable = [
            s
            for s in sessions
            if now_ms - s.created_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not evictable:
            return None
        cheapest = min(evictable, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size) > (cheapest.privileged, cheapest.cached_size):
            return cheapest
        return None
