"""Distributed mode: workers that form a group through the group coordinator (protocol type
``connect``) and keep their state in compacted internal topics.

- ``protocol``: the member metadata and assignments exchanged in JoinGroup/SyncGroup (pure).
- ``assignor``: the leader's incremental cooperative assignment (KIP-415; pure).
- ``membership``: the group member (asyncio, the project's own client).
- ``stores``: the config, status and offset topics (confluent-kafka, in threads).
- ``kafka_log``: ``KafkaBasedLog``, the compacted topic the stores are built on.
- ``herder``: ``DistributedHerder``, which ties them to the worker.
- ``process``: the ``odradek connect distributed`` process (``herder.run`` calls it).
"""
