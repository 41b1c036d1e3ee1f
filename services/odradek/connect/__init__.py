"""Odradek Connect: a Kafka Connect-style worker, in Python, for importing data into topics and
exporting it out of them.

Layers (checked by import-linter; a layer imports only those below it):

- ``api``, ``data``: the plugin API a connector implements (Kafka Connect's, in Python) and the
  data model records carry (schemas and values). Pure.
- ``converters``, ``transforms``, ``predicates``, ``plugins``, ``connector_config``: how records
  are turned into bytes and changed on the way, how plugins are found (Python entry points), and
  the configuration every connector shares. Pure.
- ``runtime``: the worker: connectors and tasks running in threads, source offsets, sink
  consumer groups, error handling and the dead letter queue.
- ``herder``: the interface the REST API drives; ``standalone`` and ``distributed`` implement it
  (``distributed``: a group of workers through the group coordinator, state in compacted topics).
- ``rest``: Kafka Connect's REST API over a herder (aiohttp).
- ``connectors``: the connectors Odradek ships (file, SQL, Parquet/JSON-lines).
"""
