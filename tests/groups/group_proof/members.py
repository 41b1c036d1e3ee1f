"""Group members as processes (``member.py``) and what their journals say.

``Members`` starts members of one group, each its own Python process with one client library,
stops them by pid (SIGTERM: a clean leave; SIGKILL: a crash) and reads their journals. Every
process it started is killed at ``close`` if still alive; every wait is bounded.

The checks over journals:

- ``consumed(journals)``: every (partition, offset) -> how many times some member processed it;
- ``assignment_now(journal)``: the partitions a member holds after its last callbacks
  (eager protocols revoke everything then assign anew; cooperative ones revoke and assign only
  what moves, KIP-848 likewise);
- ``last_commits(journals)``: the highest acknowledged commit per partition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEMBER_SCRIPT = Path(__file__).with_name("member.py")
STOP_WAIT_S = 30.0
REPORT_EVENTS = 12
REPORT_LOG_LINES = 8
# librdkafka's debug tags (``debug=cgrp``) that say where its group state machine is.
GROUP_STATE_TAGS = frozenset(
    {"CGRPCOORD", "CGRPJOINSTATE", "JOINGROUP", "SYNCGROUP", "REJOIN", "MEMBERID"}
)


@dataclass
class Member:
    name: str
    process: subprocess.Popen[bytes]
    journal: Path
    library: str

    def events(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text().splitlines()
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # the last line of a killed member may be cut
        return events

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Members:
    bootstrap: str
    group: str
    topic: str
    directory: Path
    members: list[Member] = field(default_factory=list)

    def start(self, library: str, name: str | None = None, **options: Any) -> Member:
        name = name or f"m{len(self.members)}"
        journal = self.directory / f"{self.group}-{name}.jsonl"
        command = [
            sys.executable,
            str(MEMBER_SCRIPT),
            "--library",
            library,
            "--bootstrap",
            self.bootstrap,
            "--group",
            self.group,
            "--topic",
            self.topic,
            "--out",
            str(journal),
        ]
        for key, value in options.items():
            command += [f"--{key.replace('_', '-')}", str(value)]
        log = open(self.directory / f"{self.group}-{name}.log", "ab")  # noqa: SIM115
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        member = Member(name, process, journal, library)
        self.members.append(member)
        return member

    def kill(self, member: Member) -> None:
        """A crash: SIGKILL, no leave, no commit."""
        member.process.send_signal(signal.SIGKILL)
        member.process.wait(STOP_WAIT_S)

    def stop(self, member: Member) -> None:
        """A clean stop: SIGTERM, the member closes its consumer (and leaves, if dynamic)."""
        if member.alive:
            member.process.send_signal(signal.SIGTERM)
        try:
            member.process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            member.process.kill()
            member.process.wait(STOP_WAIT_S)
            raise AssertionError(f"{member.name} did not stop within {STOP_WAIT_S} s") from None

    def close(self) -> None:
        for member in self.members:
            if member.alive:
                os.kill(member.process.pid, signal.SIGKILL)
                member.process.wait(STOP_WAIT_S)

    def journals(self) -> list[list[dict[str, Any]]]:
        return [member.events() for member in self.members]

    def report(self) -> str:
        """For a failed wait: each member's group events (not its records, the last
        ``REPORT_EVENTS``, times in seconds since the group's first event), whether it still
        runs, and the last lines of its client's log."""
        journals = self.journals()
        start = min((e["t"] for events in journals for e in events[:1]), default=0.0)
        lines = []
        for member, events in zip(self.members, journals, strict=True):
            state = "running" if member.alive else f"exited {member.process.returncode}"
            records = sum(1 for e in events if e["e"] == "record")
            lines.append(f"{member.name} ({member.library}, {state}, {records} records):")
            for event in [e for e in events if e["e"] != "record"][-REPORT_EVENTS:]:
                fields = {k: v for k, v in event.items() if k not in ("e", "t")}
                lines.append(f"  +{event['t'] - start:7.2f}s {event['e']} {fields or ''}")
            log = self.directory / f"{self.group}-{member.name}.log"
            if log.exists():
                said = filter(_telling, log.read_text(errors="replace").splitlines())
                tail = list(said)[-REPORT_LOG_LINES:]
                lines += [f"  | {line.replace(self.group, '<group>')[:240]}" for line in tail]
        return "\n".join(lines)


def _telling(line: str) -> bool:
    """A client log line worth reporting: librdkafka's errors and warnings (levels 0-4), and with
    ``--client-debug cgrp`` its group state changes; not its routine debug lines."""
    fields = line.split("|", 3)
    if len(fields) < 3:
        return True  # not librdkafka's format (kafka-python, aiokafka): keep it
    level, tag = fields[0].lstrip("%"), fields[2]
    return level in ("0", "1", "2", "3", "4") or tag in GROUP_STATE_TAGS


def consumed(journals: Iterable[list[dict[str, Any]]]) -> Counter[tuple[int, int]]:
    counts: Counter[tuple[int, int]] = Counter()
    for events in journals:
        for event in events:
            if event["e"] == "record":
                counts[(event["p"], event["o"])] += 1
    return counts


def assignment_now(events: list[dict[str, Any]]) -> set[int]:
    held: set[int] = set()
    for event in events:
        if event["e"] == "assigned":
            held |= set(event["partitions"])
        elif event["e"] == "revoked":
            held -= set(event["partitions"])
    return held


def rebalances(events: list[dict[str, Any]]) -> int:
    return sum(1 for event in events if event["e"] in ("assigned", "revoked"))


def last_commits(journals: Iterable[list[dict[str, Any]]]) -> dict[int, int]:
    commits: dict[int, int] = {}
    for events in journals:
        for event in events:
            if event["e"] == "committed":
                for partition, offset in event["offsets"].items():
                    p = int(partition)
                    commits[p] = max(commits.get(p, 0), offset)
    return commits
