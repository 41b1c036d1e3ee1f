"""One real cluster for the client compatibility tests: ZooKeeper, a controller, three brokers.

``odradek local up`` starts them as processes on 127.0.0.1 once for the whole directory; the
teardown stops them with ``odradek local down`` and checks that no member survived. Tests share
the cluster, so each one works on topics of its own (``topic_name``).

The helpers here wait with a bound and never assert on behaviour: ``wait_for_topic`` asks every
broker directly (Metadata v4, never auto-creating) until each one lists the topic with all its
partitions led, so a client that bootstraps from any broker finds it; ``paused`` stops a
process with SIGSTOP (the kernel still queues what clients send it) and resumes it with
SIGCONT, which makes clients time out in-flight requests and retry them; ``retry_evidence``
then shows that the leader really did receive a batch twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from odradek.local.cluster import ClusterState, Member
from odradek.storage.batch import iter_batches
from support.topic_views import broker_leaders
from support.waiting import wait_until

WAIT_S = 20.0  # the longest any helper waits for the cluster to converge
POLL_S = 0.1


@pytest.fixture(scope="package")
def cluster_state(tmp_path_factory, local_cluster) -> Iterator[ClusterState]:
    with local_cluster(tmp_path_factory.mktemp("compat-cluster"), brokers=3) as state:
        yield state


@pytest.fixture(scope="package")
def bootstrap(cluster_state: ClusterState) -> str:
    return cluster_state.bootstrap_servers


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``topic_name("codec")`` -> a topic name no other test uses."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)[:80]

    def make(suffix: str = "") -> str:
        middle = f"-{suffix}" if suffix else ""
        return f"{base}{middle}-{uuid.uuid4().hex[:6]}"

    return make


def brokers_view(state: ClusterState, topic: str) -> list[dict[int, int] | None]:
    """Every broker's partition -> leader map for ``topic`` (None where it is unknown)."""
    brokers = [m for m in state.members if m.role == "broker"]

    async def ask_all():
        return await asyncio.gather(*(broker_leaders(m.address, topic) for m in brokers))

    return asyncio.run(ask_all())


def leaders(state: ClusterState, topic: str) -> dict[int, int]:
    """Partition -> leader broker id, from the first broker that knows the topic."""
    return next(view for view in brokers_view(state, topic) if view)


@pytest.fixture
def wait_for_topic(cluster_state: ClusterState) -> Callable[[str, int], dict[int, int]]:
    """``wait_for_topic(name, partitions)``: until every broker lists it, every partition led."""

    def wait(topic: str, partitions: int) -> dict[int, int]:
        def ready():
            views = brokers_view(cluster_state, topic)
            complete = all(
                view is not None
                and sorted(view) == list(range(partitions))
                and all(leader >= 0 for leader in view.values())
                for view in views
            )
            return complete and views[0]

        return wait_until(
            ready,
            f"{topic} with {partitions} led partitions on every broker",
            WAIT_S,
            poll_s=POLL_S,
        )

    return wait


@pytest.fixture
def wait_for_topic_gone(cluster_state: ClusterState) -> Callable[[str], None]:
    def wait(topic: str) -> None:
        wait_until(
            lambda: all(view is None for view in brokers_view(cluster_state, topic)),
            f"{topic} gone from every broker's metadata",
            WAIT_S,
            poll_s=POLL_S,
        )

    return wait


@pytest.fixture
def leader_of(cluster_state: ClusterState) -> Callable[[str, int], Member]:
    """``leader_of(topic, partition)`` -> the broker member leading it."""

    def find(topic: str, partition: int) -> Member:
        broker_id = leaders(cluster_state, topic)[partition]
        return next(m for m in cluster_state.members if m.role == "broker" and m.id == broker_id)

    return find


@pytest.fixture
def paused() -> Callable[[Member], contextlib.AbstractContextManager[None]]:
    """``with paused(member):`` SIGSTOP on entry, SIGCONT on exit (always)."""

    @contextlib.contextmanager
    def pause(member: Member) -> Iterator[None]:
        os.kill(member.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(member.pid, signal.SIGCONT)

    return pause


def scrape(member: Member) -> dict[str, list]:
    """A member's ``/metrics``, parsed: family name -> its samples."""
    with urllib.request.urlopen(f"http://{member.admin}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture
def retry_evidence() -> Callable[[Member, str, int], tuple[int, int]]:
    """``retry_evidence(leader, topic, partition)`` -> (Produce requests answered, log batches).

    Every Produce request to a one-partition topic carries one batch; when the leader answered
    more Produce requests than its log holds batches, some were retries it recognised as
    duplicates (the count covers all topics: call it before and after, with nothing else
    producing to that broker).
    """

    def evidence(leader: Member, topic: str, partition: int) -> tuple[int, int]:
        requests = sum(
            s.value
            for s in scrape(leader).get("odradek_request_latency_seconds", [])
            if s.name.endswith("_count") and s.labels.get("api") == "Produce"
        )
        batches = sum(
            sum(1 for _ in iter_batches(segment.read_bytes()))
            for segment in Path(leader.data_dir).glob(f"disk-*/{topic}-{partition}/*.log")
        )
        return int(requests), batches

    return evidence
