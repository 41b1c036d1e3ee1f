"""The storage engine: partition logs of segment files, as Kafka lays them out.

Layers, each importing only those below it:

- ``walker_reference``: the record walker's specification in plain Python (tests run it).
- ``batch``: record batch v2 headers (validate, assign offsets in place); no I/O.
- ``executors``: the threads slow file work runs on (fsyncs for ``flush.messages``, snapshots,
  deletions), so the thread that appends never waits for the disk.
- ``compression``: the codecs; decompression in bounded pieces.
- ``records``: record-level decoding and encoding for the few paths that need the records
  themselves (compaction, lookups by timestamp, ``compression.type``).
- ``walker``: the check of every record of every appended batch, by the C extension
  ``_recordwalk`` (bounds-checked, GIL released), over compressed batches in bounded pieces.
- ``index``: the sparse ``.index`` and ``.timeindex`` files.
- ``txn_index``: the ``.txnindex`` of aborted transactions beside a segment.
- ``segment``: one ``.log`` file with its indexes.
- ``control``: transaction markers (control batches): encoding, reading their type.
- ``producer_state``: idempotent producers' sequences, checked on append, snapshotted; each
  producer's open transaction, ended by a marker.
- ``validator``: what a record set must satisfy before a log takes it (Kafka's LogValidator);
  pure, so it may run off the appending thread.
- ``log``: one partition: a sequence of segments, appends, reads, retention, recovery.
- ``cleaner``: compaction of logs with ``cleanup.policy=compact``.
- ``manager``: all logs of a broker across its JBOD ``log.dirs``.

No module here opens a socket; the broker calls in and sends what ``Log.read`` returns.
"""
