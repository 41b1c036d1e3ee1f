"""Read options -> a frozen ``ReadOptions``, validated as Spark's Kafka source validates them.

Option names are case-insensitive, as in Spark. Every option is either one Spark's Kafka source
documents (the list ``SOURCE_OPTIONS``), or ``kafka.*`` (given to the client, ``client_config``);
any other option is refused with an ``OptionError`` naming it, never ignored.

Spark's rules kept here:
- exactly one of ``subscribe`` (comma list), ``subscribePattern`` (a regex that must match the
  whole topic name, as Java's ``Pattern.matches``; Python's ``re`` syntax, which agrees with
  Java's for ordinary patterns) and ``assign`` (JSON ``{"topic": [0, 1]}``);
- where to start and end: ``*Timestamp`` (one time for every partition) before
  ``*OffsetsByTimestamp`` (JSON per partition) before ``*Offsets`` (earliest, latest, JSON per
  partition with -2 earliest and -1 latest); batch defaults are earliest..latest, streaming starts
  at latest. A batch read refuses to start at latest and to end at earliest; a streaming read
  refuses ending options (Spark ignores ``endingTimestamp`` in streaming; here it is refused too,
  so nothing is silently dropped);
- ``startingOffsetsByTimestampStrategy``: ``error`` (a partition with no record at or after the
  time fails the query) or ``latest`` (it starts at latest);
- ``maxOffsetsPerTrigger`` / ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` are streaming options:
  a batch read accepts and ignores them, as Spark does (Spark logs a warning; so do we);
- ``kafka.group.id`` is honoured as the consumers' ``group.id`` (they never join the group nor
  commit: partitions are assigned, offsets live in the checkpoint), else ``groupIdPrefix`` +
  a random suffix, as Spark names its groups.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from odradek.common.partitions import TopicPartition
from odradek.spark.client_config import OptionError, client_config
from odradek.spark.ranges import EARLIEST, LATEST

__all__ = [
    "Assign",
    "Earliest",
    "GlobalTimestamp",
    "Latest",
    "OffsetLimit",
    "OptionError",
    "ReadOptions",
    "SOURCE_OPTIONS",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "parse_read_options",
]

log = logging.getLogger(__name__)

# Spark's Kafka source options, from the Structured Streaming + Kafka Integration Guide and
# KafkaSourceProvider (Spark 4).
_NAMES = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
    "includeHeaders",
)
# Lower case (as Spark hands Python sources their options) -> the name as Spark documents it.
CANONICAL = {name.lower(): name for name in _NAMES}
SOURCE_OPTIONS = frozenset(CANONICAL)
_STREAMING_ONLY = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")
_STRATEGIES = ("subscribe", "subscribepattern", "assign")

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark: spark.network.timeout
DEFAULT_FETCH_OFFSET_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 10
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark: "15m"

NoMatch = Literal["error", "latest"]


# -- what to read -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


# -- where to start or end ----------------------------------------------------------------------


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per partition; ``EARLIEST`` (-2) and ``LATEST`` (-1) stand for those."""

    offsets: dict[TopicPartition, int] = field(hash=False)


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset whose timestamp is at or after ``timestamp_ms``, in every partition."""

    timestamp_ms: int
    on_no_match: NoMatch = "error"


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps_ms: dict[TopicPartition, int] = field(hash=False)
    on_no_match: NoMatch = "error"


OffsetLimit = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read needs from its options; plain data, picklable."""

    subscription: Subscription
    starting: OffsetLimit
    ending: OffsetLimit | None  # None in streaming
    client: dict[str, str] = field(hash=False)  # kafka.* without the prefix, group.id set
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_retries: int = DEFAULT_FETCH_OFFSET_RETRIES
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS

    @property
    def group_id(self) -> str:
        return self.client["group.id"]


# -- parsing ------------------------------------------------------------------------------------


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {value!r}")
    return v == "true"


