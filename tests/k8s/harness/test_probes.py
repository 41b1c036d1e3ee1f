"""The kubelet stand-in's probes follow the kubelet's rules in real seconds, on a virtual clock."""

from __future__ import annotations

import pytest

from support.k8s.probes import ProbeRules, ProbeTracker, invalid_probe

# charts/odradek/templates/deployment.yaml: the operator's liveness probe
OPERATOR_LIVENESS = {
    "httpGet": {"path": "/healthz", "port": "healthz"},
    "initialDelaySeconds": 15,
    "periodSeconds": 20,
    "timeoutSeconds": 5,
    "failureThreshold": 3,
}
SAMPLE_S = 1.0  # the stand-in's default sampling period
STEPS_MAX = 10_000


def run(tracker: ProbeTracker, answers, until_s: float, step_s: float = 0.125, elapsed_s=0.01):
    """Drive ``tracker`` on a virtual clock from 0 to ``until_s``: a probe begun at t gets
    ``answers(t)``; the verdicts that changed, as (t, verdict)."""
    changes = []
    for step in range(STEPS_MAX):
        now = step * step_s  # step_s a binary fraction: exact sums
        if now > until_s:
            break
        if tracker.due(now):
            tracker.begin(now)
            verdict = tracker.record(answers(now), now, elapsed_s)
            if verdict is not None:
                changes.append((now, verdict))
    else:
        raise AssertionError("virtual clock did not reach the end")
    return changes


def test_operator_that_starts_in_18_s_is_not_restarted():
    """The walkthrough's failure: an operator answering /healthz only from 18 s was restarted
    by the stand-in at 18 s (15 s delay + 3 failures 1 s apart); a kubelet waits >= 55 s."""
    tracker = ProbeTracker("liveness", ProbeRules.of(OPERATOR_LIVENESS), 0.0, SAMPLE_S)
    assert run(tracker, lambda t: t >= 18.0, until_s=120.0) == []
    assert tracker.verdict is True


def test_liveness_restarts_no_sooner_than_initial_delay_plus_threshold_runs():
    tracker = ProbeTracker("liveness", ProbeRules.of(OPERATOR_LIVENESS), 0.0, SAMPLE_S)
    changes = run(tracker, lambda t: False, until_s=120.0)
    # first sample at 15 s; 3 failures of the kubelet span 2 periods: 15 + 2 x 20
    assert changes[0] == (55.0, False)
    # and never later than the kubelet's latest (its ticker's phase): 15 + 3 x 20
    assert changes[0][0] <= 75.0


def test_unsampled_probe_decides_at_the_threshold_th_probe_as_the_kubelet():
    rules = ProbeRules(initial_delay_s=2, period_s=3, failure_threshold=4)
    tracker = ProbeTracker("liveness", rules, 0.0, sample_period_max_s=None)
    assert run(tracker, lambda t: False, until_s=30.0, step_s=0.5)[0] == (2 + 3 * 3, False)
    assert tracker.samples >= 4


def test_initial_delay_counts_from_the_container_start():
    tracker = ProbeTracker("readiness", ProbeRules(initial_delay_s=7, period_s=10), 100.0, 1.0)
    assert not tracker.due(106.9)
    assert tracker.due(107.0)


def test_initial_verdicts():
    rules = ProbeRules()
    assert ProbeTracker("readiness", rules, 0.0).verdict is False
    assert ProbeTracker("liveness", rules, 0.0).verdict is True
    assert ProbeTracker("startup", rules, 0.0).verdict is None
    with pytest.raises(ValueError):
        ProbeTracker("wellness", rules, 0.0)


def test_readiness_success_threshold_spans_its_periods():
    rules = ProbeRules(period_s=5, success_threshold=2, failure_threshold=3)
    tracker = ProbeTracker("readiness", rules, 0.0, SAMPLE_S)
    # answers from 4 s: two kubelet probes 5 s apart, so Ready at 9 s, not at 5 s
    assert run(tracker, lambda t: t >= 4.0, until_s=20.0) == [(9.0, True)]


def test_readiness_goes_after_failures_spanning_threshold_minus_one_periods_and_comes_back():
    rules = ProbeRules(period_s=5, failure_threshold=3)
    tracker = ProbeTracker("readiness", rules, 0.0, SAMPLE_S)
    changes = run(tracker, lambda t: not 20.0 <= t < 40.0, until_s=50.0)
    assert changes == [(0.0, True), (30.0, False), (40.0, True)]


def test_a_success_breaks_a_run_of_failures():
    rules = ProbeRules(period_s=5, failure_threshold=3)
    tracker = ProbeTracker("liveness", rules, 0.0, SAMPLE_S)
    # fails except once at 8 s: each run of failures is shorter than 10 s
    assert run(tracker, lambda t: 8.0 <= t < 9.0 or 17.0 <= t < 18.0, until_s=26.0) == []
    always = ProbeTracker("liveness", rules, 0.0, SAMPLE_S)
    assert run(always, lambda t: False, until_s=26.0)[0] == (10.0, False)


def test_a_probe_slower_than_its_timeout_failed():
    rules = ProbeRules(period_s=1, timeout_s=2, failure_threshold=1)
    tracker = ProbeTracker("liveness", rules, 0.0)
    assert tracker.record(True, 0.0, elapsed_s=1.9) is None
    assert tracker.record(True, 1.0, elapsed_s=2.1) is False


def test_startup_holds_until_it_succeeds_then_fails_only_after_its_window():
    rules = ProbeRules(period_s=5, failure_threshold=12)  # a minute to start
    tracker = ProbeTracker("startup", rules, 0.0, SAMPLE_S)
    assert run(tracker, lambda t: t >= 50.0, until_s=60.0) == [(50.0, True)]
    failing = ProbeTracker("startup", rules, 0.0, SAMPLE_S)
    assert run(failing, lambda t: False, until_s=80.0)[0] == (55.0, False)


def test_fields_the_api_server_refuses():
    assert invalid_probe("liveness", OPERATOR_LIVENESS) is None
    assert "must be 1" in invalid_probe("liveness", {"successThreshold": 2})
    assert "must be 1" in invalid_probe("startup", {"successThreshold": 3})
    assert invalid_probe("readiness", {"successThreshold": 3}) is None
    assert ">= 1" in invalid_probe("readiness", {"periodSeconds": 0})
    assert ">= 0" in invalid_probe("readiness", {"initialDelaySeconds": -1})
    assert "integer" in invalid_probe("readiness", {"timeoutSeconds": "5"})
