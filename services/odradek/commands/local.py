"""``odradek local up|status|restart|down``: a whole cluster on 127.0.0.1
(``odradek.local.cluster``; ``restart --rolling`` is ``odradek.local.rolling``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from odradek.commands.invocation import odradek_command
from odradek.local import cluster, rolling
from odradek.local import security as local_security
from odradek.local.cluster import ClusterState

DEFAULT_DATA_DIR = Path("var/local")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("local", help="run a cluster on this machine's loopback")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start ZooKeeper, a controller and brokers")
    start.add_argument("--brokers", type=int, default=3)
    start.add_argument("--controllers", type=int, default=1)
    start.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    start.add_argument(
        "--security",
        choices=local_security.MODES,
        default="plaintext",
        help="sasl_ssl: TLS and SCRAM for clients, mutual TLS inside, ACLs, a superuser admin "
        "(see <data-dir>/client.properties); default plaintext",
    )
    start.set_defaults(handler=run_up)
    status = actions.add_parser("status", help="list the cluster's processes")
    status.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=run_status)
    restart = actions.add_parser(
        "restart", help="restart the brokers: --rolling, one at a time, each back in sync first"
    )
    restart.add_argument(
        "--rolling",
        action="store_true",
        help="SIGTERM (controlled shutdown), start, wait for no under-replicated partition",
    )
    restart.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    restart.add_argument(
        "--isr-timeout-s",
        type=float,
        default=rolling.ISR_TIMEOUT_S,
        help="longest wait for the replicas to be in sync, before and after each broker",
    )
    restart.set_defaults(handler=run_restart)
    stop = actions.add_parser("down", help="stop every process of the cluster")
    stop.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    stop.set_defaults(handler=run_down)


def run_up(args: argparse.Namespace) -> int:
    try:
        state, started = cluster.up(
            args.data_dir,
            brokers=args.brokers,
            controllers=args.controllers,
            security=args.security,
        )
    except (RuntimeError, TimeoutError, OSError) as e:
        print(f"odradek local up: {e}")
        print(
            f"odradek local up: clean up with "
            f"`{odradek_command()} local down --data-dir {args.data_dir}`"
        )
        return 1
    what = "started" if started else "already running"
    print(f"cluster {what}: {len(state.members)} processes, data in {state.data_dir}")
    print(f"bootstrap servers: {state.bootstrap_servers}")
    _print_security(state)
    overrides = state.broker_overrides
    if "default.replication.factor" in overrides:
        print(
            f"new topics: replication factor {overrides['default.replication.factor']}, "
            f"min.insync.replicas {overrides['min.insync.replicas']} (acks=all waits for the ISR)"
        )
    return 0


def run_status(args: argparse.Namespace) -> int:
    state = ClusterState.read(args.data_dir.absolute())
    if state is None:
        print(f"no cluster in {args.data_dir}")
        return 1
    rows = [{**asdict(m), "alive": m.is_ours()} for m in state.members]
    if args.json:
        print(
            json.dumps({"bootstrap_servers": state.bootstrap_servers, "processes": rows}, indent=2)
        )
        return 0
    print(
        f"{'role':<11} {'id':>5} {'pid':>7} {'alive':<6} {'address':<22} "
        f"{'control plane':<22} {'admin':<22} data dir"
    )
    for row in rows:
        print(
            f"{row['role']:<11} {row['id']:>5} {row['pid']:>7} {str(row['alive']):<6} "
            f"{row['address'] or '-':<22} {row.get('control_plane') or '-':<22} "
            f"{row['admin'] or '-':<22} {row['data_dir']}"
        )
    print(f"bootstrap servers: {state.bootstrap_servers}")
    _print_security(state)
    return 0


def _print_security(state: ClusterState) -> None:
    if state.security == "plaintext":
        return
    properties = Path(state.data_dir) / "client.properties"
    print(
        f"security: {state.security} (SCRAM-SHA-512 user {local_security.ADMIN_USER}, a super "
        f"user); client settings in {properties}"
    )


def run_restart(args: argparse.Namespace) -> int:
    if not args.rolling:
        print("odradek local restart: only --rolling is implemented (one broker at a time)")
        return 2
    if ClusterState.read(args.data_dir.absolute()) is None:
        print(f"no cluster in {args.data_dir}")
        return 1
    if args.isr_timeout_s <= 0:
        print("odradek local restart: --isr-timeout-s must be positive")
        return 2
    try:
        reports = rolling.rolling_restart(
            args.data_dir,
            on_progress=lambda progress: print(f"odradek local restart: {progress}", flush=True),
            isr_timeout_s=args.isr_timeout_s,
        )
    except (rolling.RollingRestartError, RuntimeError, TimeoutError, OSError) as e:
        print(f"odradek local restart: {e}")
        return 1
    killed = [r.broker_id for r in reports if r.killed]
    print(
        f"odradek local restart: {len(reports)} brokers restarted one at a time"
        + (f"; killed after the grace period: {killed}" if killed else "")
    )
    return 0


def run_down(args: argparse.Namespace) -> int:
    if ClusterState.read(args.data_dir.absolute()) is None:
        print(f"no cluster in {args.data_dir}")
        return 0
    killed = cluster.down(args.data_dir)
    for member in killed:
        print(f"{member.role} {member.id} (pid {member.pid}) did not stop in time: killed")
    print("cluster stopped")
    return 0
