"""A container probe as the kubelet runs it (pkg/kubelet/prober/worker.go), kept free of I/O and of
the clock (the caller passes ``now``), so its rules are tested with a virtual clock.

The kubelet's rules, for one probe of one container instance:
  - No probe runs before ``initialDelaySeconds`` after the container started. Readiness and
    liveness also wait for the startup probe, if there is one, to succeed (their initial delay
    still counts from the container's start).
  - Probes run every ``periodSeconds``; one that takes longer than ``timeoutSeconds`` failed.
  - The verdict changes only after ``failureThreshold`` failures in a row, or
    ``successThreshold`` successes in a row (1 for liveness and startup, as the API requires).
  - Before its first verdict readiness is "not ready", liveness "alive", startup undecided.
  - A liveness or startup failure verdict restarts the container (a new instance, a new tracker).

The stand-in may sample a probe more often than ``periodSeconds`` (``sample_period_max_s``, so
tests see a pod turn Ready within a second rather than within the period), but it never decides
sooner than the kubelet could: a run of results changes the verdict only once it holds the
threshold's count of samples *and* has lasted (threshold - 1) x ``periodSeconds``, the least
time the kubelet's samples of that run can span. Every window (initial delay, failure and
success runs, timeout) stays in real seconds: nothing is scaled, because the processes probed
run in real time. Example: the chart's operator liveness probe (initial delay 15 s, period 20 s,
3 failures) restarts a container that has not answered at 55 s at the soonest, as a kubelet
(55-75 s, depending on the phase of its ticker), not at 18 s.

Not thread-safe: one tracker belongs to the stand-in's loop thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "ProbeRules", "ProbeTracker", "invalid_probe"]

KINDS = ("startup", "readiness", "liveness")


@dataclass(frozen=True)
class ProbeRules:
    """A probe's timing fields with the API's defaults."""

    initial_delay_s: float = 0.0
    period_s: float = 10.0
    timeout_s: float = 1.0
    failure_threshold: int = 3
    success_threshold: int = 1

    @classmethod
    def of(cls, probe: dict[str, Any]) -> ProbeRules:
        return cls(
            initial_delay_s=float(probe.get("initialDelaySeconds", 0)),
            period_s=float(probe.get("periodSeconds", 10)),
            timeout_s=float(probe.get("timeoutSeconds", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
            success_threshold=int(probe.get("successThreshold", 1)),
        )


def invalid_probe(kind: str, probe: dict[str, Any]) -> str | None:
    """The API server's validation of a probe's timing (a real one refuses the pod), or None."""
    for key, least in (
        ("initialDelaySeconds", 0),
        ("periodSeconds", 1),
        ("timeoutSeconds", 1),
        ("failureThreshold", 1),
        ("successThreshold", 1),
    ):
        value = probe.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            return f"{kind}Probe.{key}: Invalid value: {value!r}: must be an integer >= {least}"
    if kind in ("liveness", "startup") and probe.get("successThreshold", 1) != 1:
        value = probe["successThreshold"]
        return f"{kind}Probe.successThreshold: Invalid value: {value!r}: must be 1"
    return None


class ProbeTracker:
    """One probe of one container instance. ``verdict``: True (ready / alive / started), False
    (not ready / to restart / to restart), None (startup: not decided yet)."""

    def __init__(
        self,
        kind: str,
        rules: ProbeRules,
        container_started_at: float,
        sample_period_max_s: float | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"probe kind {kind!r} is not one of {KINDS}")
        self.kind = kind
        self.rules = rules
        self.verdict: bool | None = {"readiness": False, "liveness": True, "startup": None}[kind]
        self.samples = 0  # results recorded, for tests and the log
        self._sample_period_s = (
            min(rules.period_s, sample_period_max_s) if sample_period_max_s else rules.period_s
        )
        self._next_at = container_started_at + rules.initial_delay_s
        self._run_ok: bool | None = None
        self._run_count = 0
        self._run_first_at = 0.0

    def due(self, now: float) -> bool:
        """Whether a probe may start now (its initial delay and sampling period have passed)."""
        return now >= self._next_at

    def begin(self, now: float) -> None:
        """A probe starts at ``now``; the next may start one sampling period later."""
        self._next_at = now + self._sample_period_s

    def record(self, ok: bool, started_at: float, elapsed_s: float) -> bool | None:
        """The result of the probe begun at ``started_at`` that took ``elapsed_s``; the new
        verdict when this result changes it, else None."""
        self.samples += 1
        ok = ok and elapsed_s <= self.rules.timeout_s
        if ok != self._run_ok:
            self._run_ok, self._run_count, self._run_first_at = ok, 0, started_at
        self._run_count += 1
        threshold = self.rules.success_threshold if ok else self.rules.failure_threshold
        span_s = started_at - self._run_first_at
        if self._run_count < threshold or span_s < (threshold - 1) * self.rules.period_s:
            return None
        if ok == self.verdict:
            return None
        if not ok and self.kind in ("liveness", "startup"):
            # the container is restarted; a new instance starts a new run (kubelet: onHold)
            self._run_ok, self._run_count = None, 0
        self.verdict = ok
        return ok
