"""KIP-848's consumer groups: the coordinator assigns, members reconcile
(``docs/groups/consumer.md``).

- ``assignment``: assignments as values (topic id -> partitions);
- ``member``: a member and its reconciliation state;
- ``assignors``: the server-side ``uniform`` and ``range`` assignors;
- ``reconciliation``: a member's next current assignment on its way to its target;
- ``group``: the group, its epochs and who owns which partition (``Group``);
- ``regex``: which subscription patterns are accepted (matching time stays small);
- ``requests``: what the heartbeat and describe carry, and Kafka's checks of a heartbeat;
- ``writes``: the records an operation writes;
- ``manager``: heartbeats, describe, timers and the replay of record types 3 to 8.
"""
