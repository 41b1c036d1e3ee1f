"""Driver side: which partitions a subscription covers and where a read starts or ends in them.

``OffsetReader`` owns one confluent-kafka ``Consumer`` that never joins its group nor fetches
records; it only asks for metadata (``list_topics``), watermarks (``get_watermark_offsets``,
ListOffsets earliest/latest) and offsets by time (``offsets_for_times``). With
``isolation.level=read_committed`` librdkafka's latest offset is the last stable offset, so a
committed read ends where committed data ends, as Spark's does. Not thread-safe: one reader per
planning thread; make one per batch or keep one for a stream's life and ``close()`` it.

Each look-up is retried ``retries`` times ``retry_interval_ms`` apart (Spark's
``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``), all tries of one look-up within
``LOOKUP_TIMEOUT_S``; then it fails with an ``OffsetLookupError`` naming what it looked up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.common.partitions import TopicPartition
from odradek.common.topics import CLUSTER_METADATA_TOPIC, INTERNAL_TOPICS
from odradek.spark.ranges import EARLIEST, LATEST
from odradek.spark.read_options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetLimit,
    ReadOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    Subscription,
)

__all__ = ["LOOKUP_TIMEOUT_S", "OffsetLookupError", "OffsetReader", "driver_config"]

LOOKUP_TIMEOUT_S = 30.0
# Internal topics a pattern never matches (the Java consumer's exclude.internal.topics=true).
UNMATCHED_TOPICS = INTERNAL_TOPICS | {CLUSTER_METADATA_TOPIC}

T = TypeVar("T")


class OffsetLookupError(RuntimeError):
    """Partitions or offsets that could not be listed or resolved; the message says which."""


def driver_config(client: Mapping[str, str]) -> dict[str, str]:
    """The planning consumer's configuration: the user's ``kafka.*`` with Spark's driver rules.

    librdkafka defaults to read_committed; Kafka's (and so Spark's) default is read_uncommitted.
    """
    config = dict(client)
    config.setdefault("isolation.level", "read_uncommitted")
    config["enable.auto.commit"] = "false"
    config["enable.auto.offset.store"] = "false"
    config["auto.offset.reset"] = "earliest"
    return config


class OffsetReader:
    """Lists partitions and resolves offset limits against the cluster."""

    def __init__(
        self,
        client: Mapping[str, str],
        *,
        retries: int = 3,
        retry_interval_ms: int = 10,
        timeout_s: float = LOOKUP_TIMEOUT_S,
    ) -> None:
        self._consumer = Consumer(driver_config(client))
        self._retries = retries
        self._retry_interval_s = retry_interval_ms / 1000
        self._timeout_s = timeout_s

    @classmethod
    def for_options(cls, options: ReadOptions) -> OffsetReader:
        return cls(
            options.client,
            retries=options.fetch_offset_retries,
            retry_interval_ms=options.fetch_offset_retry_interval_ms,
        )

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> OffsetReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retry(self, what: str, call: Callable[[float], T]) -> T:
        """``call(timeout_s)``, retried on Kafka errors; all tries together within the timeout."""
        deadline = time.monotonic() + self._timeout_s
        for attempt in range(self._retries + 1):
            remaining = deadline - time.monotonic()
            try:
                return call(max(remaining, 0.001))
            except KafkaException as e:
                if attempt == self._retries or remaining <= self._retry_interval_s:
                    raise OffsetLookupError(
                        f"{what}: {e} (after {attempt + 1} tries within {self._timeout_s:g} s)"
                    ) from e
                time.sleep(self._retry_interval_s)
        raise AssertionError("unreachable")

    # -- partitions -----------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """Every topic the cluster has, with its partition count."""
        metadata = self._retry(
            "listing topics", lambda timeout_s: self._consumer.list_topics(timeout=timeout_s)
        )
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription reads now, sorted. Topics that do not exist give none
        (a batch read of them is empty, as Spark's); assigned partitions must exist."""
        topics = self.topics()
        if isinstance(subscription, Subscribe):
            names: Iterable[str] = (t for t in subscription.topics if t in topics)
        elif isinstance(subscription, SubscribePattern):
            names = (t for t in topics if t not in UNMATCHED_TOPICS and subscription.matches(t))
        elif isinstance(subscription, Assign):
            missing = [
                str(tp) for tp in subscription.partitions if tp.partition >= topics.get(tp.topic, 0)
            ]
            if missing:
                raise OffsetLookupError(
                    f"option 'assign' names partitions that do not exist: {missing}"
                )
            return sorted(subscription.partitions)
        else:
            raise TypeError(f"not a subscription: {subscription!r}")
        return sorted(TopicPartition(t, p) for t in set(names) for p in range(topics[t]))

    # -- offsets --------------------------------------------------------------------------------

    def watermarks(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, latest offset) per partition; latest is the LSO under
        read_committed, the high watermark otherwise."""
        out = {}
        for tp in tps:
            out[tp] = self._retry(
                f"looking up the offsets of {tp}",
                lambda timeout_s, tp=tp: self._consumer.get_watermark_offsets(
                    KafkaTopicPartition(tp.topic, tp.partition), timeout=timeout_s, cached=False
                ),
            )
        return out

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: low for tp, (low, _) in self.watermarks(tps).items()}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: high for tp, (_, high) in self.watermarks(tps).items()}

    def offsets_for_times(
        self, timestamps_ms: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset at or after each time; None where no record is that late."""
        if not timestamps_ms:
            return {}
        request = [
            KafkaTopicPartition(tp.topic, tp.partition, ts) for tp, ts in timestamps_ms.items()
        ]
        found = self._retry(
            "looking up offsets by timestamp",
            lambda timeout_s: self._consumer.offsets_for_times(request, timeout=timeout_s),
        )
        out: dict[TopicPartition, int | None] = {}
        for r in found:
            if r.error is not None:
                raise OffsetLookupError(
                    f"looking up an offset by timestamp in {r.topic}-{r.partition}: {r.error}"
                )
            out[TopicPartition(r.topic, r.partition)] = r.offset if r.offset >= 0 else None
        return out

    def resolve(
        self, limit: OffsetLimit, tps: Iterable[TopicPartition], *, starting: bool
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps`` from a starting (or ending) limit.

        Specific offsets and timestamps must name exactly ``tps`` (Spark: "you must specify all
        TopicPartitions"); -2/-1 resolve to earliest/latest. A timestamp with no record at or
        after it resolves to latest, except at the start with strategy ``error``.
        """
        tps = sorted(tps)
        if isinstance(limit, Earliest):
            return self.earliest(tps)
        if isinstance(limit, Latest):
            return self.latest(tps)
        if isinstance(limit, SpecificOffsets):
            _require_all(limit.offsets, tps, "startingOffsets" if starting else "endingOffsets")
            marks = self.watermarks(
                tp for tp, n in limit.offsets.items() if n in (EARLIEST, LATEST)
            )
            return {
                tp: marks[tp][0] if n == EARLIEST else marks[tp][1] if n == LATEST else n
                for tp, n in sorted(limit.offsets.items())
            }
        if isinstance(limit, GlobalTimestamp):
            times = {tp: limit.timestamp_ms for tp in tps}
            name = "startingTimestamp" if starting else "endingTimestamp"
        elif isinstance(limit, SpecificTimestamps):
            name = "startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp"
            _require_all(limit.timestamps_ms, tps, name)
            times = dict(limit.timestamps_ms)
        else:
            raise TypeError(f"not an offset limit: {limit!r}")
        found = self.offsets_for_times(times)
        unmatched = sorted(tp for tp, off in found.items() if off is None)
        if unmatched and starting and limit.on_no_match == "error":
            raise OffsetLookupError(
                f"option {name!r}: no record at or after the given time in "
                f"{[f'{tp} (timestamp {times[tp]})' for tp in unmatched]}; "
                "set startingOffsetsByTimestampStrategy=latest to start those at latest"
            )
        latest = self.latest(unmatched)
        return {tp: latest[tp] if off is None else off for tp, off in sorted(found.items())}


def _require_all(given: Mapping[TopicPartition, int], tps: list[TopicPartition], name: str) -> None:
    if set(given) != set(tps):
        raise OffsetLookupError(
            f"option {name!r} must name every partition read, with -2 for earliest and -1 for "
            f"latest: it names {sorted(map(str, given))}, the read covers {list(map(str, tps))}"
        )
