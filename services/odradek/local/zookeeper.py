"""Start a standalone ZooKeeper server on loopback, for the local cluster and for tests.

The server is Apache ZooKeeper's ``ZooKeeperServerMain`` run by ``java`` from the jars that
``scripts/setup.sh`` installs (Debian's ``zookeeper`` package, 3.8). When those are missing, the
jars inside an installed ``pyspark`` wheel (ZooKeeper 3.9) are used instead.

A ``ZooKeeperProcess`` owns one directory::

    <base_dir>/zoo.cfg          the configuration written by start()
    <base_dir>/data/            ZooKeeper's dataDir (snapshots and transaction logs)
    <base_dir>/zookeeper.log    the server's stdout and stderr

With ``tls`` (``ZooKeeperTls``) it also serves a TLS port (``secureClientPort``, Netty, PEM
stores, client certificates required, the x509 auth provider on); the plain port stays on for
readiness and for tests that connect without a certificate.

It listens on 127.0.0.1 only (or on the one ``host`` address it is given, such as a veth's
address for brokers in network namespaces of a fault test), with the admin HTTP server off (it
would take port 8080). Readiness is the ``srvr`` four-letter command answering "Zookeeper
version": it is the only four-letter command Debian's ZooKeeper enables by default, and it
answers "not currently serving requests" until the server is up, and the port must be bound by
this server's own process (``/proc``): another process's ZooKeeper answering on that port does
not count.

ZooKeeper cannot listen on port 0 and tell which port it got, so without a given port one is
chosen here (``free_loopback_port``) for the server to bind a moment later. Another process may
take it in between: the server then exits with a BindException, and ``wait_ready`` starts it
again on a fresh port, at most ``BIND_ATTEMPTS_MAX`` times in all (a port given by the caller is
never changed). Brokers and controllers bind their own ports instead (``odradek.listeners``).

Every wait is bounded in time and in count. A ``ZooKeeperProcess`` is not thread-safe: one owner
starts and stops it.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from odradek.listeners import PORT_RANGE_HIGH, PORT_RANGE_LOW, ephemeral_range_start

__all__ = [
    "DEBIAN_CLASSPATH_JARS",
    "MAIN_CLASS",
    "ZooKeeperProcess",
    "ZooKeeperStartError",
    "ZooKeeperTls",
    "find_classpath",
    "free_loopback_port",
    "four_letter_word",
]

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ZooKeeperTls:
    """A TLS client port besides the plain one: PEM stores, client certificates required.

    ``keystore_pem`` holds the server's private key (PKCS#8, unencrypted) and its certificate
    chain; ``truststore_pem`` the authorities client certificates are checked against. A client
    that presents one is known to ZooKeeper as ``x509:<its subject DN>`` (the x509 provider),
    which ACLs such as CREATOR_ALL name. ``secure_port`` None: one is chosen at start.
    """

    keystore_pem: Path
    truststore_pem: Path
    secure_port: int | None = None


MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# zookeeper.jar's manifest names its own dependencies (netty, jute, slf4j-api, ...) by absolute
# path; only an slf4j binding has to be added, or the server logs nothing.
# The TLS port's Netty pipeline needs netty-codec, which zookeeper.jar's manifest leaves out.
DEBIAN_OPTIONAL_JARS = (Path("/usr/share/java/netty-codec.jar"),)
DEBIAN_CLASSPATH_JARS = (
    Path("/usr/share/java/zookeeper.jar"),
    Path("/usr/share/java/slf4j-simple.jar"),
)

READY_POLL_INTERVAL_S = 0.1
READY_TIMEOUT_S_DEFAULT = 30.0
STOP_GRACE_S_DEFAULT = 5.0
FOUR_LETTER_TIMEOUT_S = 1.0
FOUR_LETTER_REPLY_BYTES_MAX = 64 * 1024
LOG_TAIL_BYTES = 4096
LOG_SCAN_BYTES_MAX = 1 << 20  # of one start attempt's output, for its BindException


log = logging.getLogger(__name__)


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper could not be found, did not start, or did not become ready in time."""


