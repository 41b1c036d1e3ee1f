"""A whole cluster on 127.0.0.1: ZooKeeper, controllers and brokers as real processes.

``up`` starts them detached (their own sessions, output to log files in the data directory),
waits until a broker's Metadata lists every broker, and records what it started in
``<data-dir>/cluster.json``: role, id, pid, addresses, data directory, log file, and what
identifies the process (``ProcessIdentity``: its start time and command line, from /proc).
``status`` reads that file and checks each process; ``down`` stops everything by pid (SIGINT
for brokers, SIGTERM for the others, then SIGKILL after a grace period): brokers first, so they
shut down cleanly while ZooKeeper is still there, then the controllers, then ZooKeeper. Brokers
get SIGINT, their stop without a controlled shutdown: with every broker going there is nowhere to
move leadership, and the last one would wait out all its attempts. ``stop_broker`` uses SIGTERM
(a controlled shutdown). ``up`` on a directory whose processes still run starts nothing.

PIDs are reused: a pid in ``cluster.json`` may belong to another process by now (after a reboot,
or once the member died). So a member counts as running, and is signalled, only if the process
with its pid has the start time and command line recorded when it was started; any other
process is left alone, with a warning.

Each broker has three listeners: ``PLAINTEXT`` for clients (its ``address``, and the bootstrap
servers), ``CONTROL_PLANE`` for the controller's requests (``control_plane``) and ``INTERNAL``
for replication (``inter.broker.listener.name``; ``local.security``), so clients filling
``max.connections`` of theirs never keep a follower out. Each controller
has its own listener on a port of its own (its ``address``), where brokers send AlterPartition.
Every controller and broker is started with its listeners and admin server on port 0: it binds
free ports itself and writes what it got to ``listeners.json`` in its directory
(``odradek.listeners.file``), which ``up`` and ``add_broker`` wait for and record; so no port is
chosen here for another process to take before the member binds it. A restarted broker binds
the ports it had (its address is part of what clients know of it). ZooKeeper cannot bind port 0
and report it: ``ZooKeeperProcess`` starts it again on a fresh port if its port was taken.

New topics get ``default.replication.factor`` 3 and ``min.insync.replicas`` 2 (Kafka's usual
production choice: one broker may be lost while ``acks=all`` writes go on), or as many replicas as
there are brokers in a smaller cluster (``replication_defaults``); callers may pin other values.

For fault tests: ``kill`` signals one member by its pid, ``restart_broker`` starts a stopped
broker again with the same configuration and data, ``partition_state`` and ``active_controller``
read who leads from ZooKeeper, and ``up(host=..., broker_netns=...)`` places the cluster on a
veth address and runs chosen brokers inside network namespaces (``ip netns exec``) so a test can
cut one off. Each process is still started, identified and stopped by its own pid.

Its length: starting, recording, checking and stopping the processes share one record of what
was started (``cluster.json`` and each ``ProcessIdentity``), so they stay in one module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.listeners import read_listeners_file
from odradek.local import security as local_security
from odradek.local.zookeeper import LOOPBACK, ZooKeeperProcess, ZooKeeperTls
from odradek.protocol import schemas
from odradek.zk.paths import ControllerInfo, PartitionState, partition_state_path

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0
KILL_WAIT_S = 5.0  # for the kernel to reap a SIGKILLed member
POLL_INTERVAL_S = 0.2
CONTROLLER_ID_BASE = 1000  # controller ids stay apart from broker ids
IDENTIFY_TIMEOUT_S = 5.0  # for a just-started process's command line to appear
IDENTIFY_POLL_S = 0.005
ZK_CHROOT = "/odradek"
ZK_CONNECT_TIMEOUT_S = 10.0
LISTENERS_FILE = "listeners.json"  # a member's bound addresses (odradek.listeners)
BOUND_POLL_S = 0.05  # for a just-started member's listeners.json
LOG_DIRS_PER_BROKER = 2  # <broker dir>/disk-0, disk-1: every local cluster runs JBOD
REPLICATION_FACTOR_DEFAULT = 3
MIN_INSYNC_REPLICAS_DEFAULT = 2


class ProcessIdentity(NamedTuple):
    """What tells a process from a later one with the same pid: start time and command line.

    The start time (in clock ticks after boot) alone tells them apart: a pid is reused only
    after the kernel went through every other one, never within one tick. The command line
    also guards against a state file copied from another boot.
    """

    start_ticks: int  # /proc/<pid>/stat field 22
    cmdline: tuple[str, ...]  # empty while the process is still in exec(), or for a zombie

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        """The identity of the process ``pid`` now; None if there is none (or not readable)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        # The command name (field 2) is in parentheses and may hold spaces or parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        return cls(int(fields[19]), tuple(a.decode() for a in cmdline.split(b"\0")[:-1]))

    @classmethod
    def of_started(cls, pid: int, argv: list[str] | None = None) -> ProcessIdentity | None:
        """The identity of a process just started: its command line appears once exec is done.

        Popen returns when exec has begun; the kernel sets the new command line a little later.
        With ``argv``, waits for that command line: a process started through a launcher that
        execs it in turn (``ip netns exec``) shows the launcher's first.
        """
        deadline = time.monotonic() + IDENTIFY_TIMEOUT_S

        def settled(identity: ProcessIdentity) -> bool:
            return identity.cmdline == tuple(argv) if argv else bool(identity.cmdline)

        identity = cls.of(pid)
        while identity is not None and not settled(identity) and time.monotonic() < deadline:
            time.sleep(IDENTIFY_POLL_S)
            identity = cls.of(pid)
        return identity


