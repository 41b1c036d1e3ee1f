"""A Jepsen-style checker of a produce/consume history: what a replicated log must never do.

In the spirit of Jepsen's Kafka analyses (its ``kafka`` workload, as run against Redpanda and
Bufstream): the workload records every write the producers were told about (acknowledged at a
partition and offset, or failed) and every record a consumer read, then ``analyze`` looks, per
partition, for:

- **lost**: acknowledged, never read anywhere, although a reader went past its offset in that
  partition (it read a later offset: Jepsen's lost write) or read the partition to its end (the
  end a consumer is shown, the high watermark, lies below it or the record is gone from below it).
- **unread**: acknowledged, never read, and the reads of its partition stopped before its offset
  and before the end: too early to tell. A failed run, not a verdict on the log; the fault tests
  refuse it too.
- **duplicated**: one value seen at two or more (partition, offset) places, counting the offset
  its acknowledgement named and every offset a reader found it at. The idempotent producer must
  prevent retries from writing twice, and a failover must not move a record.
- **inconsistent offsets**: one offset holding two values: the acknowledged one and another read
  there, or two reads that disagree (a replica that diverged and served reads).
- **reordered**: one producer's records to one partition, in offset order, with their sequence
  numbers going down. Each producer sends a partition's records in sequence order with
  ``enable.idempotence`` (at most 5 in flight, ordered), so the log must keep that order.
- **unexpected**: a value read that no producer ever sent (corruption, or a foreign writer).

A write whose delivery failed or timed out is indeterminate: it may be in the log or not, and
either is fine; when it is read it obeys the same rules (no duplicates, no reordering).

Beside the verdict the report says what the producers saw, to explain a failure: the failed writes
by error name, and per partition the longest wait between two acknowledgements. librdkafka's
idempotent producer bumps its epoch when records time out in its queue (a gap in its sequence),
and sends again under the new epoch the ones still queued, which may include records a broker
had written but not yet acknowledged: a partition that answered nothing for ``message.timeout.ms``
shows up here first.

Values encode their writer: ``b"<producer>:<sequence>:"`` and then filler up to the record size
(``encode_value``), so a value read back says which write it is.

The report is deterministic (sorted, the same history gives the same text) and starts with the
run's seed, so a failing run can be repeated. ``History`` may be filled from several threads at
once (the producer's delivery callbacks, a reader); ``analyze`` runs once the workload stopped.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

EXAMPLES_MAX = 5  # per kind of anomaly, in the printed report
FILLER = bytes(range(33, 127))  # printable, so a value in a failure message stays readable


def encode_value(producer: int, sequence: int, size_bytes: int = 0) -> bytes:
    """``b"<producer>:<sequence>:"`` padded with filler to ``size_bytes`` (never cut shorter)."""
    head = b"%d:%d:" % (producer, sequence)
    missing = max(0, size_bytes - len(head))
    return head + (FILLER * (missing // len(FILLER) + 1))[:missing]


def decode_value(value: bytes | None) -> tuple[int, int] | None:
    """``(producer, sequence)`` of a value made by ``encode_value``; None for anything else."""
    if value is None:
        return None
    parts = value.split(b":", 2)
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True, slots=True)
class Ack:
    """A write the producer was told is committed at ``partition``/``offset``."""

    partition: int
    offset: int | None  # None: acknowledged without an offset (see ``analyze``)
    value: bytes
    ack_time_s: float  # seconds since the workload started

    def __str__(self) -> str:
        where = f"{self.partition}/{self.offset}"
        return f"{_short(self.value)}@{where} (acked at {self.ack_time_s:.2f} s)"


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: bytes
    reader: str

    def __str__(self) -> str:
        return f"{_short(self.value)}@{self.partition}/{self.offset} (read by {self.reader})"


@dataclass(frozen=True, slots=True)
class Event:
    """Something the test did to the cluster (a fault, a heal), for the report's timeline."""

    time_s: float
    what: str


