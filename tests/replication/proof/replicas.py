"""Every replica of a partition holds the same bytes up to the high watermark.

Kafka's followers append the leader's record batches as they are, with their offsets and
``partition_leader_epoch``; so after any number of failovers the committed prefix of a partition
is one byte string on every replica. This module reads each replica straight from a broker's log
directories (Kafka's layout: ``<log.dir>/<topic>-<partition>/<base offset, 20 digits>.log``, and
``replication-offset-checkpoint`` beside the partition directories), walks its batches in offset
order and compares them, batch by batch and byte for byte, up to a bound.

The bound is the lowest high watermark among the replicas (each broker checkpoints its own). Why
the lowest, and why that is safe:
- Above a replica's own high watermark it may hold an uncommitted tail (appended as leader or
  fetched, never acknowledged with ``acks=all``) that the next leader truncates away; two
  replicas may differ there legitimately, so comparing past it would accuse a correct cluster.
- Below any replica's high watermark everything is committed, and a committed record is on every
  replica that was in sync when it was committed; a replica's high watermark never passes its
  own log end offset, so each replica really holds everything below the lowest one.
- A replica that lagged (out of the ISR) has a low high watermark and lowers the bound instead
  of failing; the fault tests therefore wait for a full ISR before stopping the cluster, and
  separately require the bound to cover every acknowledged offset, so a low bound cannot hide a
  loss.
When no replica wrote a checkpoint (a broker that predates it), the caller's bound is used: the
leader's high watermark as a consumer saw it.

Segment boundaries may differ between replicas (each rolls its own segments); batches are
compared, not files. A walk stops at the first batch that is not whole and intact (a torn tail
left by a crash, not yet recovered): it is reported, and it fails the comparison only if the
replica then ends below the bound. Reads files only; run it on a stopped cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.errors import OdradekError
from odradek.storage.batch import validate_batch
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.files import REPLICATION_OFFSET_CHECKPOINT


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    next_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    broker_id: int
    directory: Path | None  # the partition's directory; None when no log dir has it
    batches: tuple[StoredBatch, ...]
    high_watermark: int | None  # from the checkpoint; None when not checkpointed
    torn: str | None = None  # why the walk stopped before the end of a segment, if it did

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0


def read_replica(
    broker_id: int, log_dirs: Sequence[Path], topic: str, partition: int
) -> ReplicaLog:
    """The replica of ``topic``-``partition`` in whichever of ``log_dirs`` holds it."""
    for log_dir in log_dirs:
        directory = Path(log_dir) / f"{topic}-{partition}"
        if directory.is_dir():
            batches, torn = _walk(directory)
            checkpoint = OffsetCheckpointFile(Path(log_dir) / REPLICATION_OFFSET_CHECKPOINT)
            high_watermark = checkpoint.read().get((topic, partition))
            return ReplicaLog(broker_id, directory, batches, high_watermark, torn)
    return ReplicaLog(broker_id, None, (), None)


def _walk(directory: Path) -> tuple[tuple[StoredBatch, ...], str | None]:
    batches: list[StoredBatch] = []
    for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        data = segment.read_bytes()
        position = 0
        while position < len(data):
            try:
                header = validate_batch(data, position, len(data) - position)
            except OdradekError as e:
                return tuple(batches), f"{segment.name} at byte {position}: {e}"
            end = position + header.size_in_bytes
            batches.append(StoredBatch(header.base_offset, header.next_offset, data[position:end]))
            position = end
    return tuple(batches), None


@dataclass(frozen=True, slots=True)
class ReplicaComparison:
    topic: str
    partition: int
    bound: int  # batches starting below this offset were compared
    bound_from: str
    replicas: tuple[int, ...]
    differences: tuple[str, ...]

    @property
    def identical(self) -> bool:
        return not self.differences

    def report(self) -> str:
        head = (
            f"{self.topic}-{self.partition}: replicas {list(self.replicas)} compared below "
            f"offset {self.bound} ({self.bound_from}): "
            + ("identical" if self.identical else "DIFFERENT")
        )
        return "\n".join([head, *(f"  {d}" for d in self.differences)])


def compare_replicas(
    topic: str,
    partition: int,
    replicas: Sequence[ReplicaLog],
    *,
    high_watermark: int | None = None,
    all_in_sync: bool = False,
) -> ReplicaComparison:
    """Compare every replica with the first, batch by batch, below the bound (see above).

    ``high_watermark`` is the caller's own view (a consumer's), used when no replica has a
    checkpoint, and as a ceiling otherwise. With ``all_in_sync`` (every replica was in the ISR
    when the cluster stopped) the bound is the highest high watermark known instead: every ISR
    member holds everything below the leader's, while a follower's own checkpoint lags it by
    the fetch that would have told it.
    """
    checkpointed = [r.high_watermark for r in replicas if r.high_watermark is not None]
    if all_in_sync and (checkpointed or high_watermark is not None):
        known = checkpointed + ([high_watermark] if high_watermark is not None else [])
        bound, bound_from = max(known), "highest high watermark, every replica in the ISR"
    elif checkpointed:
        bound, bound_from = min(checkpointed), "lowest checkpointed high watermark"
        if high_watermark is not None and high_watermark < bound:
            bound, bound_from = high_watermark, "high watermark seen by the consumer"
    elif high_watermark is not None:
        bound, bound_from = high_watermark, "high watermark seen by the consumer (no checkpoint)"
    else:
        bound, bound_from = 0, "no high watermark known"
    differences = []
    for replica in replicas:
        if replica.directory is None:
            differences.append(f"broker {replica.broker_id} has no directory for the partition")
        elif replica.log_end_offset < bound:
            differences.append(
                f"broker {replica.broker_id} ends at offset {replica.log_end_offset}, below "
                f"{bound}" + (f" (torn: {replica.torn})" if replica.torn else "")
            )
    present = [r for r in replicas if r.directory is not None]
    if present:
        reference = present[0]
        expected = [b for b in reference.batches if b.base_offset < bound]
        for replica in present[1:]:
            actual = [b for b in replica.batches if b.base_offset < bound]
            difference = _first_difference(expected, actual)
            if difference is not None:
                differences.append(
                    f"broker {replica.broker_id} differs from broker {reference.broker_id}: "
                    f"{difference}"
                )
    return ReplicaComparison(
        topic,
        partition,
        bound,
        bound_from,
        tuple(r.broker_id for r in replicas),
        tuple(differences),
    )


def _first_difference(expected: list[StoredBatch], actual: list[StoredBatch]) -> str | None:
    for mine, theirs in zip(expected, actual, strict=False):
        if mine.base_offset != theirs.base_offset or mine.next_offset != theirs.next_offset:
            return (
                f"batch [{theirs.base_offset}, {theirs.next_offset}) where the reference has "
                f"[{mine.base_offset}, {mine.next_offset})"
            )
        if mine.data != theirs.data:
            at = next(
                (i for i, (a, b) in enumerate(zip(mine.data, theirs.data, strict=False)) if a != b),
                min(len(mine.data), len(theirs.data)),
            )
            return f"batch at offset {mine.base_offset} differs from byte {at}"
    if len(expected) != len(actual):
        longer, which = (expected, "misses") if len(expected) > len(actual) else (actual, "adds")
        first = longer[min(len(expected), len(actual))]
        return f"{which} the batches from offset {first.base_offset}"
    return None