@dataclass
class Member:
    role: str  # zookeeper | controller | broker
    id: int
    pid: int
    address: str
    admin: str | None
    data_dir: str
    log: str
    control_plane: str | None = None  # a broker's CONTROL_PLANE listener, host:port
    # ProcessIdentity at start, as JSON; a member without one is never signalled.
    start_ticks: int | None = None
    cmdline: list[str] | None = None
    netns: str | None = None  # the network namespace it runs in; None: this one
    # A broker's own server.properties keys (broker.rack, ...), after the cluster's.
    overrides: dict[str, str] = field(default_factory=dict)

    def identify(self, argv: list[str] | None = None) -> None:
        """Record the identity of the process now running with ``pid`` (just started)."""
        identity = ProcessIdentity.of_started(self.pid, argv)
        if identity is not None:
            self.start_ticks, self.cmdline = identity.start_ticks, list(identity.cmdline)

    def is_ours(self) -> bool:
        """Whether the process with ``pid`` is alive and is the one this member started."""
        if not pid_alive(self.pid) or self.start_ticks is None or self.cmdline is None:
            return False
        return ProcessIdentity.of(self.pid) == ProcessIdentity(
            self.start_ticks, tuple(self.cmdline)
        )


@dataclass
class ClusterState:
    data_dir: str
    zookeeper_connect: str
    bootstrap_servers: str
    members: list[Member] = field(default_factory=list)
    # Every broker's configuration beyond its own addresses, so a broker restarts as it was.
    broker_overrides: dict[str, str] = field(default_factory=dict)
    # The brokers' client listener (its addresses are the bootstrap servers), and the one they
    # replicate over when it is not that one (``local.security``).
    client_listener: str = "PLAINTEXT"
    internal_listener: str | None = None
    security: str = "plaintext"  # odradek local up --security

    def member(self, role: str, member_id: int) -> Member:
        return next(m for m in self.members if m.role == role and m.id == member_id)

    @classmethod
    def read(cls, data_dir: Path) -> ClusterState | None:
        path = data_dir / STATE_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        raw["members"] = [Member(**m) for m in raw["members"]]
        return cls(**raw)

    def write(self, data_dir: Path) -> None:
        path = data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie counts as gone: reaped here if it is a child of this process; otherwise it waits
    # for its parent (or init) to reap it, which a loaded machine may take a while to do.
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold any character.
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "Z"


def _command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "odradek.cli", *args]