class History:
    """Everything the workload saw. Thread-safe: each ``record_*`` takes a lock."""

    def __init__(self, seed: int, *, replay: str = "") -> None:
        self.seed = seed
        self.replay = replay  # how to run this again, printed with the report
        self._lock = threading.Lock()
        self.sent: set[bytes] = set()
        self.acks: list[Ack] = []
        self.failures: dict[bytes, str] = {}
        self.reads: list[Read] = []
        self.ends: dict[int, int] = {}  # partition -> its end offset when a reader got there
        self.events: list[Event] = []

    def record_send(self, value: bytes) -> None:
        with self._lock:
            self.sent.add(value)

    def record_ack(self, partition: int, offset: int, value: bytes, ack_time_s: float) -> None:
        with self._lock:
            self.acks.append(Ack(partition, offset, value, ack_time_s))

    def record_failure(self, value: bytes, error: str) -> None:
        with self._lock:
            self.failures[value] = error

    def record_read(self, partition: int, offset: int, value: bytes, reader: str = "final") -> None:
        with self._lock:
            self.reads.append(Read(partition, offset, value, reader))

    def record_end(self, partition: int, end_offset: int) -> None:
        """A reader read ``partition`` to its end: everything below ``end_offset``, the high
        watermark it was shown, and the end was there."""
        with self._lock:
            self.ends[partition] = max(self.ends.get(partition, 0), end_offset)

    def record_event(self, time_s: float, what: str) -> None:
        with self._lock:
            self.events.append(Event(time_s, what))


@dataclass(frozen=True, slots=True)
class PartitionReport:
    partition: int
    acknowledged: int
    read: int
    horizon: int  # a reader read past every offset below this one
    end: int | None  # the partition's end offset when a reader read it to the end
    lost: tuple[Ack, ...] = ()
    unread: tuple[Ack, ...] = ()
    duplicated: tuple[tuple[bytes, tuple[tuple[int, int], ...]], ...] = ()
    inconsistent_offsets: tuple[tuple[int, tuple[bytes, ...]], ...] = ()
    reordered: tuple[tuple[int, int, int, int, int], ...] = ()  # producer, offset, seq, offset, seq
    unexpected: tuple[Read, ...] = ()
    # The longest time between two acknowledgements: (seconds, when it ended); None below two.
    longest_ack_gap: tuple[float, float] | None = None

    @property
    def valid(self) -> bool:
        return not (
            self.lost
            or self.unread
            or self.duplicated
            or self.inconsistent_offsets
            or self.reordered
            or self.unexpected
        )

    def lines(self) -> list[str]:
        head = (
            f"partition {self.partition}: {self.acknowledged} acknowledged, {self.read} read, "
            + (
                f"read to its end at offset {self.end}"
                if self.end is not None
                else f"read up to offset {self.horizon}, NOT to its end"
            )
            + f"; lost {len(self.lost)}, unread "
            f"{len(self.unread)}, duplicated {len(self.duplicated)}, inconsistent offsets "
            f"{len(self.inconsistent_offsets)}, reordered {len(self.reordered)}, unexpected "
            f"{len(self.unexpected)}"
        )
        out = [head]
        if self.longest_ack_gap is not None:
            gap_s, ended_s = self.longest_ack_gap
            out.append(
                f"  longest wait between acknowledgements: {gap_s:.1f} s, to {ended_s:.1f} s"
            )
        out += _examples("lost", self.lost, str)
        out += _examples("unread", self.unread, str)
        out += _examples(
            "duplicated",
            self.duplicated,
            lambda d: f"{_short(d[0])} at " + ", ".join(f"{p}/{o}" for p, o in d[1]),
        )
        out += _examples(
            "inconsistent offset",
            self.inconsistent_offsets,
            lambda i: f"offset {i[0]} holds " + " and ".join(_short(v) for v in i[1]),
        )
        out += _examples(
            "reordered",
            self.reordered,
            lambda r: (
                f"producer {r[0]}: sequence {r[2]} at offset {r[1]} before "
                f"sequence {r[4]} at offset {r[3]}"
            ),
        )
        out += _examples("unexpected", self.unexpected, str)
        return out


@dataclass(frozen=True, slots=True)
class Analysis:
    seed: int
    replay: str
    partitions: tuple[PartitionReport, ...]
    failed_writes: int
    events: tuple[Event, ...] = field(default=())
    failures_by_error: tuple[tuple[str, int], ...] = ()  # error name, count; most first

    @property
    def valid(self) -> bool:
        return all(p.valid for p in self.partitions)

    @property
    def lost(self) -> int:
        return sum(len(p.lost) for p in self.partitions)

    def report(self) -> str:
        verdict = "valid" if self.valid else "INVALID"
        lines = [
            f"history of seed {self.seed}: {verdict}"
            + (f" (replay: {self.replay})" if self.replay else "")
        ]
        lines += [f"  at {e.time_s:7.2f} s: {e.what}" for e in self.events]
        lines.append(
            f"  {self.failed_writes} writes failed (indeterminate, allowed)"
            + (
                ": " + ", ".join(f"{name} {count}" for name, count in self.failures_by_error)
                if self.failures_by_error
                else ""
            )
        )
        for partition in self.partitions:
            lines += ["  " + line for line in partition.lines()]
        return "\n".join(lines)


