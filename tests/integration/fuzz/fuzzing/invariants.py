"""What must still hold after a batch of fuzz cases, checked from outside the broker.

Each check returns a list of problems (empty when it holds); the test fails on any, with the
cases that led to it. None of them asks the broker to judge itself:

- ``processes``: every member of the cluster still runs (its pid);
- ``ResourceSampler`` and ``resources``: resident memory (``/proc/<pid>/status`` VmRSS) and open
  file descriptors (``/proc/<pid>/fd``), sampled every few ms while cases are in flight, stay
  under their bounds (memory: above the largest broker's at the start; files: above each
  broker's own at the start, plus ``FDS_PER_SEGMENT`` for each segment more than then on its
  disks), with the peaks of each kind of round kept for the figures;
- ``loop_lag``: the broker's own ``odradek_event_loop_lag_seconds`` over a round of one of
  ``shapes``' kinds: no sample above ``LAG_MAX_S`` while a bounded huge array or a pipeline is
  served;
- ``scan_logs``: every partition directory on every broker's disks holds segments whose batches
  decode with kafka-python's reader (``MemoryRecords``, ``DefaultRecordBatch``: CRC, every
  record), whose records match the header's count and offsets, and which follow each other with
  no offset jump (a compacted topic may leave gaps, never overlaps);
- ``Ledger``: each watched partition's log end offset, asked with a real client
  (confluent-kafka's watermarks), never goes back, grows by no more than the records the fuzz
  sent it (with slack for mutated cases, which may land anywhere), agrees with the last batch on
  disk, and covers every acknowledged append, whose batch is still on disk unless retention or
  DeleteRecords moved the log start past it;
- ``client_round_trip``: a confluent-kafka producer and consumer still produce and consume on a
  control topic that no case names;
- ``closed_reasons`` and ``new_errors``: the broker's own evidence, its
  ``odradek_connections_closed_total{reason}`` (a handler or encoder failure is a bug) and
  tracebacks in its log.

Called from the test's thread between rounds, when no case is in flight; the sampler runs on a
thread of its own.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from prometheus_client.parser import text_string_to_metric_families

from fuzzing.traffic import Ack, Outcome
from odradek.local.cluster import Member, pid_alive
from support.consuming import poll_messages
from support.loop_prober import lag_buckets, lag_samples_between, worst_lag_between

__all__ = [
    "LAG_MAX_S",
    "LoopLag",
    "loop_lag_reading",
    "loop_lag",
    "FDS_PER_SEGMENT",
    "segment_count",
    "Peak",
    "ResourceSampler",
    "processes",
    "resources",
    "scan_logs",
    "PartitionOnDisk",
    "Ledger",
    "client_round_trip",
    "closed_reasons",
    "new_errors",
]

SAMPLE_INTERVAL_S = 0.02
# The broker's loop may never run this much later than asked while it serves a bounded huge
# array or a pipeline: an edge of its histogram's buckets (EVENT_LOOP_LAG_BUCKETS_S), as in
# tests/integration/cluster/test_request_work_bounds.py (250 ms there, on a quiet broker; here
# the broker also serves the rest of the fuzz, on a machine the CI loads).
LAG_MAX_S = 0.5
# After the round, before the histogram is read again. A stall's late sample is taken by the
# monitor's timer in the loop's first turn after the stall, before the reading (a connection
# accepted, then a request read: later turns) is served, even when the reading itself waits
# for the stall to end; this only lets the last answer's own work finish.
LAG_SETTLE_S = 0.05
LAG_READ_TIMEOUT_S = 60.0  # the reading waits for a loop that is still held
CLIENT_TIMEOUT_S = 20.0
SLACK_FACTOR = 2  # a mutated frame may repeat a batch (a duplicated segment)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


# A segment's open files: its log, offset index, time index and transaction index.
FDS_PER_SEGMENT = 4


def segment_count(member: Member) -> int:
    """How many log segments the broker has on its disks (each holds ``FDS_PER_SEGMENT``)."""
    return sum(1 for _ in Path(member.data_dir).glob("disk-*/*/*.log"))


@dataclass(frozen=True)
class Peak:
    rss_bytes: int = 0
    fds: int = 0

    def __or__(self, other: Peak) -> Peak:
        return Peak(max(self.rss_bytes, other.rss_bytes), max(self.fds, other.fds))


class ResourceSampler:
    """Samples the resident memory and the open file descriptors of ``pids`` on a thread.
    ``take_peaks`` returns the highest of each, per pid, since the last call; ``kind_peaks``
    the highest while each kind of round was being played (``kind``, set by the session)."""

    def __init__(self, pids: Iterable[int]):
        self.pids = list(pids)
        self.kind = "between rounds"
        self._peaks: dict[int, Peak] = {}
        self.kind_peaks: dict[str, dict[int, Peak]] = defaultdict(dict)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)

    def __enter__(self) -> ResourceSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            for pid in self.pids:
                try:
                    value = Peak(rss_bytes(pid), open_fds(pid))
                except OSError:
                    continue  # gone: ``processes`` says so
                with self._lock:
                    self._peaks[pid] = self._peaks.get(pid, Peak()) | value
                    by_kind = self.kind_peaks[self.kind]
                    by_kind[pid] = by_kind.get(pid, Peak()) | value

    def take_peaks(self) -> dict[int, Peak]:
        with self._lock:
            peaks, self._peaks = self._peaks, {}
        return peaks


@dataclass(frozen=True)
class LoopLag:
    """What a broker's loop-lag histogram gained over a round."""

    samples: int
    late: int  # samples above LAG_MAX_S
    worst_s: float  # the smallest bucket edge every sample stayed within (inf: beyond them all)


