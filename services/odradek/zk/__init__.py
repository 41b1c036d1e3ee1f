"""Cluster metadata in ZooKeeper, laid out exactly as Kafka's ZooKeeper mode lays it out.

Layers, each importing only the ones below it:

- ``paths``: every znode path and the bytes stored there (Kafka's JSON), as frozen dataclasses
  with ``encode()`` / ``decode()``. Pure: no I/O.
- ``client``: ``ZkClient``, a thin wrapper over kazoo with bounded waits, typed errors, session
  events and an asyncio form of every call.
- ``registration`` (a broker's ephemeral ``/brokers/ids/<id>``) and ``election`` (the controller's
  ephemeral ``/controller`` and its strictly increasing ``/controller_epoch``).

``docs/zookeeper.md`` describes the layout, the session rules and the election.
"""
