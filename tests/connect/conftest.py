"""One replicated cluster for the whole Connect tier (``tests/connect``).

The cluster is ZooKeeper, a controller and three brokers, started once per session (a start takes
several seconds on 2 cores) and stopped by PID when the tests end (``support.clusters``). Each test
works on topics, connectors and consumer groups of its own (``unique``), so tests never see each
other's data. Connect's internal topics are replicated 3 ways here, as in production. One
PostgreSQL server (``postgres_url``) serves the SQL connectors' tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState
from support.clusters import running_cluster
from support.postgres import running_postgres

# Groups form and notice a dead member in seconds, not tens of seconds: the first rebalance
# waits 300 ms for more members (3 s by default), and sessions may be as short as 1 s (6 s),
# so a distributed worker's test can use session.timeout.ms=3000.
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="session")
def connect_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    """The shared 3-broker cluster; ``.bootstrap_servers`` is ``host:port,host:port,...``."""
    data_dir = tmp_path_factory.mktemp("connect-cluster")
    with running_cluster(data_dir, brokers=3, broker_overrides=GROUP_OVERRIDES) as state:
        yield state


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The SQLAlchemy URL of a database on a real PostgreSQL server started for this session
    (Debian's package, an unprivileged cluster on 127.0.0.1; ``support.postgres``)."""
    with running_postgres() as url:
        yield url