def find_classpath() -> str:
    """Return a java classpath holding ZooKeeper's server and an slf4j binding.

    Debian's jars come first; then the jars inside an installed ``pyspark`` wheel. Raises
    ``ZooKeeperStartError`` if neither is there.
    """
    if all(jar.is_file() for jar in DEBIAN_CLASSPATH_JARS):
        optional = [jar for jar in DEBIAN_OPTIONAL_JARS if jar.is_file()]
        return os.pathsep.join(str(jar) for jar in (*DEBIAN_CLASSPATH_JARS, *optional))
    # find_spec locates the package without importing it (importing pyspark is slow).
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            jars_dir = Path(location) / "jars"
            if any(jars_dir.glob("zookeeper-*.jar")):
                # pyspark's ZooKeeper needs several of its neighbours (netty, jute, slf4j, log4j):
                # java expands the wildcard to every jar in the folder.
                return str(jars_dir / "*")
    raise ZooKeeperStartError(
        "no ZooKeeper jars found: run scripts/setup.sh (Debian's zookeeper package) "
        "or install pyspark"
    )


PORT_ATTEMPTS_MAX = 200
BIND_ATTEMPTS_MAX = 5  # ZooKeeper started on a fresh port after a BindException
BIND_FAILED = "Address already in use"  # java.net.BindException's message, in the server's log
_handed_out: set[int] = set()
_random = random.SystemRandom()


def free_loopback_port() -> int:
    """Return a TCP port that was free on 127.0.0.1 a moment ago, for a process to listen on.

    Chosen at random below the kernel's ephemeral range (``ip_local_port_range``), never twice
    by this process: a port the OS picks from that range for a bind to port 0 may be picked
    again, for another listener or as the source port of an outgoing connection, before the
    process it was meant for binds it (seen: a broker's admin port taken in the meantime).
    """
    low = min(ephemeral_range_start(), PORT_RANGE_HIGH)
    for _ in range(PORT_ATTEMPTS_MAX):
        port = _random.randrange(PORT_RANGE_LOW, low)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise OSError(
        f"no free port on {LOOPBACK} in [{PORT_RANGE_LOW}, {low}) after {PORT_ATTEMPTS_MAX} tries"
    )


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (IPv4 or IPv6), from
    ``/proc/net/tcp*`` (this network namespace) and ``/proc/<pid>/fd``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the inode
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:
            continue
    return False


