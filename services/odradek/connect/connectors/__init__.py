"""The connectors Odradek ships, written only against the plugin API (``connect.api``,
``connect.data``), as a third-party connector would be:

- ``file``: Kafka's ``FileStreamSource`` / ``FileStreamSink`` examples, same keys.
- ``sql``: a SQL source and sink through SQLAlchemy, in the role of Confluent's JDBC connectors.
- ``files_sink``: Parquet / JSON-lines files in a directory or any fsspec URL, exactly once by
  offset, in the role of Confluent's S3 sink.
"""