def _spawn(args: list[str], log_path: Path, netns: str | None = None) -> int:
    """Start ``odradek <args>`` detached; inside network namespace ``netns`` if given.

    ``ip netns exec`` enters the namespace and execs the command: the pid stays the one
    returned here, and the command line becomes ``_command(args)`` once that exec is done.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launcher = ["ip", "netns", "exec", netns] if netns else []
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [*launcher, *_command(args)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return process.pid


def replication_defaults(brokers: int) -> dict[str, str]:
    """``default.replication.factor`` and ``min.insync.replicas`` for a cluster of ``brokers``.

    3 and 2 from three brokers up; a smaller cluster gets a replica on every broker and a
    minimum one below that (at least 1), so that it too survives the loss of one broker.
    ``__consumer_offsets`` and ``__transaction_state`` get the same replication factor (Kafka's
    3 would leave a smaller cluster without a group or transaction coordinator), and the latter
    the same minimum ISR (``transaction.state.log.min.isr``).
    """
    replication_factor = max(1, min(REPLICATION_FACTOR_DEFAULT, brokers))
    min_insync = max(1, min(MIN_INSYNC_REPLICAS_DEFAULT, replication_factor - 1))
    return {
        "default.replication.factor": str(replication_factor),
        "min.insync.replicas": str(min_insync),
        "offsets.topic.replication.factor": str(replication_factor),
        "transaction.state.log.replication.factor": str(replication_factor),
        "transaction.state.log.min.isr": str(min_insync),
    }


def broker_log_dirs(member: Member) -> list[Path]:
    """A local broker's ``log.dirs``, in order."""
    return [Path(member.data_dir) / f"disk-{d}" for d in range(LOG_DIRS_PER_BROKER)]


def _broker_args(member: Member, state: ClusterState) -> list[str]:
    log_dirs = ",".join(str(d) for d in broker_log_dirs(member))
    return [
        "broker",
        "--override",
        f"broker.id={member.id}",
        "--override",
        f"zookeeper.connect={state.zookeeper_connect}",
        "--override",
        f"listeners={state.client_listener}://{member.address},"
        f"{CONTROL_PLANE_LISTENER_NAME}://{member.control_plane}"
        + (
            ""
            if state.internal_listener is None
            else f",{state.internal_listener}://{member.address.rsplit(':', 1)[0]}:0"
        ),
        "--override",
        f"log.dirs={log_dirs}",
        "--override",
        f"odradek.admin.listener={member.admin}",
        "--override",
        f"odradek.listeners.file={Path(member.data_dir) / LISTENERS_FILE}",
        *(f"--override={key}={value}" for key, value in state.broker_overrides.items()),
        *(f"--override={key}={value}" for key, value in member.overrides.items()),
    ]


