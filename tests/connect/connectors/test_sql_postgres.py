"""The SQL source and sink against a real PostgreSQL server: every scenario of
support.sql_scenarios, each on an empty ``public`` schema."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from support import sql_scenarios

pytestmark = [pytest.mark.integration, pytest.mark.connect]


@pytest.fixture
def database_url(postgres_url: str) -> str:
    """The shared database with an empty ``public`` schema (faster than a database each)."""
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP SCHEMA public CASCADE"))
        conn.execute(sa.text("CREATE SCHEMA public"))
    engine.dispose()
    return postgres_url


@pytest.mark.parametrize("scenario", list(sql_scenarios.all_scenarios()), ids=lambda s: s.__name__)
def test_postgresql(scenario, database_url):
    scenario(database_url)
