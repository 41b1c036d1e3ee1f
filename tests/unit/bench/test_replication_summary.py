"""The cluster benchmark's replication report computes issue 7's ratios from the right phases."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "cluster_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("cluster_bench_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def produce(bench, broker: str, acks: str, seconds: float, cpu_by_id: dict[int, float], **kw):
    return bench.Phase(
        broker,
        f"produce 1 KiB acks={acks}",
        "produce",
        1024,
        "none",
        100_000,
        seconds,
        sum(cpu_by_id.values()),
        0.5,
        broker_cpu_by_id_s=cpu_by_id,
        acks=acks,
        **kw,
    )


def e2e(bench, broker: str, p99_ms: float, **kw):
    return bench.Phase(
        broker,
        "e2e 1 KiB 5,000/s fetch.wait 500 acks=all",
        "e2e",
        1024,
        "none",
        50_000,
        10.0,
        1.0,
        0.5,
        latency_ms={"p50": p99_ms / 2, "p99": p99_ms, "p999": p99_ms, "max": p99_ms},
        acks="all",
        **kw,
    )


def test_leader_cpu_is_the_leaders_share_of_the_cluster(bench):
    phase = produce(bench, "odradek-rf3", "all", 1.0, {1: 0.2, 2: 0.5, 3: 0.3}, leader=2)
    assert phase.broker_cpu_s == pytest.approx(1.0)
    assert phase.cpu_s_per_m == pytest.approx(10.0)  # all three brokers, per million records
    assert phase.leader_cpu_s == pytest.approx(0.5)
    assert phase.leader_cpu_s_per_m == pytest.approx(5.0)
    assert phase.as_dict()["leader_cpu_s_per_million_records"] == pytest.approx(5.0)


def test_throughput_target_compares_acks_all_rf3_with_unreplicated_acks_1(bench):
    phases = [
        produce(bench, "odradek", "1", 1.0, {1: 0.1}),  # 100,000 rec/s
        produce(bench, "odradek", "1", 2.0, {1: 0.1}),  # a slower round: not the best
        produce(bench, "odradek", "all", 1.25, {1: 0.1}),  # 80,000 rec/s
        produce(bench, "odradek-rf3", "1", 1.0, {1: 0.1, 2: 0.1, 3: 0.1}, leader=1),
        produce(bench, "odradek-rf3", "all", 2.5, {1: 0.1, 2: 0.1, 3: 0.1}, leader=1),  # 40,000
    ]
    rows, targets = bench.summarise_replicated(phases)
    by_scenario = {row["scenario"]: row for row in rows}
    assert by_scenario["produce 1 KiB acks=all"]["ratio"] == pytest.approx(0.5)  # vs RF=1 acks=all
    throughput = targets[0]
    assert "acks=all RF=3 / unreplicated (RF=1, acks=1)" in throughput["target"]
    assert throughput["value"] == pytest.approx(0.4)  # 40,000 / 100,000: the best RF=1 round
    assert throughput["met"] is False


def test_throughput_target_is_not_met_when_deliveries_failed(bench):
    phases = [
        produce(bench, "odradek", "1", 1.0, {1: 0.1}),
        produce(bench, "odradek-rf3", "all", 1.0, {1: 0.1}, leader=1, errors=3),
    ]
    _, targets = bench.summarise_replicated(phases)
    assert targets[0]["value"] == pytest.approx(1.0)
    assert targets[0]["met"] is False


def test_latency_target_is_the_p99_ratio_below_two(bench):
    for p99_rf3, met in ((15.0, True), (20.0, False)):
        phases = [e2e(bench, "odradek", 10.0), e2e(bench, "odradek-rf3", p99_rf3, leader=3)]
        rows, targets = bench.summarise_replicated(phases)
        assert rows[0]["ratio_p99"] == pytest.approx(p99_rf3 / 10.0)
        assert [t["met"] for t in targets] == [met]


def test_replicated_refuses_options_that_name_other_brokers(bench):
    assert bench.parse_args(["--replicated"]).replicated
    assert not bench.parse_args([]).replicated  # the default run stays the Tansu comparison
    for other in (["--only", "odradek"], ["--baseline", "HEAD"], ["--tansu", "/bin/true"]):
        with pytest.raises(SystemExit):
            bench.parse_args(["--replicated", *other])
