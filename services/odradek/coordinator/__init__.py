"""What Kafka's coordinators share (``coordinator-common``), used by the group coordinator
(``odradek.groups``) and the transaction coordinator (``odradek.transactions``) alike:

- ``runtime``: the partitions of an internal topic this broker leads, loading them, writing
  records and waiting for their replication, timers (asyncio; the log is a port the broker gives);
- ``result``: what an operation of a shard returns to the runtime;
- ``records``: the framing of the records kept in the internal topics (each coordinator
  declares its record types in its own ``RecordFormat``);
- ``partitioner``: which partition owns a key (Kafka's hash);
- ``errors``: the answers the runtime gives (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...).

Imports neither coordinator nor the broker; everything but the runtime is pure.
"""
