"""A real PostgreSQL server for the connectors' tests, shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.postgres import running_postgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The SQLAlchemy URL of a database on a PostgreSQL server started for this session."""
    with running_postgres() as url:
        yield url
