"""The SQL source and sink against a real PostgreSQL server: every scenario of
support.sql_scenarios, each in a fresh database."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from support import sql_scenarios

pytestmark = [pytest.mark.integration, pytest.mark.connect]

_databases = itertools.count()


@pytest.fixture
def database_url(postgres_url: str) -> str:
    name = f"scenario_{next(_databases)}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return postgres_url.rsplit("/", 1)[0] + "/" + name


@pytest.mark.parametrize("scenario", list(sql_scenarios.all_scenarios()), ids=lambda s: s.__name__)
def test_postgresql(scenario, database_url):
    scenario(database_url)
