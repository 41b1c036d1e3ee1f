"""A SQL source and sink through SQLAlchemy 2, in the role of Confluent's JDBC connectors
(``io.confluent.connect.jdbc.JdbcSourceConnector`` / ``JdbcSinkConnector``, with their keys).

``connection.url`` is an SQLAlchemy URL (``sqlite:///path``, ``postgresql+psycopg://...``);
SQLite and PostgreSQL are tested, other SQLAlchemy dialects work where the SQL is portable
(upserts are dialect-specific: SQLite and PostgreSQL only).
"""

from odradek.connect.connectors.sql.sink import SqlSinkConnector, SqlSinkTask
from odradek.connect.connectors.sql.source import SqlSourceConnector, SqlSourceTask

__all__ = ["SqlSinkConnector", "SqlSinkTask", "SqlSourceConnector", "SqlSourceTask"]
