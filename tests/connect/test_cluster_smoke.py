"""The shared cluster answers: a topic made through it is listed back (a guard for the fixture)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.connect]

TIMEOUT_S = 30


def test_connect_cluster_serves_clients(connect_cluster, unique) -> None:
    admin = AdminClient({"bootstrap.servers": connect_cluster.bootstrap_servers})
    topic = unique("t")
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S  # metadata lags creation by an UpdateMetadata round
    while topic not in admin.list_topics(timeout=TIMEOUT_S).topics:
        assert time.monotonic() < deadline, f"{topic} never listed"
        time.sleep(0.1)