def up(
    data_dir: Path,
    *,
    brokers: int = 3,
    controllers: int = 1,
    broker_overrides: Mapping[str, str] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    zookeeper_tick_time_ms: int | None = None,
    host: str = LOOPBACK,
    broker_netns: Mapping[int, tuple[str, str]] | None = None,
    racks: Mapping[int, str] | None = None,
    zookeeper_tls: ZooKeeperTls | None = None,
    security: str = "plaintext",
) -> tuple[ClusterState, bool]:
    """Start the cluster (or find it running); returns its state and whether it was started.

    ``broker_overrides`` are ``server.properties`` keys given to every broker after the
    cluster's own (``replication_defaults`` among them), so they win; ``controller_overrides``
    likewise for the controllers. ZooKeeper and the brokers listen on ``host`` (controllers'
    and brokers' admin servers stay on 127.0.0.1); ``broker_netns`` maps a broker id to
    ``(network namespace, address)``: that broker runs inside the namespace, on that address.
    ``racks`` gives brokers their ``broker.rack``. ``zookeeper_tls`` gives ZooKeeper a TLS port
    too (its ``secure_port`` is for the caller's ``zookeeper.connect`` overrides; the cluster's
    own ``zookeeper_connect`` stays the plain port). ``security`` is ``odradek local up
    --security``: ``sasl_ssl`` secures the cluster as ``local.security`` says.
    """
    data_dir = data_dir.absolute()
    existing = ClusterState.read(data_dir)
    if existing is not None and any(m.is_ours() for m in existing.members):
        return existing, False
    data_dir.mkdir(parents=True, exist_ok=True)
    secured = local_security.secure(data_dir, security, broker_overrides)

    tick = {} if zookeeper_tick_time_ms is None else {"tick_time_ms": zookeeper_tick_time_ms}
    zookeeper = ZooKeeperProcess(data_dir / "zookeeper", host=host, tls=zookeeper_tls, **tick)
    zookeeper.start()
    zookeeper.wait_ready()
    connect = f"{host}:{zookeeper.port}{ZK_CHROOT}"
    members = [
        Member(
            "zookeeper",
            0,
            zookeeper.pid,
            f"{host}:{zookeeper.port}",
            None,
            str(zookeeper.data_dir),
            str(zookeeper.log_path),
        )
    ]
    members[0].identify()
    overrides = {
        **replication_defaults(brokers),
        **secured.broker_overrides,
        **(broker_overrides or {}),
    }
    controller_overrides = {**secured.controller_overrides, **(controller_overrides or {})}
    state = ClusterState(
        str(data_dir),
        connect,
        "",
        members,
        overrides,
        client_listener=secured.client_listener,
        internal_listener=secured.internal_listener,
        security=security,
    )
    state.write(data_dir)  # so `down` can clean up even if the rest fails
    local_security.write_admin_credential(connect, secured)

    for n in range(controllers):
        controller_id = CONTROLLER_ID_BASE + n
        log_path = data_dir / f"controller-{controller_id}" / "controller.log"
        listeners_file = _fresh_listeners_file(log_path.parent)
        pid = _spawn(
            [
                "controller",
                "--override",
                f"controller.id={controller_id}",
                "--override",
                f"zookeeper.connect={connect}",
                "--override",
                "odradek.admin.listener=127.0.0.1:0",
                "--override",
                f"listeners=CONTROLLER://{host}:0",
                "--override",
                f"odradek.listeners.file={listeners_file}",
                *(f"--override={k}={v}" for k, v in (controller_overrides or {}).items()),
            ],
            log_path,
        )
        members.append(
            Member(
                "controller",
                controller_id,
                pid,
                f"{host}:0",
                "127.0.0.1:0",
                str(log_path.parent),
                str(log_path),
            )
        )
        members[-1].identify()
        state.write(data_dir)

    started = []
    for broker_id in range(1, brokers + 1):
        netns, address = (broker_netns or {}).get(broker_id, (None, host))
        rack = (racks or {}).get(broker_id)
        started.append(_spawn_new_broker(state, broker_id, address, netns=netns, rack=rack))
    for member in [m for m in members if m.role == "controller"] + started:
        _record_bound_addresses(state, member)

    if secured.admin_password is None:
        asyncio.run(_wait_for_brokers(state, brokers))
    else:
        _wait_for_secured_brokers(state, brokers, local_security.client_config(secured, ""))
        local_security.write_client_properties(data_dir, secured, state.bootstrap_servers)
    return state, True


def _fresh_listeners_file(member_dir: Path) -> Path:
    """The member's ``listeners.json``, any left from an earlier run removed."""
    member_dir.mkdir(parents=True, exist_ok=True)
    path = member_dir / LISTENERS_FILE
    path.unlink(missing_ok=True)
    return path


def _record_bound_addresses(state: ClusterState, member: Member) -> None:
    """Wait (bounded) for a just-started member's ``listeners.json`` and record its addresses;
    raises if the member exits first."""
    path = Path(member.data_dir) / LISTENERS_FILE
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (bound := read_listeners_file(path)) is None:
        _raise_if_exited(member)
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{member.role} {member.id} did not bind its listeners in {READY_TIMEOUT_S} s; "
                f"see {member.log}"
            )
        time.sleep(BOUND_POLL_S)
    listeners, admin = bound
    if member.role == "controller":
        (member.address,) = listeners.values()
    else:
        member.address = listeners[state.client_listener]
        member.control_plane = listeners[CONTROL_PLANE_LISTENER_NAME]
    member.admin = admin
    state.bootstrap_servers = ",".join(m.address for m in state.members if m.role == "broker")
    state.write(Path(state.data_dir))


def _spawn_new_broker(
    state: ClusterState, broker_id: int, address: str, *, netns: str | None, rack: str | None
) -> Member:
    """Start a broker that was never part of the cluster, on port 0, and record it in the state
    file; its addresses are known once ``_record_bound_addresses`` has read them."""
    data_dir = Path(state.data_dir)
    admin_host = address if netns else LOOPBACK  # reachable from here
    broker_dir = data_dir / f"broker-{broker_id}"
    _fresh_listeners_file(broker_dir)
    member = Member(
        "broker",
        broker_id,
        0,
        f"{address}:0",
        f"{admin_host}:0",
        str(broker_dir),
        str(broker_dir / "broker.log"),
        control_plane=f"{address}:0",
        netns=netns,
        overrides={} if rack is None else {"broker.rack": rack},
    )
    _start_broker(member, state)
    state.members.append(member)
    state.write(data_dir)
    return member