def loop_lag_reading(member: Member) -> dict[float, float]:
    return lag_buckets(member, timeout_s=LAG_READ_TIMEOUT_S)


def loop_lag(member: Member, before: dict[float, float]) -> LoopLag:
    """The lag samples ``member`` took since the reading ``before`` (see ``LAG_SETTLE_S``)."""
    time.sleep(LAG_SETTLE_S)
    after = loop_lag_reading(member)
    samples = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    late = lag_samples_between(before, after, LAG_MAX_S)
    return LoopLag(int(samples), int(late), worst_lag_between(before, after))


def processes(members: Sequence[Member]) -> list[str]:
    return [f"{m.role} {m.id} (pid {m.pid}) is gone" for m in members if not pid_alive(m.pid)]


def resources(
    brokers: Sequence[Member], peaks: dict[int, Peak], rss_max: int, fds_max: Mapping[int, int]
) -> list[str]:
    """Each broker's peak resident memory under ``rss_max``, its peak open file descriptors
    under its own bound (``fds_max``, by pid)."""
    problems = []
    for member in brokers:
        peak = peaks.get(member.pid, Peak()) | Peak(rss_bytes(member.pid), open_fds(member.pid))
        if peak.rss_bytes > rss_max:
            problems.append(
                f"broker {member.id}: resident memory reached {peak.rss_bytes >> 20} MiB "
                f"(bound {rss_max >> 20} MiB)"
            )
        if peak.fds > fds_max[member.pid]:
            problems.append(
                f"broker {member.id}: {peak.fds} open file descriptors "
                f"(bound {fds_max[member.pid]})"
            )
    return problems


# -- logs on disk ----------------------------------------------------------------------------


@dataclass
class PartitionOnDisk:
    """What the segments of one partition hold, as kafka-python reads them."""

    broker: int
    directory: Path
    segments: int = 0
    batches: dict[int, int] = field(default_factory=dict)  # base offset -> record count
    next_offset: int | None = None  # after the last batch


