"""What one cleaning pass knows of transactions: Kafka's ``CleanedTransactionMetadata``.

The cleaner reads the batches of the range it cleans in offset order, from the log start, and
asks this tracker about each one:

- a data batch of a producer with an ABORTED transaction open at that offset (known from the
  segments' ``.txnindex`` entries, ``Log.collect_aborted_transactions``) is discarded;
- any other transactional data batch is committed data, compacted like any data; it marks its
  producer's transaction as still holding data (``_committed_with_data``);
- a marker (control batch) is *discardable* only once no data of its transaction was seen in
  this pass: an ABORT marker whose data this pass removes is kept, and so is its ``.txnindex``
  entry (``retained_entries``); a COMMIT marker whose transaction still has a batch is kept.

A discardable marker is not dropped at once: the cleaner gives it a delete horizon
(``now + delete.retention.ms``) and drops it in a later pass after that time, as Kafka does
(KIP-534's horizon, reused for markers), so that a consumer reading past the transaction's data
still sees the marker end it. Since data precedes its marker and every pass starts at the log
start, a marker becomes discardable only after a pass removed every batch of its transaction.

Not thread-safe: one pass, one tracker, on the cleaner's thread.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from odradek.storage.batch import BatchHeader
from odradek.storage.control import ControlType, EndTxnMarker
from odradek.storage.txn_index import AbortedTxn


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    data_seen: bool = False


class CleanedTransactions:
    """The transactions of one pass; see the module docstring."""

    def __init__(self, aborted: list[AbortedTxn]):
        # By first offset: an entry becomes "ongoing" once the pass reaches its first offset.
        self._aborted = [(t.first_offset, t.last_offset, t) for t in aborted]
        heapq.heapify(self._aborted)
        self._ongoing_aborts: dict[int, _OngoingAbort] = {}
        self._committed_with_data: set[int] = set()
        self._committed_data_kept: set[int] = set()  # of those, whose data this pass keeps
        # The entries of the ABORT markers kept because their data was seen in this pass, to
        # be written into the ``.txnindex`` of the cleaned segment holding the marker.
        self.retained_entries: list[AbortedTxn] = []
        # Whether a kept marker will become discardable on the next pass (its data went now).
        self.markers_pending = False

    def _reach(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, _, txn = heapq.heappop(self._aborted)
            self._ongoing_aborts.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Whether the batch belongs to an aborted transaction (the cleaner drops it)."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborts.get(header.producer_id)
        if ongoing is not None:
            ongoing.data_seen = True
            return True
        self._committed_with_data.add(header.producer_id)
        return False

    def on_data_kept(self, header: BatchHeader) -> None:
        """The cleaner keeps (some of) this committed transactional batch."""
        if header.is_transactional:
            self._committed_data_kept.add(header.producer_id)

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """Whether the marker may be discarded (after its delete horizon)."""
        self._reach(header.last_offset)
        if marker is None:  # an empty control batch (cleaned before) or an unknown type
            return header.records_count == 0
        if marker.control is ControlType.ABORT:
            ongoing = self._ongoing_aborts.pop(header.producer_id, None)
            if ongoing is not None and ongoing.data_seen:
                self.retained_entries.append(ongoing.txn)
                self.markers_pending = True
                return False
            return True
        if header.producer_id in self._committed_with_data:
            self._committed_with_data.discard(header.producer_id)
            if header.producer_id not in self._committed_data_kept:
                self.markers_pending = True  # all its data goes now: discardable next pass
            self._committed_data_kept.discard(header.producer_id)
            return False
        return True
