"""A whole cluster on 127.0.0.1: ZooKeeper, controllers and brokers as real processes.

``up`` starts them detached (their own sessions, output to log files in the data directory),
waits until a broker's Metadata lists every broker, and records what it started in
``<data-dir>/cluster.json``: role, id, pid, addresses, data directory, log file. ``status`` reads
that file and checks each pid; ``down`` stops everything by pid (SIGTERM, then SIGKILL after a
grace period): brokers first, so they shut down cleanly while ZooKeeper is still there, then the
controllers, then ZooKeeper. ``up`` on a directory whose processes still run starts nothing.

Each broker has two listeners: ``PLAINTEXT`` for clients (its ``address``, and the bootstrap
servers) and ``CONTROL_PLANE`` for the controller's requests (``control_plane``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.local.zookeeper import ZooKeeperProcess, free_loopback_port
from odradek.protocol import schemas

STATE_FILE = "cluster.json"
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0
POLL_INTERVAL_S = 0.2
CONTROLLER_ID_BASE = 1000  # controller ids stay apart from broker ids
ZK_CHROOT = "/odradek"


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


@dataclass
class ClusterState:
    data_dir: str
    zookeeper_connect: str
    bootstrap_servers: str
    members: list[Member] = field(default_factory=list)

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
    # A zombie child of this process counts as gone.
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return True


def _spawn(args: list[str], log_path: Path) -> int:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return process.pid


def up(data_dir: Path, *, brokers: int = 3, controllers: int = 1) -> tuple[ClusterState, bool]:
    """Start the cluster (or find it running); returns its state and whether it was started."""
    data_dir = data_dir.absolute()
    existing = ClusterState.read(data_dir)
    if existing is not None and any(pid_alive(m.pid) for m in existing.members):
        return existing, False
    data_dir.mkdir(parents=True, exist_ok=True)

    zookeeper = ZooKeeperProcess(data_dir / "zookeeper")
    zookeeper.start()
    zookeeper.wait_ready()
    connect = f"127.0.0.1:{zookeeper.port}{ZK_CHROOT}"
    members = [
        Member(
            "zookeeper",
            0,
            zookeeper.pid,
            f"127.0.0.1:{zookeeper.port}",
            None,
            str(zookeeper.data_dir),
            str(zookeeper.log_path),
        )
    ]
    state = ClusterState(str(data_dir), connect, "", members)
    state.write(data_dir)  # so `down` can clean up even if the rest fails

    for n in range(controllers):
        controller_id = CONTROLLER_ID_BASE + n
        admin = f"127.0.0.1:{free_loopback_port()}"
        log_path = data_dir / f"controller-{controller_id}" / "controller.log"
        pid = _spawn(
            [
                "controller",
                "--override",
                f"controller.id={controller_id}",
                "--override",
                f"zookeeper.connect={connect}",
                "--override",
                f"odradek.admin.listener={admin}",
            ],
            log_path,
        )
        members.append(
            Member("controller", controller_id, pid, "", admin, str(log_path.parent), str(log_path))
        )
        state.write(data_dir)

    addresses = []
    for broker_id in range(1, brokers + 1):
        port, admin = free_loopback_port(), f"127.0.0.1:{free_loopback_port()}"
        control_plane = f"127.0.0.1:{free_loopback_port()}"
        broker_dir = data_dir / f"broker-{broker_id}"
        log_dirs = ",".join(str(broker_dir / f"disk-{d}") for d in range(2))
        log_path = broker_dir / "broker.log"
        pid = _spawn(
            [
                "broker",
                "--override",
                f"broker.id={broker_id}",
                "--override",
                f"zookeeper.connect={connect}",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port},"
                f"{CONTROL_PLANE_LISTENER_NAME}://{control_plane}",
                "--override",
                f"log.dirs={log_dirs}",
                "--override",
                f"odradek.admin.listener={admin}",
            ],
            log_path,
        )
        addresses.append(f"127.0.0.1:{port}")
        members.append(
            Member(
                "broker",
                broker_id,
                pid,
                addresses[-1],
                admin,
                str(broker_dir),
                str(log_path),
                control_plane=control_plane,
            )
        )
        state.bootstrap_servers = ",".join(addresses)
        state.write(data_dir)

    asyncio.run(_wait_for_brokers(state, brokers))
    return state, True


async def _wait_for_brokers(state: ClusterState, expected: int) -> None:
    """Until a broker's Metadata lists every broker (the controller has told them all)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    host, port = state.bootstrap_servers.split(",")[0].rsplit(":", 1)
    metadata_request = schemas.request_schema(3, 1)(topics=())
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        dead = [m for m in state.members if not pid_alive(m.pid)]
        if dead:
            raise RuntimeError(
                f"{dead[0].role} {dead[0].id} exited during start-up; see {dead[0].log}"
            )
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


def down(data_dir: Path) -> list[Member]:
    """Stop every member by pid, brokers first; returns those that needed SIGKILL."""
    state = ClusterState.read(data_dir.absolute())
    if state is None:
        return []
    order = {"broker": 0, "controller": 1, "zookeeper": 2}
    killed = []
    for role in sorted(order, key=order.get):
        group = [m for m in state.members if m.role == role and pid_alive(m.pid)]
        for member in group:
            os.kill(member.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(pid_alive(m.pid) for m in group):
            time.sleep(POLL_INTERVAL_S)
        for member in group:
            if pid_alive(member.pid):
                os.kill(member.pid, signal.SIGKILL)
                killed.append(member)
    (data_dir.absolute() / STATE_FILE).unlink(missing_ok=True)
    return killed