def add_broker(data_dir: Path, broker_id: int | None = None, *, rack: str | None = None) -> Member:
    """Start one more broker (the next free id unless given) on the cluster's host; waits until
    its Metadata lists itself. It holds no replica until partitions are moved to it."""
    data_dir = data_dir.absolute()
    state = ClusterState.read(data_dir)
    if state is None:
        raise RuntimeError(f"no cluster in {data_dir}")
    taken = {m.id for m in state.members if m.role == "broker"}
    broker_id = broker_id if broker_id is not None else max(taken, default=0) + 1
    if broker_id in taken:
        raise RuntimeError(f"broker {broker_id} is already part of the cluster")
    host = state.zookeeper_connect.rsplit(":", 1)[0]
    member = _spawn_new_broker(state, broker_id, host, netns=None, rack=rack)
    _record_bound_addresses(state, member)
    asyncio.run(_wait_for_broker(member))
    return member


def stop_broker(
    data_dir: Path, broker_id: int, *, forget: bool = False, grace_s: float = STOP_GRACE_S
) -> Member:
    """Stop one broker with SIGTERM (its controlled shutdown), SIGKILL after ``grace_s``;
    ``forget`` also removes it from the state file (a broker taken out of the cluster)."""
    data_dir = data_dir.absolute()
    state = ClusterState.read(data_dir)
    if state is None:
        raise RuntimeError(f"no cluster in {data_dir}")
    member = state.member("broker", broker_id)
    if _signal(member, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and member.is_ours():
            time.sleep(POLL_INTERVAL_S)
        _signal(member, signal.SIGKILL, quiet=True)
    if forget:
        state.members.remove(member)
        state.bootstrap_servers = ",".join(m.address for m in state.members if m.role == "broker")
        state.write(data_dir)
    return member


def _start_broker(member: Member, state: ClusterState) -> None:
    """Start the broker ``member`` describes; records its new pid and identity in ``member``."""
    args = _broker_args(member, state)
    member.pid = _spawn(args, Path(member.log), member.netns)
    member.start_ticks = member.cmdline = None
    member.identify(_command(args))


def _raise_if_exited(*members: Member) -> None:
    """While waiting for start-up: a member that is no longer running will not come up."""
    for member in members:
        if not member.is_ours():
            raise RuntimeError(
                f"{member.role} {member.id} exited during start-up; see {member.log}"
            )


async def _wait_for_brokers(state: ClusterState, expected: int) -> None:
    """Until a broker's Metadata lists every broker (the controller has told them all)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    host, port = state.bootstrap_servers.split(",")[0].rsplit(":", 1)
    metadata_request = schemas.request_schema(3, 1)(topics=())
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        _raise_if_exited(*state.members)
        try:
            async with await BrokerConnection.open(host, int(port), connect_timeout_s=2) as conn:
                response = await conn.send(metadata_request, timeout_s=2)
                if len(response.brokers) >= expected:
                    return
                last_error = f"{len(response.brokers)} of {expected} brokers known"
        except (ClientError, OSError) as e:
            last_error = str(e)
        await asyncio.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"cluster not ready after {READY_TIMEOUT_S} s: {last_error}")


def _wait_for_secured_brokers(state: ClusterState, expected: int, client: dict[str, str]) -> None:
    """``_wait_for_brokers`` for a SASL_SSL client listener, through librdkafka (whose SASL
    this module does not redo)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**client, "bootstrap.servers": state.bootstrap_servers})
    deadline = time.monotonic() + READY_TIMEOUT_S
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        _raise_if_exited(*state.members)
        try:
            known = len(admin.list_topics(timeout=2).brokers)
        except Exception as e:  # KafkaException: not up yet, or the credential not there yet
            last_error = str(e)
        else:
            if known >= expected:
                return
            last_error = f"{known} of {expected} brokers known"
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"cluster not ready after {READY_TIMEOUT_S} s: {last_error}")


