"""The Odradek image, built and run here without a Docker engine (docs/image.md).

``build_image()`` runs ``scripts/build_image.sh``; ``session_image()`` does it once per test
process (the image tests and the kubelet stand-in's image mode share one build). ``Container`` is
one buildah working container of an image: ``buildah from`` makes it, ``buildah run --isolation
chroot --network host`` runs a command in it as the image's ``USER`` with the host's network
(``podman run`` does not work on this machine), ``buildah rm`` removes it.

A long-running command started with ``Container.start`` is a tree of processes::

    buildah run -> buildah-chroot-runtime -> buildah-chroot-exec -> the command (uid 10001)

(the two helpers run from in-memory copies of buildah, so their exe is ``/memfd:buildah-...``).

SIGTERM to ``buildah run`` alone does not stop that tree cleanly (a grandchild can be left
behind, orphaned), so ``ContainerProcess`` starts ``buildah run`` in a session of its own and
stops by PID: SIGTERM to the command's own processes first (a broker shuts down in order), then,
after a grace period, SIGKILL to each process still in the session. ``remaining()`` lists what is
left, for tests to check that nothing is.

Not thread-safe: one test owns a container and its processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build_image.sh"
BUILD_LOCK = Path(tempfile.gettempdir()) / "odradek-image-build.lock"
TOOLS = ("buildah", "podman")  # the build itself fails loudly on anything else missing
BUILD_TIMEOUT_S = 900.0  # a cold build: debootstrap, every wheel, the dependencies' layer
RUN_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0
KILL_WAIT_S = 5.0
BUILDAH_HELPER_EXE_PREFIX = "/memfd:buildah"
POLL_S = 0.1

Volume = tuple[Path, str]  # (host directory, path inside the container)


def missing_tools() -> list[str]:
    """The tools the image tier needs that are not on PATH."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def build_image(timeout_s: float = BUILD_TIMEOUT_S) -> tuple[str, str]:
    """Build the image with ``scripts/build_image.sh``; return its name and the script's log
    (one timed line per step). The wheels are built by this interpreter (a CPython 3.11).

    One build at a time on this machine (a file lock): test processes running side by side
    (pytest-xdist) would otherwise build the same image at once; the second one waits, then
    finds every layer cached."""
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            env={**os.environ, "PYTHON": sys.executable},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(
            f"scripts/build_image.sh exited with {result.returncode}:\n{result.stderr[-4000:]}"
        )
    return result.stdout.strip().splitlines()[-1], result.stderr


_session_image: tuple[str, str] | None = None


def session_image() -> tuple[str, str]:
    """``build_image()`` once per process: its name, and the build's log ("" after the first
    call). A failed build raises, and is tried again by the next caller."""
    global _session_image
    if _session_image is not None:
        return _session_image[0], ""
    _session_image = build_image()
    return _session_image


def image_or_skip() -> str:
    """The session's image for a test fixture: skipped when the image tools are missing, built
    once per session otherwise (the build's log and time printed by the first caller)."""
    import pytest

    missing = missing_tools()
    if missing:
        pytest.skip(f"the image tier needs {', '.join(missing)} (scripts/setup.sh installs them)")
    started = time.monotonic()
    name, build_log = session_image()
    if build_log:
        print(f"\n{build_log}image built in {time.monotonic() - started:.1f} s")
    return name


def _run_options(
    volumes: Sequence[Volume], env: Mapping[str, str], workdir: str | None
) -> list[str]:
    options = [f"--volume={host}:{inside}" for host, inside in volumes]
    options += [f"--env={key}={value}" for key, value in env.items()]
    if workdir:
        options.append(f"--workingdir={workdir}")
    return options