def _scan_partition(
    directory: Path, compacted: bool, broker: int
) -> tuple[PartitionOnDisk, list[str]]:
    found = PartitionOnDisk(broker, directory)
    problems: list[str] = []
    previous_last: int | None = None
    for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        found.segments += 1
        data = segment.read_bytes()
        records = MemoryRecords(data)
        where = f"{directory.name}/{segment.name}"
        first = True
        while True:
            try:
                batch = records.next_batch()
            except CorruptRecordError as e:
                problems.append(f"{where}: {e}")
                break
            if batch is None:
                break
            if not isinstance(batch, DefaultRecordBatch):
                problems.append(f"{where}: a batch of magic {batch.magic} at {batch.base_offset}")
                continue
            base, last = batch.base_offset, batch.last_offset
            at = f"{where} batch {base}..{last}"
            if first and base < int(segment.stem):
                problems.append(f"{at}: before the segment's base offset")
            first = False
            if not batch.validate_crc():
                problems.append(f"{at}: CRC does not match")
            try:
                offsets = [record.offset for record in batch]
            except Exception as e:  # any failure to read a stored batch is the finding
                problems.append(f"{at}: records do not decode: {e!r}")
                offsets = []
            count = batch.records_count
            if offsets and len(offsets) != count:
                problems.append(f"{at}: header says {count} records, {len(offsets)} read")
            if any(b <= a for a, b in zip(offsets, offsets[1:], strict=False)):
                problems.append(f"{at}: record offsets not increasing")
            if offsets and (offsets[0] < base or offsets[-1] > last):
                problems.append(f"{at}: record offsets {offsets[0]}..{offsets[-1]} outside")
            if not compacted and offsets and offsets != list(range(base, last + 1)):
                problems.append(f"{at}: record offsets are not {base}..{last}")
            if previous_last is not None:
                expected = previous_last + 1
                if base < expected or (base != expected and not compacted):
                    problems.append(f"{at}: follows a batch ending at {previous_last}")
            previous_last = last
            found.batches[base] = count
        leftover = len(data) - records.valid_bytes()
        if leftover:
            problems.append(f"{where}: {leftover} bytes after the last whole batch")
    found.next_offset = None if previous_last is None else previous_last + 1
    return found, problems


def scan_logs(
    brokers: Sequence[Member], compacted: set[str]
) -> tuple[dict[tuple[str, int], PartitionOnDisk], list[str]]:
    """Every partition on every broker's disks; see the module docstring."""
    partitions: dict[tuple[str, int], PartitionOnDisk] = {}
    problems: list[str] = []
    for member in brokers:
        for directory in sorted(Path(member.data_dir).glob("disk-*/*-*")):
            topic, _, index = directory.name.rpartition("-")
            if not directory.is_dir() or not index.isdigit():
                continue  # a directory being deleted (``<tp>.<id>-delete``), or a file
            try:
                found, trouble = _scan_partition(directory, topic in compacted, member.id)
            except FileNotFoundError:
                continue  # deleted or compacted while we read it
            partitions[(topic, int(index))] = found
            problems += [f"broker {member.id} {p}" for p in trouble]
    return partitions, problems


# -- log end offsets -------------------------------------------------------------------------


class Ledger:
    """What the fuzz sent to and was acknowledged by each watched partition."""

    def __init__(self, topics: Sequence[str], compacted: Iterable[str]):
        self.topics = tuple(topics)
        self.compacted = set(compacted)
        self.end_offsets: dict[tuple[str, int], int] = {}
        self.budget: dict[tuple[str, int], int] = defaultdict(int)
        self.anywhere = 0  # records of mutated Produce cases, which may land on any partition
        self.acks: dict[tuple[str, int], list[Ack]] = defaultdict(list)

    def record(self, outcomes: Sequence[Outcome], acks: Sequence[Ack]) -> None:
        for outcome in outcomes:
            case = outcome.case
            for topic, partition, records in case.produce:
                if case.mutated:
                    self.anywhere += SLACK_FACTOR * records.offsets_max
                else:
                    self.budget[(topic, partition)] += records.offsets_max
            if b"compact" in case.frame:  # a config change may have made a topic compacted
                self.compacted.update(t for t in self.topics if t.encode() in case.frame)
        for ack in acks:
            self.acks[(ack.topic, ack.partition)].append(ack)

    def check(
        self,
        watermarks: dict[tuple[str, int], tuple[int, int]],
        disk: dict[tuple[str, int], PartitionOnDisk],
    ) -> list[str]:
        problems = []
        for tp, (low, high) in sorted(watermarks.items()):
            name = f"{tp[0]}[{tp[1]}]"
            before = self.end_offsets.get(tp)
            if before is not None and high < before:
                problems.append(f"{name}: log end offset went back from {before} to {high}")
            if before is not None and high > before + self.budget[tp] + self.anywhere:
                problems.append(
                    f"{name}: log end offset jumped from {before} to {high}; the fuzz sent at "
                    f"most {self.budget[tp] + self.anywhere} records"
                )
            on_disk = disk.get(tp)
            next_on_disk = None if on_disk is None else on_disk.next_offset
            if next_on_disk is not None and next_on_disk != high:
                problems.append(
                    f"{name}: the last batch on disk ends at {next_on_disk - 1}, "
                    f"ListOffsets says the log ends at {high}"
                )
            for ack in self.acks[tp]:
                if ack.base_offset + ack.count > high:
                    problems.append(f"{name}: acknowledged {ack.base_offset}+{ack.count} > {high}")
                elif (
                    ack.base_offset >= low
                    and tp[0] not in self.compacted
                    and on_disk is not None
                    and on_disk.batches.get(ack.base_offset) != ack.count
                ):
                    problems.append(
                        f"{name}: acknowledged batch at {ack.base_offset} ({ack.count} records) "
                        f"is not on disk; case {ack.case.description}"
                    )
            self.end_offsets[tp] = high
        self.budget.clear()
        self.anywhere = 0
        return problems


