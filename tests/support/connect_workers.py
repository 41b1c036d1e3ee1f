"""``odradek connect distributed`` worker processes for the Connect tier's tests: started in
process groups of their own on 127.0.0.1, driven over REST, stopped by PID (SIGTERM, or SIGKILL
for the fault tests)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from support.waiting import wait_until

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(
    method: str,
    url: str,
    body: object | None = None,
    *,
    raw: bytes | None = None,
    timeout_s: float = HTTP_TIMEOUT_S,
) -> tuple[int, object]:
    """(status, decoded JSON body or None) of a request with ``body`` as JSON, or ``raw`` bytes
    as they are (malformed bodies); an HTTP error status is an answer, not an exception."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


class WorkerProcess:
    """One worker; ``plugin_dir`` (if given) goes first on its PYTHONPATH, for test plugins."""

    def __init__(self, properties: Path, port: int, log: Path, plugin_dir: Path | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.worker_id = f"127.0.0.1:{port}"
        env = dict(os.environ)
        if plugin_dir is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), env.get("PYTHONPATH", "")])
        self.log = log
        self.killed = False
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "odradek.cli", "connect", "distributed", str(properties),
                 "--override", f"listeners=http://127.0.0.1:{port}"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip

    def ready(self) -> bool:
        try:
            return http("GET", f"{self.url}/connectors")[0] == 200
        except OSError:
            return False

    def kill(self) -> None:
        self.killed = True
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        self.killed = True
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"worker {self.port} did not stop on SIGTERM") from None


def wait_for(check, what: str, timeout_s: float, workers=()):
    """``support.waiting.wait_until`` with the workers' logs on failure: an ``OSError`` from
    ``check`` counts as not yet (a REST port not open), and a worker of ``workers`` that exited
    (not killed by the test) ends the wait at once."""

    def attempt():
        try:
            result = check()
        except OSError:
            result = None
        crashed = [w for w in workers if w.process.poll() is not None and not w.killed]
        if not result and crashed:
            raise AssertionError(f"worker {crashed[0].port} exited waiting for {what}\n{logs()}")
        return result

    def logs() -> str:
        return "\n".join(f"--- {w.port}\n{w.log.read_text()[-3000:]}" for w in workers)

    return wait_until(attempt, what, timeout_s, explain=logs)
