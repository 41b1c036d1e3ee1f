"""One replicated cluster for the transaction proofs: ZooKeeper, a controller, three brokers.

Every topic has three replicas and ``min.insync.replicas`` 2, ``__transaction_state`` and
``__consumer_offsets`` included, so a transaction's state, its markers and its offsets survive
``kill -9`` of any one broker. Settings are shortened for tests: three partitions of each internal
topic, timed-out transactions looked for every second, a dead broker's ZooKeeper session gone
after 6 s (ZooKeeper ticks of 500 ms), the first rebalance of a group after 200 ms. Tests share the
cluster (a test that kills a broker restarts it) and each works on topics and groups of its own.
The ``txn_proof`` package (the worker process, its supervisor, topics and reads) is importable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState
from support.clusters import running_cluster

ZK_TICK_MS = 500
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "60000",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
}


@pytest.fixture(scope="package")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    data_dir = tmp_path_factory.mktemp("txn-cluster")
    with running_cluster(
        data_dir, brokers=3, broker_overrides=TXN_OVERRIDES, zookeeper_tick_time_ms=ZK_TICK_MS
    ) as state:
        yield state