def watermarks(
    consumer: Consumer, topics: Sequence[str]
) -> tuple[dict[tuple[str, int], tuple[int, int]], list[str]]:
    """(low, high) of every partition of ``topics``, from confluent-kafka; and the partitions
    it could not get them for."""
    result, problems = {}, []
    metadata = consumer.list_topics(timeout=CLIENT_TIMEOUT_S)
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            problems.append(f"{topic}: gone from the metadata ({described and described.error})")
            continue
        for partition in described.partitions:
            try:
                result[(topic, partition)] = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S, cached=False
                )
            except KafkaException as e:
                problems.append(f"{topic}[{partition}]: ListOffsets failed: {e}")
    return result, problems


# -- a real client ---------------------------------------------------------------------------


def client_round_trip(
    bootstrap: str, topic: str, count: int = 3, security: Mapping[str, str] | None = None
) -> list[str]:
    """Produce ``count`` records with confluent-kafka (with ``security``'s settings, e.g. SASL
    and TLS) and read them back."""
    values = [f"control {uuid.uuid4().hex} {i}".encode() for i in range(count)]
    delivered: list[int] = []
    errors: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            delivered.append(message.offset())

    producer = Producer(
        {
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 15_000,
        }
    )
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    left = producer.flush(CLIENT_TIMEOUT_S)
    if left or errors or len(delivered) != count:
        return [f"control produce: {left} undelivered, errors {errors}"]
    consumer = Consumer(
        {
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-control",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, min(delivered))])
        received = [m.value() for m in poll_messages(consumer, count, CLIENT_TIMEOUT_S)]
    except KafkaException as e:
        return [f"control consume: {e}"]
    finally:
        consumer.close()
    if received != values:
        return [f"control consume: read {len(received)} of {count} records back"]
    return []


# -- the broker's own evidence ---------------------------------------------------------------


def closed_reasons(member: Member) -> dict[str, float]:
    """``odradek_connections_closed_total`` by reason (empty where the metric does not exist)."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_connections_closed":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counts[sample.labels["reason"]] = sample.value
    return counts


def new_errors(member: Member, position: int) -> tuple[list[str], int]:
    """Log records of the member after byte ``position`` at level ERROR or above, or holding a
    traceback (each with its traceback); and the new position."""
    with open(member.log, "rb") as log:
        log.seek(position)
        text = log.read().decode(errors="replace")
        end = log.tell()
    records: list[list[str]] = []
    for line in text.splitlines():
        if _RECORD_START.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
    flagged = [
        "\n".join(lines[:LOG_RECORD_LINES_MAX])
        for lines in records
        if _SEVERE.search(lines[0]) or any("Traceback" in line for line in lines)
    ]
    return flagged, end


_RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # how the services' log lines begin
_SEVERE = re.compile(r" (ERROR|CRITICAL) ")
LOG_RECORD_LINES_MAX = 40
