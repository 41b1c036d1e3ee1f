"""The group coordinator: consumer groups and their committed offsets (Kafka's
``group-coordinator`` module), for the classic protocol and KIP-848's consumer protocol.

Layers, each importing only those below it:

- ``coordinator``: what the broker's handlers call (which shard owns a group; run an operation),
  and the runtime of ``__consumer_offsets`` (``group_runtime``);
- ``shard``: one partition's state, its groups in one namespace, replayed from records;
- ``offsets``, ``classic``, ``consumer``, ``admin``: the managers and state machines;
- ``records``: Kafka's key/value formats of ``__consumer_offsets``;
- ``config``, ``group``, ``errors``: shared vocabulary.

What it shares with the transaction coordinator is ``odradek.coordinator``: the runtime (the
partitions this broker leads, loading them, writing records and waiting for their
replication, timers; asyncio, the log a port the broker gives), ``Result``, the partitioner and
the runtime's errors. It never imports ``odradek.transactions``.

Nothing here imports the broker: the broker wires the runtime to its replicas and metadata
(``broker.group_coordinator``). docs/groups.md explains the state machines, the storage format
and the guarantees.
"""
