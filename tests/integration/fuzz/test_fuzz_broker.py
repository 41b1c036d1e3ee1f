"""Fuzzed requests of every served API cannot crash, bloat, hang or corrupt a real broker.

Against each cluster of ``conftest`` (real processes, real ZooKeeper; one plaintext, one secured
as ``odradek local up --security sasl_ssl``), Hypothesis draws rounds of
cases (``fuzzing.strategies``: valid requests from kio's schemas for every served API and
version, mutated at the field and byte level; ``fuzzing.shapes``: rounds of a huge array of tiny
elements, or of many tiny requests pipelined on one connection) and sends them over raw sockets
to every broker's client listener. Over each round of those two shapes the broker's own loop
lag (``odradek_event_loop_lag_seconds``) stays under ``invariants.LAG_MAX_S`` (for huge arrays,
of the APIs proven bounded). After every ``CHECK_EVERY`` cases, and at the end,
``fuzzing.invariants`` must hold: every process alive, resident memory and open files (sampled
while cases are in flight) bounded, every stored batch
decodable by kafka-python with no offset jump, log end offsets moved only by what was sent and
covering what was acknowledged, a real client served, and no handler failure in the broker's
own metrics or log. Well-formed requests must be answered in time, and no record set that Kafka
refuses may be accepted. On the secured cluster also: nothing but ApiVersions and SASL is
answered before a connection authenticates, however the SASL exchange is mangled, TLS
ClientHellos mutated in the clear harm nothing, and a principal that is not the cluster has
every control-plane request refused.

Knobs (environment): ``ODRADEK_FUZZ_SEED`` (or ``--hypothesis-seed``) and
``ODRADEK_FUZZ_TIME_MS`` replay a run (both are printed first); ``ODRADEK_FUZZ_CASES`` and
``ODRADEK_FUZZ_TIME_S`` bound it (CI: 300 cases; ``make soak`` runs more, several seeds);
``ODRADEK_FUZZ_APIS`` and ``ODRADEK_FUZZ_SKIP_APIS`` (comma-separated api keys) narrow it.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time

import pytest
from fuzzing.session import FuzzSession, Limits, drive
from fuzzing.shapes import rounds

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

MIB = 1024 * 1024
CASES = int(os.environ.get("ODRADEK_FUZZ_CASES", "300"))
TIME_BUDGET_S = float(os.environ.get("ODRADEK_FUZZ_TIME_S", "80"))  # then no new rounds
CHECK_EVERY = 50
# Above the request memory pool (queued.max.request.bytes): the interpreter's own growth while
# it decodes, validates and answers (measured: at most 15 MiB over runs of 300 to 2,000 cases).
RSS_GROWTH_ABOVE_POOL = 64 * MIB
# Open files above each broker's own at the start, besides the files of the segments it gains
# (invariants.FDS_PER_SEGMENT each): the fuzz's connections (a round holds at most four), the
# checks' clients, the broker's to its peer and the controller.
FDS_GROWTH_MAX = 64


def _seed(config: pytest.Config) -> int:
    chosen = os.environ.get("ODRADEK_FUZZ_SEED") or config.getoption("--hypothesis-seed", None)
    return int(chosen) if chosen else random.SystemRandom().randrange(2**32)


def _api_keys(variable: str) -> set[int]:
    return {int(key) for key in os.environ.get(variable, "").split(",") if key.strip()}


@pytest.mark.parametrize("cluster", ["fuzz_cluster", "secured_fuzz_cluster"])
def test_fuzzed_requests_leave_the_broker_whole(cluster, request, tmp_path):
    fuzz_cluster = request.getfixturevalue(cluster)
    run_seed = _seed(request.config)
    base_time_ms = int(os.environ.get("ODRADEK_FUZZ_TIME_MS") or time.time() * 1000)
    replay = (
        f"ODRADEK_FUZZ_SEED={run_seed} ODRADEK_FUZZ_TIME_MS={base_time_ms} "
        f"ODRADEK_FUZZ_CASES={CASES} .venv/bin/python -m pytest {request.node.nodeid}"
    )
    print(f"\nfuzz: seed {run_seed}, base time {base_time_ms} ms, {CASES} cases\nfuzz: {replay}")

    only = _api_keys("ODRADEK_FUZZ_APIS")
    skipped = _api_keys("ODRADEK_FUZZ_SKIP_APIS")
    targets = [
        dataclasses.replace(
            t,
            apis={k: v for k, v in t.apis.items() if (not only or k in only) and k not in skipped},
            pools=dataclasses.replace(t.pools, base_time_ms=base_time_ms),
        )
        for t in fuzz_cluster.targets
    ]
    rss_growth_max = fuzz_cluster.pool_bytes + RSS_GROWTH_ABOVE_POOL
    limits = Limits(CASES, TIME_BUDGET_S, CHECK_EVERY, rss_growth_max, FDS_GROWTH_MAX)
    session = FuzzSession(
        members=fuzz_cluster.state.members,
        targets=targets,
        bootstrap=fuzz_cluster.bootstrap,
        watched_topics=fuzz_cluster.watched_topics,
        compacted=fuzz_cluster.compacted,
        control_topic=fuzz_cluster.control_topic,
        limits=limits,
        replay=replay,
        evidence_dir=tmp_path,
        client_security=fuzz_cluster.client_security,
    )
    drive(session, rounds([(t.apis, t.pools) for t in targets]), run_seed)
    print(f"fuzz: seed {run_seed}: " + session.summary())
    assert session.failure is None, session.failure
