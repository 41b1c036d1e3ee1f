"""Consume-transform-produce workers as processes (``worker.py``), supervised.

``Workers`` starts workers of one group, each with a transactional id of its own that outlives
the process: ``kill`` is a crash (SIGKILL) and ``restart`` starts the same worker again with the
same transactional id (its ``InitProducerId`` fences the dead one and aborts its open
transaction). ``supervise`` restarts a worker that exited by itself, as a process supervisor
would, except after a fatal error (exit 3), which it reports; and one that has made no progress
for ``STUCK_S`` (stuck in a client call, or retrying one that times out every time), reported as
STUCK. ``close``
SIGKILLs whatever is still running; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
STOP_WAIT_S = 45.0
# A worker journals progress at least every 5 s (a transaction, or ``idle``); without progress this
# long it is stuck, inside a client call past the call's own timeout or retrying a call that times
# out every time (librdkafka can leave a request in its out-queue for good), and is restarted like
# a process a liveness probe failed (its Python stacks first go to its log).
STUCK_S = 45.0
# Journal events that show a worker alive but not advancing.
NOT_PROGRESS = frozenset({"retry"})
STACK_WAIT_S = 1.0
EXIT_FATAL = 3


def fence(bootstrap: str, transactional_id: str) -> None:
    """InitProducerId for ``transactional_id``: its open transaction is aborted, its producer
    fenced (what a restarted worker's ``init_transactions`` does)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(STOP_WAIT_S)
    producer.flush(STOP_WAIT_S)


@dataclass
class Worker:
    name: str
    transactional_id: str
    journal: Path
    log: Path
    options: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    killed: bool = False  # by the test, which restarts it: not the supervisor's to restart
    started_at: float = 0.0
    stuck: int = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def events(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        events = []
        for line in self.journal.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # the last line of a killed worker may be cut
        return events

    def silent_s(self) -> float:
        """Seconds since the worker last made progress (or since it started): retries do not
        count, since a call that times out on every attempt keeps the journal fresh."""
        progress = next(
            (float(e["t"]) for e in reversed(self.events()) if e.get("e") not in NOT_PROGRESS),
            0.0,
        )
        return time.time() - max(progress, self.started_at)

    def tail(self, lines: int = 40) -> str:
        journal = [json.dumps(e) for e in self.events()[-lines:]]
        log = (
            self.log.read_text(errors="replace").splitlines()[-lines:] if self.log.exists() else []
        )
        return "\n".join([f"--- {self.name} journal", *journal, f"--- {self.name} log", *log])


@dataclass
class Workers:
    bootstrap: str
    group: str
    input: str
    output: str
    directory: Path
    library: str = "confluent"
    workers: list[Worker] = field(default_factory=list)

    def start(self, **options: Any) -> Worker:
        name = f"w{len(self.workers)}"
        worker = Worker(
            name,
            f"{self.group}-{name}",
            self.directory / f"{self.group}-{name}.jsonl",
            self.directory / f"{self.group}-{name}.log",
            options,
        )
        self.workers.append(worker)
        self._spawn(worker)
        return worker

    def _spawn(self, worker: Worker) -> None:
        command = [
            sys.executable,
            str(WORKER_SCRIPT),
            f"--library={self.library}",
            f"--bootstrap={self.bootstrap}",
            f"--group={self.group}",
            f"--input={self.input}",
            f"--output={self.output}",
            f"--transactional-id={worker.transactional_id}",
            f"--out={worker.journal}",
        ]
        command += [f"--{k.replace('_', '-')}={v}" for k, v in worker.options.items()]
        with worker.log.open("ab") as log:
            worker.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        worker.starts += 1
        worker.started_at = time.time()

    def kill(self, worker: Worker) -> None:
        """A crash: SIGKILL, nothing committed or aborted on the way out."""
        assert worker.process is not None
        worker.killed = True
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(STOP_WAIT_S)

    def restart(self, worker: Worker) -> None:
        assert not worker.alive, f"{worker.name} is still running"
        worker.killed = False
        self._spawn(worker)

    def supervise(self) -> list[str]:
        """Restart workers that exited by themselves; what happened, one line each. A fatal
        exit is an AssertionError with the worker's journal and log."""
        happened = []
        for worker in self.workers:
            if worker.alive and not worker.killed and worker.silent_s() > STUCK_S:
                assert worker.process is not None
                worker.process.send_signal(signal.SIGUSR1)
                time.sleep(STACK_WAIT_S)
                worker.process.send_signal(signal.SIGKILL)
                worker.process.wait(STOP_WAIT_S)
                worker.stuck += 1
                self._spawn(worker)
                happened.append(
                    f"{worker.name} STUCK (no progress for {STUCK_S:.0f} s, stacks in "
                    f"{worker.log.name}): kill -9, restarted"
                )
                continue
            if worker.process is None or worker.alive or worker.killed:
                continue
            code = worker.process.returncode
            worker.exits.append(code)
            if code == EXIT_FATAL:
                raise AssertionError(f"{worker.name} hit a fatal error:\n{worker.tail()}")
            self._spawn(worker)
            happened.append(f"{worker.name} exited with {code}: restarted")
        return happened

    def dump_stacks(self) -> None:
        """SIGUSR1: each live worker writes its threads' Python stacks to its log."""
        for worker in self.workers:
            if worker.alive:
                assert worker.process is not None
                worker.process.send_signal(signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)

    def stop_all(self) -> list[str]:
        """SIGTERM: each worker ends its current transaction and closes. One stuck in a client
        call is killed instead (stacks to its log first) and its transactional id fenced, which
        aborts the transaction it left open, as its restart would; what happened, one line each."""
        happened = []
        for worker in self.workers:
            if worker.alive:
                assert worker.process is not None
                worker.process.send_signal(signal.SIGTERM)
        for worker in self.workers:
            if worker.process is None:
                continue
            try:
                worker.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                worker.process.send_signal(signal.SIGUSR1)
                time.sleep(STACK_WAIT_S)
                worker.process.kill()
                worker.process.wait(STOP_WAIT_S)
                worker.stuck += 1
                fence(self.bootstrap, worker.transactional_id)
                happened.append(
                    f"{worker.name} STUCK at stop (stacks in {worker.log.name}): kill -9, "
                    f"{worker.transactional_id} fenced"
                )
        return happened

    def close(self) -> None:
        for worker in self.workers:
            if worker.alive:
                assert worker.process is not None
                os.kill(worker.process.pid, signal.SIGKILL)
                worker.process.wait(STOP_WAIT_S)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for w in self.workers for e in w.events() if e["e"] == kind]

    def tails(self) -> str:
        return "\n".join(w.tail() for w in self.workers)
