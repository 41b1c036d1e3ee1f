"""The shared cluster answers: a topic made through it is listed back (a guard for the fixture)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.connect]

TIMEOUT_S = 30


def test_connect_cluster_serves_clients(connect_cluster, unique) -> None:
    admin = AdminClient({"bootstrap.servers": connect_cluster.bootstrap_servers})
    topic = unique("t")
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(TIMEOUT_S)
    wait_until(  # metadata lags creation by an UpdateMetadata round
        lambda: topic in admin.list_topics(timeout=TIMEOUT_S).topics,
        f"{topic} listed",
        TIMEOUT_S,
        poll_s=0.1,
    )