def _signal(member: Member, signum: int, *, quiet: bool = False) -> bool:
    """Send ``signum`` to the member's process if it is still the one it started; True if sent.

    Through a pidfd: once the identity is checked, the signal reaches that process or none,
    even if it exits and its pid is reused in between.
    """
    try:
        pidfd = os.pidfd_open(member.pid)
    except ProcessLookupError:
        return False
    try:
        if not member.is_ours():
            if not quiet and pid_alive(member.pid):
                log.warning(
                    "not signalling pid %d: it is not the %s %d this cluster started (the pid "
                    "was reused, or the state file predates process identities)",
                    member.pid,
                    member.role,
                    member.id,
                )
            return False
        signal.pidfd_send_signal(pidfd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def kill(member: Member, signum: int = signal.SIGKILL) -> bool:
    """Send ``signum`` to one member, by its pid, if it is still the process it started."""
    return _signal(member, signum)


def restart_broker(data_dir: Path, broker_id: int) -> Member:
    """Start broker ``broker_id`` again (it must not be running): same addresses, data and
    configuration; waits until its Metadata lists itself (the controller has told it the
    cluster: a client's first look there finds the brokers). The state file gets its new pid."""
    data_dir = data_dir.absolute()
    state = ClusterState.read(data_dir)
    if state is None:
        raise RuntimeError(f"no cluster in {data_dir}")
    member = state.member("broker", broker_id)
    if member.is_ours():
        raise RuntimeError(f"broker {broker_id} is still running (pid {member.pid})")
    _start_broker(member, state)
    state.write(data_dir)
    asyncio.run(_wait_for_broker(member))
    return member


async def _wait_for_broker(member: Member) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    host, port = member.address.rsplit(":", 1)
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        _raise_if_exited(member)
        try:
            async with await BrokerConnection.open(host, int(port), connect_timeout_s=2) as conn:
                response = await conn.send(schemas.request_schema(3, 1)(topics=()), timeout_s=2)
                if any(b.node_id == member.id for b in response.brokers):
                    return
                last_error = "no cluster metadata from the controller yet"
        except (ClientError, OSError) as e:
            last_error = str(e)
        await asyncio.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"broker {member.id} not serving after {READY_TIMEOUT_S} s: {last_error}")


def _zookeeper(state: ClusterState) -> KazooClient:
    client = KazooClient(state.zookeeper_connect, timeout=ZK_CONNECT_TIMEOUT_S)
    client.start(timeout=ZK_CONNECT_TIMEOUT_S)
    return client


def partition_state(state: ClusterState, topic: str, partition: int) -> PartitionState | None:
    """Leader, leader epoch and ISR of a partition as the controller last wrote them."""
    client = _zookeeper(state)
    try:
        path = partition_state_path(topic, partition)
        try:
            data, _ = client.get(path)
        except NoNodeError:
            return None
        return PartitionState.decode(data, path)
    finally:
        client.stop()
        client.close()


def active_controller(state: ClusterState) -> int | None:
    """The id of the controller that holds ``/controller`` now; None between two."""
    client = _zookeeper(state)
    try:
        # One read, not exists-then-get: the node is ephemeral and may vanish in between.
        try:
            data, _ = client.get(ControllerInfo.PATH)
        except NoNodeError:
            return None
        return ControllerInfo.decode(data).controller_id
    finally:
        client.stop()
        client.close()


def down(data_dir: Path) -> list[Member]:
    """Stop every member by pid, brokers first; returns those that needed SIGKILL.

    A pid whose process is not the one the member started (``Member.is_ours``) is skipped with
    a warning: that pid was reused by something else.
    """
    state = ClusterState.read(data_dir.absolute())
    if state is None:
        return []
    order = {"broker": 0, "controller": 1, "zookeeper": 2}
    stop_signal = {"broker": signal.SIGINT}  # no controlled shutdown: see the module docstring
    killed = []
    for role in sorted(order, key=order.get):
        signum = stop_signal.get(role, signal.SIGTERM)
        group = [m for m in state.members if m.role == role and _signal(m, signum)]
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(m.is_ours() for m in group):
            time.sleep(POLL_INTERVAL_S)
        sigkilled = [m for m in group if _signal(m, signal.SIGKILL, quiet=True)]
        # Exiting is not instant either, after SIGKILL or after a stop signal: a process that is
        # tearing down (a JVM's threads) no longer looks like the member (its cmdline reads
        # empty) but still exists. Return only once every signalled process is gone.
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline and any(pid_alive(m.pid) for m in group):
            time.sleep(POLL_INTERVAL_S)
        killed.extend(sigkilled)
    (data_dir.absolute() / STATE_FILE).unlink(missing_ok=True)
    return killed
