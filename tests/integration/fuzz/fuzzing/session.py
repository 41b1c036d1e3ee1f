"""One fuzz run: plays rounds, checks the invariants after every batch, and keeps the evidence.

``FuzzSession.play`` sends a round (``traffic.play``), judges its answers (``traffic.judge``)
and books what was sent and acknowledged (``invariants.Ledger``); around a round of one of
``shapes``' kinds it also reads the target broker's loop-lag histogram (``invariants.loop_lag``)
and keeps what the round cost (``ShapeFigure``, printed with the peaks of memory and open files
of each kind of round at the end). Once ``check_every`` cases (a pipeline counts as one) have
gone out since the last check, ``check`` runs every invariant. The first failure is kept
(``failure``) and nothing more is sent: the test raises it after the Hypothesis loop, so
Hypothesis never replays a round against a cluster that has already changed.

A failure names the problems, the seed and clock to replay the run, and the cases of the batch
that led to it (description, and bytes as hex, in full in a file beside the cluster's data). A
handler or encoder failure counted by the broker is pinned to its case by sending the batch's
cases that lost their connection again, one at a time, watching the count (at most
``PINPOINT_CASES_MAX`` of them).

Used from the test's thread only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import traceback
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from fuzzing import invariants
from fuzzing.shapes import HUGE_ARRAY_BOUNDED_APIS, PIPELINED
from fuzzing.strategies import MIXED, Case, Round
from fuzzing.traffic import Outcome, Target, judge, play
from odradek.local.cluster import Member
from odradek.protocol.apis import ApiKey

__all__ = ["Limits", "FuzzSession", "drive"]

BUG_REASONS = ("handler_error", "encode_error", "write_error")  # CloseReason values that are bugs
PINPOINT_CASES_MAX = 30
HEX_SHOWN_BYTES = 2048


@dataclass(frozen=True)
class Limits:
    cases_max: int
    time_budget_s: float
    check_every: int
    rss_growth_max: int  # bytes above the largest broker's resident memory at the start
    fds_growth_max: int  # open file descriptors above each broker's own at the start


class FuzzSession:
    """One run against ``targets``; see the module docstring."""

    def __init__(
        self,
        *,
        members: Sequence[Member],
        targets: Sequence[Target],
        bootstrap: str,
        watched_topics: Sequence[str],
        compacted: Sequence[str],
        control_topic: str,
        limits: Limits,
        replay: str,
        evidence_dir: Path,
        client_security: Mapping[str, str] | None = None,
    ):
        self.members = list(members)
        self.brokers = [m for m in members if m.role == "broker"]
        self.targets = list(targets)
        self.bootstrap = bootstrap
        self.watched = list(watched_topics)
        self.control_topic = control_topic
        self.limits = limits
        self.replay = replay
        self.evidence_dir = evidence_dir
        self.ledger = invariants.Ledger(watched_topics, compacted)
        self.client_security = dict(client_security or {})  # librdkafka's SASL and TLS keys
        self.consumer = Consumer(
            {**self.client_security, "bootstrap.servers": bootstrap, "group.id": "fuzz-watermarks"}
        )
        self.rss_max = self.limits.rss_growth_max + max(
            invariants.rss_bytes(m.pid) for m in self.brokers
        )
        self.closed = {m.id: invariants.closed_reasons(m) for m in self.brokers}
        self.logged = [m for m in members if m.role in ("broker", "controller")]
        self.log_positions = {m.log: Path(m.log).stat().st_size for m in self.logged}
        self.fds_at_start = {m.pid: invariants.open_fds(m.pid) for m in self.brokers}
        self.segments_at_start = {m.pid: invariants.segment_count(m) for m in self.brokers}
        self.segments_max = dict(self.segments_at_start)
        self.sampler = invariants.ResourceSampler(m.pid for m in self.brokers)
        self.shapes: list[ShapeFigure] = []  # one per round of ``shapes``' kinds
        self.started = time.monotonic()
        self.window: list[Outcome] = []
        self.sent: set[bytes] = set()  # digests of the frames sent
        self.cases = 0
        self.rounds = 0
        self.checks = 0
        self.checked_at = 0
        self.failure: str | None = None
        self.stats: Counter[str] = Counter()
        self.peak_rss = 0

    def __enter__(self) -> FuzzSession:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.__exit__(*exc)
        self.consumer.close()

    def wants_more(self) -> bool:
        return (
            self.failure is None
            and self.cases < self.limits.cases_max
            and time.monotonic() - self.started < self.limits.time_budget_s
        )

    # -- playing ---------------------------------------------------------------------------

    def play(self, round_: Round) -> None:
        """Send ``round_`` and judge it; any exception is kept as the failure (see above)."""
        try:
            self._play(round_)
        except Exception:
            self._fail([f"the fuzz itself failed:\n{traceback.format_exc()}"])

    def _play(self, round_: Round) -> None:
        round_ = self._unseen(round_)
        if not round_.cases:
            return
        shaped = round_.kind != MIXED
        if shaped:
            member = self._member_of(self.targets[round_.cases[0].target])
            lag_before = invariants.loop_lag_reading(member)
        self.sampler.kind = round_.kind
        try:
            outcomes, took_s = play(round_, self.targets)
        finally:
            self.sampler.kind = "between rounds"
        for outcome in outcomes:
            outcome.round = self.rounds
        findings, acks = judge(outcomes, self.targets)
        if shaped:
            findings += self._judge_lag(round_, outcomes, member, lag_before, took_s)
        self.ledger.record(outcomes, acks)
        self.stats["acknowledged appends"] += len(acks)
        self.stats["acknowledged records"] += sum(ack.count for ack in acks)
        self.window += outcomes
        # A pipeline is its few templates repeated: it counts as one case of the budget.
        self.cases += 1 if round_.kind == PIPELINED else len(outcomes)
        self.rounds += 1
        for outcome in outcomes:
            self._count(outcome)
        if findings:
            self._fail(findings)
        elif self.cases - self.checked_at >= self.limits.check_every:
            self._check()

    def _unseen(self, round_: Round) -> Round:
        """``round_`` without the cases already sent: Hypothesis draws many cases again (it
        reuses and splices earlier draws), and the same bytes twice find nothing new."""
        kept = []
        for case, connection in zip(round_.cases, round_.connection_of, strict=True):
            digest = hashlib.blake2b(case.frame, digest_size=16).digest()
            if digest not in self.sent:
                self.sent.add(digest)
                kept.append((case, connection))
        self.stats["repeats not sent"] += len(round_.cases) - len(kept)
        return dataclasses.replace(
            round_,
            cases=tuple(case for case, _ in kept),
            connection_of=tuple(connection for _, connection in kept),
        )

    def _member_of(self, target: Target) -> Member:
        address = f"{target.host}:{target.port}"
        return next(m for m in self.brokers if address in (m.address, m.control_plane))

    def _judge_lag(
        self,
        round_: Round,
        outcomes: Sequence[Outcome],
        member: Member,
        before: dict[float, float],
        took_s: float,
    ) -> list[str]:
        """The broker's own loop lag over a round of ``shapes``' kinds: judged for pipelines and
        for huge arrays of the APIs proven bounded, recorded for the rest."""
        lag = invariants.loop_lag(member, before)
        first = round_.cases[0]
        answered = [o.answered_after_s for o in outcomes if o.answered_after_s is not None]
        judged = round_.kind == PIPELINED or first.api_key in HUGE_ARRAY_BOUNDED_APIS
        self.shapes.append(
            ShapeFigure(
                round_.kind,
                first.api_key,
                first.api_version,
                sum(len(c.frame) for c in round_.cases),
                len(round_.cases),
                len(answered),
                max(answered, default=None),
                took_s,
                lag,
                judged,
            )
        )
        if not judged or not lag.late:
            return []
        return [
            f"broker {member.id}: its event loop ran more than {invariants.LAG_MAX_S:.2f} s late "
            f"in {lag.late} of {lag.samples} samples (worst up to {lag.worst_s} s) while it "
            f"served {round_.kind}: {first.description}"
        ]

    def _count(self, outcome: Outcome) -> None:
        case = outcome.case
        kind = "mutated" if case.mutated else "well-formed"
        self.stats[f"{ApiKey(case.api_key).name} {kind}"] += 1
        if outcome.response is not None:
            self.stats["answered"] += 1
        elif outcome.closed_before_answer:
            self.stats["connection closed"] += 1
        else:
            self.stats["no answer"] += 1

    # -- checking --------------------------------------------------------------------------

    def check(self) -> None:
        """Every invariant (see ``invariants``); fails the session on the first problems."""
        try:
            self._check()
        except Exception:
            self._fail([f"checking failed:\n{traceback.format_exc()}"])

    def _check(self) -> None:
        self.checks += 1
        self.checked_at = self.cases
        problems = invariants.processes(self.members)
        if problems:
            self._fail(problems)
            return
        peaks = self.sampler.take_peaks()
        self.peak_rss = max([self.peak_rss, *(p.rss_bytes for p in peaks.values())])
        for member in self.brokers:
            segments = invariants.segment_count(member)
            self.segments_max[member.pid] = max(self.segments_max[member.pid], segments)
        problems += invariants.resources(self.brokers, peaks, self.rss_max, self.fds_max())
        problems += self._broker_evidence()
        disk, trouble = invariants.scan_logs(self.brokers, self.ledger.compacted)
        problems += trouble
        marks, trouble = invariants.watermarks(self.consumer, self.watched)
        problems += trouble + self.ledger.check(marks, disk)
        problems += invariants.client_round_trip(
            self.bootstrap, self.control_topic, security=self.client_security
        )
        self.stats["segments on disk"] = sum(p.segments for p in disk.values())
        if problems:
            self._fail(problems)
        else:
            self.window = []
        elapsed = time.monotonic() - self.started
        print(
            f"fuzz: check {self.checks} after {self.cases} cases, {elapsed:.0f} s: "
            f"{len(problems)} problem(s)",
            flush=True,
        )

    def _broker_evidence(self) -> list[str]:
        problems = []
        closes: Counter[str] = Counter()
        for member in self.brokers:
            closed = invariants.closed_reasons(member)
            before = self.closed[member.id]
            bugs = {r: closed.get(r, 0) - before.get(r, 0) for r in BUG_REASONS}
            closes.update({f"closed by the brokers: {r}": int(n) for r, n in closed.items()})
            errors = self._new_errors(member)
            if any(bugs.values()):
                culprit = self._pinpoint(member)
                problems.append(
                    f"broker {member.id} closed connections for bugs {bugs}; "
                    f"{culprit}; its log says:\n" + "\n".join(errors[:60])
                )
            elif errors:
                problems.append(f"broker {member.id} logged errors:\n" + "\n".join(errors[:60]))
            self.closed[member.id] = closed
        for key, total in closes.items():  # totals so far, not increments
            self.stats[key] = total
        for member in self.logged:
            if member.role != "broker" and (errors := self._new_errors(member)):
                problems.append(
                    f"{member.role} {member.id} logged errors:\n" + "\n".join(errors[:60])
                )
        return problems

    def _new_errors(self, member: Member) -> list[str]:
        errors, self.log_positions[member.log] = invariants.new_errors(
            member, self.log_positions[member.log]
        )
        return errors

    def _pinpoint(self, member: Member) -> str:
        """Send the window's cases that lost their connection again, one by one."""
        suspects = [o.case for o in self.window if o.response is None][:PINPOINT_CASES_MAX]
        for case in suspects:
            before = invariants.closed_reasons(member)
            play(Round((case,), (0,), (False,)), self.targets)
            after = invariants.closed_reasons(member)
            if any(after.get(r, 0) > before.get(r, 0) for r in BUG_REASONS):
                return f"replayed alone, this case reproduces it: {_show(case)}"
        return f"no single case of {len(suspects)} reproduced it alone"

    # -- failing ---------------------------------------------------------------------------

    def _fail(self, problems: list[str]) -> None:
        path = self.evidence_dir / f"fuzz-failure-{int(time.time())}.txt"
        with path.open("w") as out:
            for outcome in self.window:
                out.write(f"{_where(outcome)} {outcome.case.description}\n{outcome.case.hex()}\n\n")
        shown = "\n".join(f"  {_where(o)}\n{_show(o.case)}" for o in self.window[-20:])
        self.failure = (
            f"fuzz found {len(problems)} problem(s) after {self.cases} cases "
            f"({self.rounds} rounds, check {self.checks}):\n- "
            + "\n- ".join(problems)
            + "\n\nso far (which kind of round each peak came in):\n"
            + self.summary()
            + f"\n\nreplay: {self.replay}\nthe batch's {len(self.window)} cases, in full: {path}"
            + f"\nits last {min(20, len(self.window))} cases:\n{shown}"
        )

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        lines = [
            f"{self.cases} cases in {self.rounds} rounds, {self.checks} checks, {elapsed:.1f} s; "
            f"peak broker RSS {self.peak_rss >> 20} MiB (bound {self.rss_max >> 20} MiB)"
        ]
        lines += [f"  {key}: {value}" for key, value in sorted(self.stats.items())]
        lines += self._resource_figures() + [figure.line() for figure in self.shapes]
        return "\n".join(lines)

    def fds_max(self) -> dict[int, int]:
        """Each broker's bound on open files: its own at the start, ``fds_growth_max`` more,
        and the files of the segments its disks gained (at most, so far)."""
        return {
            m.pid: self.fds_at_start[m.pid]
            + self.limits.fds_growth_max
            + invariants.FDS_PER_SEGMENT
            * max(0, self.segments_max[m.pid] - self.segments_at_start[m.pid])
            for m in self.brokers
        }

    def _resource_figures(self) -> list[str]:
        bounds = self.fds_max()
        lines = [
            f"  broker {m.id}: {self.fds_at_start[m.pid]} open files and "
            f"{self.segments_at_start[m.pid]} segments at the start, "
            f"{self.segments_max[m.pid]} segments at most since"
            for m in self.brokers
        ]
        for kind, by_pid in sorted(self.sampler.kind_peaks.items()):
            for member in self.brokers:
                peak = by_pid.get(member.pid)
                if peak is not None:
                    lines.append(
                        f"  peak while {kind}: broker {member.id} RSS {peak.rss_bytes >> 20} MiB, "
                        f"{peak.fds} open files (bound {bounds[member.pid]})"
                    )
        return lines