def analyze(history: History) -> Analysis:
    """Check ``history``; see the module docstring for what each anomaly means."""
    # librdkafka may acknowledge a record without its offset (an idempotent producer's retry
    # the broker found already written): such an ack counts for lost/unread by value only.
    acks = sorted(
        history.acks,
        key=lambda a: (a.partition, -1 if a.offset is None else a.offset, a.value),
    )
    reads = sorted(history.reads, key=lambda r: (r.partition, r.offset, r.value, r.reader))
    read_values = {r.value for r in reads}
    known = history.sent | {a.value for a in acks}

    places: dict[bytes, set[tuple[int, int]]] = defaultdict(set)  # value -> (partition, offset)
    at_offset: dict[tuple[int, int], set[bytes]] = defaultdict(set)
    for item in (*acks, *reads):
        if item.offset is None:
            continue
        places[item.value].add((item.partition, item.offset))
        at_offset[item.partition, item.offset].add(item.value)

    partitions = sorted(
        {a.partition for a in acks} | {r.partition for r in reads} | set(history.ends)
    )
    reports = []
    for partition in partitions:
        p_acks = [a for a in acks if a.partition == partition]
        p_reads = [r for r in reads if r.partition == partition]
        end = history.ends.get(partition)
        horizon = max([end or 0] + [r.offset + 1 for r in p_reads])
        never_read = [a for a in p_acks if a.value not in read_values]
        reports.append(
            PartitionReport(
                partition=partition,
                acknowledged=len(p_acks),
                read=len({r.offset for r in p_reads}),
                horizon=horizon,
                end=end,
                lost=tuple(
                    a
                    for a in never_read
                    if end is not None or (a.offset is not None and a.offset < horizon)
                ),
                unread=tuple(
                    a
                    for a in never_read
                    if end is None and (a.offset is None or a.offset >= horizon)
                ),
                duplicated=_duplicated(partition, places),
                inconsistent_offsets=tuple(
                    (offset, tuple(sorted(values)))
                    for (p, offset), values in sorted(at_offset.items())
                    if p == partition and len(values) > 1
                ),
                reordered=_reordered(partition, at_offset),
                unexpected=tuple(r for r in p_reads if r.value not in known),
                longest_ack_gap=_longest_gap(sorted(a.ack_time_s for a in p_acks)),
            )
        )
    return Analysis(
        seed=history.seed,
        replay=history.replay,
        partitions=tuple(reports),
        failed_writes=len(history.failures),
        events=tuple(sorted(history.events, key=lambda e: e.time_s)),
        failures_by_error=tuple(
            sorted(Counter(history.failures.values()).items(), key=lambda e: (-e[1], e[0]))
        ),
    )


def _longest_gap(times_s: list[float]) -> tuple[float, float] | None:
    """The longest interval between consecutive ``times_s`` (sorted), and where it ended."""
    gaps = [(later - earlier, later) for earlier, later in itertools.pairwise(times_s)]
    return max(gaps) if gaps else None


def _duplicated(
    partition: int, places: dict[bytes, set[tuple[int, int]]]
) -> tuple[tuple[bytes, tuple[tuple[int, int], ...]], ...]:
    """Values at several places, reported under the partition of their first place."""
    found = []
    for value, where in sorted(places.items()):
        ordered = tuple(sorted(where))
        if len(ordered) > 1 and ordered[0][0] == partition:
            found.append((value, ordered))
    return tuple(found)


def _reordered(
    partition: int, at_offset: dict[tuple[int, int], set[bytes]]
) -> tuple[tuple[int, int, int, int, int], ...]:
    """Pairs of one producer's records, adjacent in offset order, with the sequence going down.

    An offset holding two values is an inconsistent offset already; its values are left out
    here, so one fault is not counted twice.
    """
    last: dict[int, tuple[int, int]] = {}  # producer -> (offset, sequence) of its latest record
    found = []
    for (p, offset), values in sorted(at_offset.items()):
        if p != partition or len(values) != 1:
            continue
        decoded = decode_value(next(iter(values)))
        if decoded is None:
            continue
        producer, sequence = decoded
        previous = last.get(producer)
        if previous is not None and sequence < previous[1]:
            found.append((producer, previous[0], previous[1], offset, sequence))
        last[producer] = (offset, sequence)
    return tuple(found)


def _examples(kind: str, items: tuple, describe) -> list[str]:
    shown = [f"  {kind}: {describe(item)}" for item in items[:EXAMPLES_MAX]]
    if len(items) > EXAMPLES_MAX:
        shown.append(f"  ... and {len(items) - EXAMPLES_MAX} more {kind}")
    return shown


def _short(value: bytes) -> str:
    decoded = decode_value(value)
    if decoded is not None:
        return f"p{decoded[0]}#{decoded[1]}"
    return repr(value[:24])
