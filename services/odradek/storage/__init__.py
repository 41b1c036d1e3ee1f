"""The storage engine: partition logs of segment files, as Kafka lays them out.

Layers, each importing only those below it (the contract in pyproject.toml lists every module,
and ``tests/unit/storage/test_layers_complete.py`` keeps it so):

- ``walker_reference``: the record walker's specification in plain Python (tests run it).
- ``batch``: record batch v2 headers (validate, assign offsets in place); no I/O.
- ``executors``: the threads slow file work runs on (fsyncs for ``flush.messages``, snapshots,
  deletions), so the thread that appends never waits for the disk.
- ``io_errors``: what an I/O error does (``disk_errors``: record it, raise KafkaStorageError).
- ``file_ops``: the calls that change the disk (``FileOps``), injected from ``LogManager`` down
  to every file, so tests inject disk faults; ``OS_FILE_OPS`` is ``os`` itself.
- ``compression``: the codecs; decompression in bounded pieces.
- ``checkpoint``: Kafka's offset checkpoint files (and its topic-name rule).
- ``records``: record-level decoding and encoding for the few paths that need the records
  themselves (compaction, lookups by timestamp, ``compression.type``).
- ``walker``: the check of every record of every appended batch, by the C extension
  ``_recordwalk`` (bounds-checked, GIL released), over compressed batches in bounded pieces.
- ``files``: every file and directory name, and the offset-to-file-name rule.
- ``index``: the sparse ``.index`` and ``.timeindex`` files.
- ``txn_index``: the ``.txnindex`` of aborted transactions beside a segment.
- ``control``: transaction markers (control batches): encoding, reading their type.
- ``segment``: one ``.log`` file with its indexes.
- ``producer_state``: idempotent producers' sequences, checked on append, snapshotted; each
  producer's open transaction, ended by a marker.
- ``validator``: what a record set must satisfy before a log takes it (Kafka's LogValidator);
  pure, so it may run off the appending thread.
- ``leader_epoch``: the leader-epoch cache and its ``leader-epoch-checkpoint``.
- ``log_segments``: the immutable snapshot of a log's segments that readers see.
- ``append``: an append being made (offsets assigned, bytes to write) and what it did.
- ``cleaned_txns``: the aborted transactions the cleaner keeps or drops.
- ``flusher``: a log's fsyncs and recovery point (a part of ``Log``).
- ``loader``: a partition directory read and recovered into a value, ``LoadedLogOffsets``.
- ``retention``: a log's old segments deleted, its files removed late (a part of ``Log``).
- ``log_compaction``: the cleaner's side of a log (a part of ``Log``).
- ``log``: one partition: appends, reads, truncation, leader epochs, the last stable offset.
- ``cleaner``: compaction of logs with ``cleanup.policy=compact``.
- ``log_dir_move``: a replica's log copied to another log dir (KIP-113).
- ``manager``: all logs of a broker across its JBOD ``log.dirs``.

No module here opens a socket; the broker calls in and sends what ``Log.read`` returns.
"""
