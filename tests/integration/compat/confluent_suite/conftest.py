"""One cluster of one broker (ZooKeeper, a controller, a broker; the integration tier's default
settings) shared by the confluent-kafka suite modules that run upstream's steps on it unchanged:
test_list_offsets, test_delete_records and test_incremental_alter_configs. Each works on topics
of its own (``<prefix>-<uuid1>``) and changes only those topics' records and configs, never a
broker's or the cluster's, so none sees another's traffic. Modules needing other broker settings
(SASL, ACLs, three brokers) keep their own cluster. Started once per test process for the package
(``--dist loadfile`` may split the modules over two processes: then each starts one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import ClusterState


@pytest.fixture(scope="package")
def one_broker_cluster(local_cluster, tmp_path_factory) -> Iterator[ClusterState]:
    with local_cluster(tmp_path_factory.mktemp("confluent-suite-cluster"), brokers=1) as state:
        yield state