def _int(name: str, value: str, *, positive: bool = True) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {value!r}") from None
    if positive and n <= 0:
        raise OptionError(f"option {name!r} must be positive, not {n}")
    if not positive and n < 0:
        raise OptionError(f"option {name!r} must not be negative, not {n}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_DURATION_MS["d"] = 86_400_000


def _duration_ms(name: str, value: str) -> int:
    """Spark's time strings (``JavaUtils.timeStringAsMs``): ``100ms``, ``5s``, ``15m``, ``1h``."""
    m = _DURATION.match(value)
    if m is None:
        raise OptionError(f"option {name!r} must be a duration such as 15m or 30s, not {value!r}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _DURATION_MS[unit]


def _json_object(name: str, value: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name!r} is not valid JSON ({e}): {value!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f"option {name!r} must be a non-empty JSON object, not {value!r}")
    return parsed


def _partition_map(name: str, value: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` -> {TopicPartition: int}."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(name, value).items():
        if not isinstance(parts, dict):
            raise OptionError(
                f'option {name!r}: expected {{"topic": {{"0": number, ...}}}}, got {value!r}'
            )
        for p, n in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise OptionError(f"option {name!r}: {p!r} is not a partition number") from None
            if not isinstance(n, int) or isinstance(n, bool):
                raise OptionError(f"option {name!r}: {topic}-{p} must map to an integer")
            out[TopicPartition(topic, partition)] = n
    return out


def _assign(value: str) -> Assign:
    if not value.strip().startswith("{"):
        raise OptionError(f"no topic partitions to assign: option 'assign' is {value!r}")
    parts = []
    for topic, numbers in _json_object("assign", value).items():
        if not isinstance(numbers, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers
        ):
            raise OptionError(
                f"option 'assign' must look like {{\"topic\": [0, 1]}}, got {value!r}"
            )
        parts.extend(TopicPartition(topic, n) for n in numbers)
    if not parts:
        raise OptionError(f"no topic partitions to assign: option 'assign' is {value!r}")
    return Assign(tuple(sorted(set(parts))))


def _subscription(opts: Mapping[str, tuple[str, str]]) -> Subscription:
    given = [k for k in _STRATEGIES if k in opts]
    names = "'subscribe', 'subscribePattern', 'assign'"
    if not given:
        raise OptionError(f"one of the options {names} must be given")
    if len(given) > 1:
        raise OptionError(
            f"only one of the options {names} can be given, not {[opts[k][0] for k in given]}"
        )
    name, value = opts[given[0]]
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"no topics to subscribe to: option {name!r} is {value!r}")
        return Subscribe(topics)
    if given[0] == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise OptionError(f"the pattern to subscribe to is empty: option {name!r}")
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option {name!r} is not a valid regex ({e}): {value!r}") from None
        return SubscribePattern(pattern)
    return _assign(value)


def _limit(
    opts: Mapping[str, tuple[str, str]],
    prefix: Literal["starting", "ending"],
    default: OffsetLimit,
    on_no_match: NoMatch,
) -> OffsetLimit:
    """Spark's ``getKafkaOffsetRangeLimit``: timestamp, then by-timestamp JSON, then offsets."""
    if f"{prefix}timestamp" in opts:
        name, value = opts[f"{prefix}timestamp"]
        try:
            return GlobalTimestamp(int(value.strip()), on_no_match)
        except ValueError:
            raise OptionError(
                f"option {name!r} must be a timestamp in milliseconds, not {value!r}"
            ) from None
    if f"{prefix}offsetsbytimestamp" in opts:
        name, value = opts[f"{prefix}offsetsbytimestamp"]
        return SpecificTimestamps(_partition_map(name, value), on_no_match)
    if f"{prefix}offsets" in opts:
        name, value = opts[f"{prefix}offsets"]
        word = value.strip().lower()
        if word == "earliest":
            return Earliest()
        if word == "latest":
            return Latest()
        offsets = _partition_map(name, value)
        bad = {str(tp): n for tp, n in offsets.items() if n < EARLIEST}
        if bad:
            raise OptionError(f"option {name!r}: offsets below -2 {bad}")
        return SpecificOffsets(offsets)
    return default


def _check_batch_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    # A batch has fixed ends: it may not start at latest nor end at earliest, as Spark refuses.
    _refuse_open_end(starting, "startingOffsets", Latest, LATEST, "latest")
    _refuse_open_end(ending, "endingOffsets", Earliest, EARLIEST, "earliest")
    # Spark's checkOffsetLimitValidity: same partitions, start <= end where both are concrete.
    pairs: tuple[dict[TopicPartition, int], dict[TopicPartition, int], str] | None = None
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        pairs = (starting.offsets, ending.offsets, "startingOffsets and endingOffsets")
    elif isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        pairs = (
            starting.timestamps_ms,
            ending.timestamps_ms,
            "startingOffsetsByTimestamp and endingOffsetsByTimestamp",
        )
    if pairs is not None:
        start, end, names = pairs
        if set(start) != set(end):
            raise OptionError(
                f"options {names} must name the same partitions: "
                f"{sorted(map(str, start))} vs {sorted(map(str, end))}"
            )
        for tp, s in start.items():
            e = end[tp]
            if s >= 0 and e >= 0 and s > e:
                raise OptionError(f"options {names}: the start {s} is after the end {e} for {tp}")


def _refuse_open_end(limit: OffsetLimit, option: str, kind: type, sentinel: int, word: str) -> None:
    if isinstance(limit, kind):
        raise OptionError(f"option '{option}' can't be {word} for batch queries")
    if isinstance(limit, SpecificOffsets):
        for tp, n in limit.offsets.items():
            if n == sentinel:
                raise OptionError(
                    f"option '{option}' for {tp} can't be {word} ({sentinel}) for batch queries"
                )


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate ``options`` (as the user gave them) for a batch or a streaming read."""
    opts: dict[str, tuple[str, str]] = {}  # lower-case name -> (name as given, value)
    for name, value in options.items():
        key = name.lower()
        if key.startswith("kafka."):
            continue
        if key not in SOURCE_OPTIONS:
            raise OptionError(
                f"option {name!r} is not an option of the Kafka source "
                "(see docs/spark.md for the options; Kafka client settings take the prefix "
                "'kafka.')"
            )
        if value is None:
            raise OptionError(f"option {CANONICAL[key]!r} has no value")
        opts[key] = (CANONICAL[key], value)

    subscription = _subscription(opts)

    on_no_match: NoMatch = "error"
    if "startingoffsetsbytimestampstrategy" in opts:
        name, value = opts["startingoffsetsbytimestampstrategy"]
        if value.strip().lower() not in ("error", "latest"):
            raise OptionError(f"option {name!r} must be error or latest, not {value!r}")
        on_no_match = value.strip().lower()  # type: ignore[assignment]

    if streaming:
        for key in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if key in opts:
                raise OptionError(f"option {opts[key][0]!r} is not valid in streaming queries")
        starting = _limit(opts, "starting", Latest(), on_no_match)
        ending = None
    else:
        starting = _limit(opts, "starting", Earliest(), on_no_match)
        ending = _limit(opts, "ending", Latest(), "latest")
        _check_batch_limits(starting, ending)
        for key in _STREAMING_ONLY:
            if key in opts:
                log.warning("option %s is ignored in batch queries", opts[key][0])

    def get(key: str) -> tuple[str, str] | None:
        return opts.get(key)

    def opt_int(key: str, positive: bool = True) -> int | None:
        got = get(key)
        return None if got is None else _int(*got, positive=positive)

    max_per_trigger = opt_int("maxoffsetspertrigger")
    min_per_trigger = opt_int("minoffsetspertrigger")
    if (
        max_per_trigger is not None
        and min_per_trigger is not None
        and min_per_trigger > max_per_trigger
    ):
        raise OptionError(
            f"minOffsetsPerTrigger ({min_per_trigger}) is higher than "
            f"maxOffsetsPerTrigger ({max_per_trigger})"
        )

    client = client_config(options)
    group_id = next((v for k, v in client.items() if k.lower() == "group.id"), None)
    if group_id is None:
        prefix_opt = get("groupidprefix")
        prefix = (
            prefix_opt[1]
            if prefix_opt
            else ("spark-kafka-source" if streaming else "spark-kafka-relation")
        )
        client["group.id"] = f"{prefix}-{uuid.uuid4()}"
    else:
        log.warning(
            "kafka.group.id is set: every consumer of this query uses group %r (partitions are "
            "assigned and offsets never committed, so the group is only a name)",
            group_id,
        )
        if get("groupidprefix"):
            log.warning("option groupIdPrefix is ignored: kafka.group.id is set")
        client = {k: v for k, v in client.items() if k.lower() != "group.id"}
        client["group.id"] = group_id

    delay = get("maxtriggerdelay")
    return ReadOptions(
        subscription=subscription,
        starting=starting,
        ending=ending,
        client=client,
        fail_on_data_loss=_bool(*get("failondataloss")) if get("failondataloss") else True,
        include_headers=_bool(*get("includeheaders")) if get("includeheaders") else False,
        min_partitions=opt_int("minpartitions"),
        max_records_per_partition=opt_int("maxrecordsperpartition"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(*delay) if delay else DEFAULT_MAX_TRIGGER_DELAY_MS,
        poll_timeout_ms=opt_int("kafkaconsumer.polltimeoutms") or DEFAULT_POLL_TIMEOUT_MS,
        fetch_offset_retries=(
            _int(*get("fetchoffset.numretries"), positive=False)
            if get("fetchoffset.numretries")
            else DEFAULT_FETCH_OFFSET_RETRIES
        ),
        fetch_offset_retry_interval_ms=(
            _int(*get("fetchoffset.retryintervalms"), positive=False)
            if get("fetchoffset.retryintervalms")
            else DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
        ),
    )
