"""Distributed mode: workers that form a group through the group coordinator (protocol type
``connect``) and keep their state in compacted internal topics.

- ``protocol``: the member metadata and assignments exchanged in JoinGroup/SyncGroup (pure).
- ``assignor``: the leader's incremental cooperative assignment (KIP-415; pure).
- ``membership``: the group member (asyncio, the project's own client).
- ``stores``: the config, status and offset topics (confluent-kafka, in threads).
- ``herder``: ``DistributedHerder``, which ties them to the worker, and ``run()``.
"""
