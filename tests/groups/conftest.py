"""One replicated cluster for the consumer-group proofs: ZooKeeper, a controller, three brokers.

``__consumer_offsets`` has three replicas (``min.insync.replicas`` 2, as every topic here), so a
commit is acknowledged only once two brokers have it and survives ``kill -9`` of any one broker.
The brokers' group settings are shortened for tests: the first rebalance waits 500 ms for more
members instead of 3 s, and KIP-848 sessions may be as short as 3 s. Tests share the cluster and
each works on a topic and groups of its own. The ``group_proof`` package (member processes,
journal checks, traffic; named apart from the replication proofs' ``proof``) is importable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState
from support.clusters import running_cluster

GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "500",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    # Above message.max.bytes (1 MiB), so that a group too large to write to its partition is
    # reached (test_bad_input) before the coordinator's own metadata bounds refuse the join.
    "odradek.group.member.metadata.max.bytes": str(4 << 20),
    "odradek.group.metadata.max.bytes": str(8 << 20),
}


@pytest.fixture(scope="package")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    data_dir = tmp_path_factory.mktemp("group-cluster")
    with running_cluster(data_dir, brokers=3, broker_overrides=GROUP_OVERRIDES) as state:
        yield state
