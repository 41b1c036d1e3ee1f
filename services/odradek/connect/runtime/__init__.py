"""The worker runtime: connectors and tasks in threads, source offsets, sink consumer groups,
error handling and the dead letter queue.

- ``worker``: ``Worker``, what a herder drives (start/stop connectors and tasks, target states).
- ``source_task`` / ``sink_task``: one thread per task (poll -> transforms -> converters ->
  producer; consumer -> converters -> transforms -> put).
- ``offsets``: the ``OffsetStore`` protocol, the standalone file store, the reader source tasks
  get, and the per-task tracking of acknowledged source offsets.
- ``status``: the ``StatusListener`` protocol and the in-memory one standalone mode uses.
- ``errors``: ``errors.tolerance``, retries, the error log and the dead letter queue.
- ``pipeline``: converters and transforms built from a connector's config.
"""
