"""Classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): Kafka's
``ClassicGroup`` and the classic half of ``GroupMetadataManager``.

- ``state``: the group states and the transitions between them;
- ``member``: a member and what it waits for;
- ``group``: ``ClassicGroup``, the ``Group`` of the shard's namespace;
- ``messages``: what the handlers pass in and get back (no kio types here);
- ``manager``: ``ClassicGroupManager`` (``shard.classic``), the protocol and its timers.

docs/groups/classic.md walks through the rebalance protocol as implemented here.
"""