@dataclass(frozen=True)
class ShapeFigure:
    """What one round of ``shapes``' kinds cost the broker, for the run's figures."""

    kind: str
    api_key: int
    api_version: int
    request_bytes: int
    requests: int
    answered: int
    last_answer_s: float | None
    took_s: float
    lag: invariants.LoopLag
    judged: bool  # its lag is asserted (a pipeline, or an API proven bounded)

    def line(self) -> str:
        answer = "no answer" if self.last_answer_s is None else f"{self.last_answer_s:.2f} s"
        api = f"{ApiKey(self.api_key).name} v{self.api_version}"
        what = f"{self.requests} requests from {api}" if self.kind == PIPELINED else api
        judged = "" if self.judged else " (not judged: not proven bounded yet)"
        return (
            f"  {self.kind}: {what}, {self.request_bytes:,} bytes; {self.answered} answered, "
            f"the last after {answer} (round {self.took_s:.2f} s); loop lag worst up to "
            f"{self.lag.worst_s} s, {self.lag.late} of {self.lag.samples} samples over "
            f"{invariants.LAG_MAX_S} s{judged}"
        )


def _where(outcome: Outcome) -> str:
    """Which round and connection a case went on, and what came back."""
    answer = (
        "answered"
        if outcome.response is not None
        else "closed"
        if outcome.closed_before_answer
        else "no answer"
    )
    return f"round {outcome.round} connection {outcome.connection} ({answer}):"


def _show(case: Case) -> str:
    data = case.frame[:HEX_SHOWN_BYTES].hex()
    more = f"... ({len(case.frame)} bytes)" if len(case.frame) > HEX_SHOWN_BYTES else ""
    return f"  [{case.description}]\n    {data}{more}"


def drive(session: FuzzSession, strategy: st.SearchStrategy[Round], run_seed: int) -> None:
    """Play rounds drawn from ``strategy`` (seeded with ``run_seed``) until the session wants no
    more, then check once more.

    Hypothesis is the seeded generator here: nothing fails inside it (the session keeps the
    first failure), so it never replays a round against a cluster that has changed since.
    """

    @seed(run_seed)
    @settings(
        max_examples=session.limits.cases_max,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def fuzz(data: st.DataObject) -> None:
        round_ = data.draw(strategy, label="round")  # always: Hypothesis checks it draws alike
        if session.wants_more():
            session.play(round_)

    with session:
        fuzz()
        if session.failure is None:
            session.check()
