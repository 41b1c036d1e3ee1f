"""Issue 26's steps at 1,000 partitions a broker, on a real cluster: the same code as
``bench/scale_bench.py`` (which runs them at 1,000, 3,000 and 10,000 and prints the times; this
test checks that they work and lose nothing, not how fast).

Three brokers and two controllers (``odradek.local.cluster``), 100 topics of 10 partitions with
3 replicas each: CreateTopics until every partition has a leader; one acks=all record to every
partition; kill -9 of the active controller and of broker 1 until broker 1 leads nothing;
SIGTERM to broker 2 until it exits (its controlled shutdown); both restarted until broker 1
serves and no partition is under-replicated; then every partition still holds its record.
Every wait is bounded (``STEP_TIMEOUT_S``); ``run_size`` stops every process by pid.

``ODRADEK_SCALE_PARTITIONS`` sets the size (``make soak`` runs 3,000 and 10,000).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.crash]

REPO_ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = int(os.environ.get("ODRADEK_SCALE_PARTITIONS", "1000"))
SESSION_TIMEOUT_MS = 6_000  # the failover waits this long for the dead sessions to expire
STEP_TIMEOUT_S = 240.0 * max(PARTITIONS / 1000, 1)
LOOP_STALL_BOUND_S = 2.5  # no process's event loop woke later than this (a histogram bucket)


def _scale_bench():
    spec = importlib.util.spec_from_file_location(
        "scale_bench", REPO_ROOT / "bench" / "scale_bench.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("scale_bench", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(int(STEP_TIMEOUT_S * 6 + 120))
def test_thousands_of_partitions_survive_create_failover_shutdown_and_restart():
    bench = _scale_bench()
    args = argparse.Namespace(
        brokers=3,
        controllers=2,
        timeout_s=STEP_TIMEOUT_S,
        settle_s=1.0,
        broker_override=[],
        session_timeout_ms=SESSION_TIMEOUT_MS,
        profile=False,
        profile_dir="",
        keep=False,
    )
    row = bench.run_size(PARTITIONS, args)
    assert tuple(row.steps) == bench.STEPS
    assert row.records_lost == 0  # every acknowledged first record is there, on every leader
    # The controlled shutdown ended by itself, before local.cluster's SIGKILL grace.
    assert row.steps["controlled_shutdown"] < bench.cluster.STOP_GRACE_S
    for member, (_, worst) in row.stalls.items():
        assert worst != "> 10 s", f"{member}'s event loop stalled over 10 s"
        bound = float(worst.removeprefix("<= ").removesuffix(" s"))
        assert bound <= LOOP_STALL_BOUND_S, f"{member}'s event loop stalled up to {worst}"