def four_letter_word(
    port: int,
    command: str = "srvr",
    timeout_s: float = FOUR_LETTER_TIMEOUT_S,
    *,
    host: str = LOOPBACK,
) -> str:
    """Send a four-letter command to ZooKeeper on host:port and return its whole reply.

    Raises ``OSError`` if nothing listens there or the server does not answer in time.
    """
    chunks: list[bytes] = []
    received = 0
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(command.encode("ascii"))
        # The server closes the connection after its reply; the size cap bounds the loop.
        while received < FOUR_LETTER_REPLY_BYTES_MAX:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
            received += len(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperProcess:
    """One standalone ZooKeeper server on 127.0.0.1 (or ``host``), owning ``base_dir``.

    Use ``start()`` then ``wait_ready()``, and ``stop()`` in a ``finally`` (or use it as a context
    manager, which does all three).
    """

    def __init__(
        self,
        base_dir: Path,
        port: int | None = None,
        *,
        classpath: str | None = None,
        java: str | None = None,
        tick_time_ms: int = 2000,
        host: str = LOOPBACK,
        tls: ZooKeeperTls | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.tls = tls
        self._secure_port = None if tls is None else tls.secure_port
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        self._port = port
        self._port_given = port is not None
        self._bind_attempts = 0
        self._log_offset = 0  # where the current attempt's output starts in the log
        self._classpath = classpath
        self._java = java
        self.tick_time_ms = tick_time_ms
        self.host = host
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def port(self) -> int:
        """The client port; picked when ``start()`` runs if none was given."""
        if self._port is None:
            raise ZooKeeperStartError("the port is chosen by start(); call it first")
        return self._port

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ZooKeeperStartError("ZooKeeper has not been started")
        return self._process.pid

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def secure_port(self) -> int:
        """The TLS client port (``tls`` given); picked when ``start()`` runs if none was given."""
        if self._secure_port is None:
            raise ZooKeeperStartError("no TLS port: start() picks it, and only with tls")
        return self._secure_port

    @property
    def secure_connect_string(self) -> str:
        return f"{self.host}:{self.secure_port}"

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def config_text(self) -> str:
        return "\n".join(
            [
                f"tickTime={self.tick_time_ms}",
                f"dataDir={self.data_dir}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                "admin.enableServer=false",
                *self._tls_lines(),
                "",
            ]
        )

    def _tls_lines(self) -> list[str]:
        if self.tls is None:
            return []
        # ZooKeeper reads the ssl.* and authProvider.* lines of zoo.cfg as system properties.
        return [
            f"secureClientPort={self.secure_port}",
            f"secureClientPortAddress={self.host}",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.tls.keystore_pem}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={self.tls.truststore_pem}",
            "ssl.trustStore.type=PEM",
            "ssl.clientAuth=need",
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
        ]

    def start(self) -> None:
        """Write ``zoo.cfg`` and start the server. Returns at once: call ``wait_ready()`` next."""
        if self._process is not None:
            raise ZooKeeperStartError(f"ZooKeeper already started (pid {self._process.pid})")
        java = self._java or shutil.which("java")
        if java is None:
            raise ZooKeeperStartError("java not found: run scripts/setup.sh")
        self._java = java
        self._classpath = self._classpath or find_classpath()
        if self._port is None:
            self._port = free_loopback_port()
        if self.tls is not None and self._secure_port is None:
            self._secure_port = free_loopback_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")
        self._spawn()

    def _spawn(self) -> None:
        assert self._java is not None and self._classpath is not None and self._log_file
        self._bind_attempts += 1
        self.config_path.write_text(self.config_text())
        self._log_file.flush()
        self._log_offset = self.log_path.stat().st_size
        self._process = subprocess.Popen(
            [self._java, "-cp", self._classpath, MAIN_CLASS, str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            # Its own session, so a Ctrl-C aimed at the test run does not reach it first.
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S_DEFAULT) -> str:
        """Poll ``srvr`` every 0.1 s until ZooKeeper serves; return its reply.

        Ready means: ``srvr`` answers and the port is bound by this server's process. A server
        that exits because its port was taken meanwhile (a port chosen here, not given) is
        started again on a fresh port, ``BIND_ATTEMPTS_MAX`` attempts in all.

        Raises ``ZooKeeperStartError`` (with the end of the server's log) if the process exits or
        ``timeout_s`` passes first.
        """
        if self._process is None:
            raise ZooKeeperStartError("ZooKeeper has not been started")
        deadline = time.monotonic() + timeout_s
        attempts_max = math.ceil(timeout_s / READY_POLL_INTERVAL_S) + 1
        last_reply = ""
        for _ in range(attempts_max):
            if self._process.poll() is not None:
                retry = not self._port_given and self._bind_attempts < BIND_ATTEMPTS_MAX
                if retry and self._bind_failed():
                    taken = self._port
                    self._port = free_loopback_port()
                    if self.tls is not None and self.tls.secure_port is None:
                        self._secure_port = free_loopback_port()
                    log.warning(
                        "ZooKeeper could not bind port %s (taken meanwhile); trying %d",
                        taken,
                        self._port,
                    )
                    self._spawn()
                    continue
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with code {self._process.returncode}"
                    f" (start attempt {self._bind_attempts}):\n{self.log_tail()}"
                )
            try:
                last_reply = four_letter_word(self.port, "srvr", host=self.host)
            except OSError as exc:
                last_reply = f"{type(exc).__name__}: {exc}"
            else:
                if "Zookeeper version" in last_reply:
                    if listens(self._process.pid, self.port):
                        return last_reply
                    last_reply = f"another process answers on port {self.port}"
            if time.monotonic() >= deadline:
                break
            time.sleep(READY_POLL_INTERVAL_S)
        raise ZooKeeperStartError(
            f"ZooKeeper not ready on {self.connect_string} after {timeout_s} s "
            f"(last srvr reply: {last_reply.strip()!r}):\n{self.log_tail()}"
        )

    def stop(self, grace_s: float = STOP_GRACE_S_DEFAULT) -> int | None:
        """SIGTERM the server, SIGKILL it after ``grace_s``; return its exit code.

        Safe to call more than once, and before ``start()`` (it then does nothing).
        """
        process = self._process
        if process is None:
            return None
        try:
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGTERM)
                    process.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=grace_s)
                except ProcessLookupError:
                    # Exited between poll() and kill(); wait() below reaps it.
                    pass
            return process.wait(timeout=grace_s)
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def _bind_failed(self) -> bool:
        """Whether the current attempt's output tells of its client port taken."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return BIND_FAILED.encode() in f.read(LOG_SCAN_BYTES_MAX)
        except OSError:
            return False

    def log_tail(self, bytes_max: int = LOG_TAIL_BYTES) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - bytes_max))
                return log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> ZooKeeperProcess:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