class Container:
    """A buildah working container of ``image``, named ``name``; ``remove()`` deletes it."""

    def __init__(self, image: str, name: str) -> None:
        self.image = image
        self.name = name
        subprocess.run(
            ["buildah", "from", "--pull=never", "--name", name, image],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=RUN_TIMEOUT_S,
        )

    def _run_argv(
        self,
        args: Sequence[str],
        volumes: Sequence[Volume],
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> list[str]:
        """``volumes``: (host path, path inside), with ``:ro`` or other options appended to the
        inside path; ``env`` on top of the image's; ``workdir`` instead of the image's."""
        return [
            "buildah",
            "run",
            "--isolation",
            "chroot",
            "--network",
            "host",
            *_run_options(volumes, env or {}, workdir),
            self.name,
            "--",
            *args,
        ]

    def run(
        self,
        *args: str,
        volumes: Sequence[Volume] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``args`` in the container to completion; its exit code and output."""
        return subprocess.run(
            self._run_argv(args, volumes, env, workdir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def start(
        self,
        args: Sequence[str],
        log_path: Path,
        *,
        volumes: Sequence[Volume] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> ContainerProcess:
        """Start ``args`` in the container, output to ``log_path``; returns at once."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                self._run_argv(args, volumes, env, workdir),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return ContainerProcess(popen, log_path)

    def remove(self) -> None:
        subprocess.run(
            ["buildah", "rm", self.name],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=RUN_TIMEOUT_S,
        )


def containers_named(prefix: str) -> list[str]:
    """The names of buildah's working containers that start with ``prefix``."""
    listing = subprocess.run(
        ["buildah", "containers", "--format", "{{.ContainerName}}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_TIMEOUT_S,
    )
    return [name for name in listing.stdout.split() if name.startswith(prefix)]


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    session: int
    exe: str


def _processes_in_session(session: int) -> list[_Proc]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # Fields after the command name (in parentheses, any character inside):
            # state ppid pgrp session ...
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[3]) != session or fields[0] == "Z":
                continue
            exe = os.readlink(entry / "exe")
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked, or a kernel thread
        found.append(_Proc(int(entry.name), int(fields[1]), session, exe))
    return found


class ContainerProcess:
    """A command running in a container: ``buildah run`` in a session of its own, led by it."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.popen = popen
        self.log_path = log_path
        self.session = popen.pid
        self.buildah_exe = os.path.realpath(shutil.which("buildah") or "buildah")

    def running(self) -> bool:
        return self.popen.poll() is None

    def remaining(self) -> list[int]:
        """The PIDs of every process still in this command's session."""
        return [p.pid for p in _processes_in_session(self.session)]

    def command_pids(self) -> list[int]:
        """The command's own processes: those in the session that are not buildah. (buildah's
        chroot runtime and exec helpers run from in-memory copies: ``/memfd:buildah-...``.)"""
        return [
            p.pid
            for p in _processes_in_session(self.session)
            if os.path.realpath(p.exe) != self.buildah_exe
            and not p.exe.startswith(BUILDAH_HELPER_EXE_PREFIX)
        ]

    def command_pid(self) -> int | None:
        """The command's first process (the one buildah's exec helper became), once started."""
        pids = set(self.command_pids())
        tops = [
            p.pid
            for p in _processes_in_session(self.session)
            if p.pid in pids and p.ppid not in pids
        ]
        return min(tops) if tops else None

    def log_tail(self, bytes_max: int = 4000) -> str:
        data = self.log_path.read_bytes() if self.log_path.exists() else b""
        return data[-bytes_max:].decode("utf-8", errors="replace")

    def _signal_each(self, pids: Sequence[int], signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _wait_until_empty(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            self.popen.poll()  # reap buildah itself once it exits
            if not self.remaining():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the command, SIGKILL whatever is left of the session after ``grace_s``.

        Returns ``buildah run``'s exit code (the command's), or None if it had to be killed."""
        self._signal_each(self.command_pids(), signal.SIGTERM)
        if not self._wait_until_empty(grace_s):
            self._signal_each(self.remaining(), signal.SIGKILL)
            self._wait_until_empty(KILL_WAIT_S)
            self.popen.wait(timeout=KILL_WAIT_S)
            return None
        return self.popen.wait(timeout=KILL_WAIT_S)
