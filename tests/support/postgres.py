"""A real PostgreSQL server for tests, from Debian's ``postgresql`` package.

``running_postgres()`` runs ``initdb`` into a fresh temporary directory and starts ``postgres``
on 127.0.0.1 with a free port (no Unix socket), trust authentication for the ``postgres`` role,
durability switched off (tests need speed, not crash safety), and creates the database
``odradek``. PostgreSQL refuses to run as root, so when the tests run as root the server runs as
the unprivileged ``nobody`` with the directory handed to it; otherwise as the current user. The
server is stopped by its PID (a fast shutdown, then SIGKILL if it outlives the bound) and the
directory removed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
UNPRIVILEGED_USER = "nobody"
DATABASE = "odradek"


def postgres_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb``, or None."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        return None
    return Path(max(found, key=lambda p: int(Path(p).parent.parent.name))).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts_connections(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False


@contextlib.contextmanager
def running_postgres() -> Iterator[str]:
    """Start a server; yield the SQLAlchemy URL of its ``odradek`` database."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    user = UNPRIVILEGED_USER if os.geteuid() == 0 else None
    # mkdtemp's 0700 directory in /tmp: only its owner (the server's user) goes in.
    root = Path(tempfile.mkdtemp(prefix="odradek-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data = root / "data"
    as_user = {"user": user} if user is not None else {}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    process = None
    try:
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
            cwd=root, env=env, check=True, capture_output=True, timeout=START_TIMEOUT_S,
            **as_user,
        )  # fmt: skip
        port = _free_port()
        log = open(root / "postgres.log", "wb")  # noqa: SIM115 (the server's, closed below)
        process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
             "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=50"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, **as_user,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepts_connections(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "PostgreSQL did not start:\n" + (root / "postgres.log").read_text()[-2000:]
                )
            time.sleep(0.05)
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{DATABASE}"
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
