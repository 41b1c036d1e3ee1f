"""One broker process (with ZooKeeper and a controller) for the classic group tests:
``__consumer_offsets`` with one replica, a short initial rebalance delay and short sessions
allowed, so rebalances and expiries take seconds. Tests share it; each uses groups of its own.
``classic_wire`` builds the raw requests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState

CLASSIC_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "500",
}


@pytest.fixture(scope="package")
def classic_cluster(tmp_path_factory, local_cluster) -> Iterator[ClusterState]:
    data_dir = tmp_path_factory.mktemp("classic-groups")
    with local_cluster(data_dir, brokers=1, broker_overrides=CLASSIC_OVERRIDES) as state:
        yield state
