"""``odradek reassign plan|execute|status|cancel``: kafka-reassign-partitions.sh for Odradek.

Thin shells over ``odradek.ops`` (the library the Kubernetes operator uses too):

- ``plan`` (Kafka's ``--generate``): ``--topics-to-move-json-file F`` or ``--topics T...``,
  ``--broker-list 4,5,6``; prints the current and the proposed assignment as Kafka does, and
  writes the proposal (``--output``, default ``reassignment.json``) and the current assignment
  beside it (``<output>.rollback.json``). Unlike Kafka's random placement, the proposal moves
  as few replicas as it can while balancing the brokers of the list.
- ``execute --reassignment-json-file F [--throttle BYTES_PER_S] [--additional]``: prints the
  rollback JSON, sets throttles, submits.
- ``status --reassignment-json-file F [--watch [--timeout S]]`` (Kafka's ``--verify``):
  per partition done / in progress with bytes copied; clears the throttles once all are done
  unless ``--preserve-throttles``. ``--watch`` refreshes until done or ``--timeout``.
- ``cancel --reassignment-json-file F``: cancels what is still running, clears the throttles.

Exit codes: 0 done; 1 an error (the Kafka error code and message); 2 bad arguments (argparse);
3 ``status`` finds partitions still in progress or not at their target.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from odradek import ops
from odradek.client.admin import ClusterClient
from odradek.client.security import ClientSecurity
from odradek.commands.common import (
    CommandError,
    add_bootstrap_argument,
    bootstrap_servers,
    client_security,
    run_command,
)
from odradek.ops.cluster import read_cluster
from odradek.ops.plan import format_reassignment_json

DEFAULT_PLAN_FILE = Path("reassignment.json")
STATUS_INCOMPLETE_EXIT = 3
WATCH_INTERVAL_S = 2.0
WATCH_TIMEOUT_S = 3600.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reassign", help="plan, execute, follow and cancel partition reassignments"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    plan = actions.add_parser("plan", help="propose a reassignment of topics onto brokers")
    which = plan.add_mutually_exclusive_group(required=True)
    which.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    which.add_argument("--topics", nargs="+", metavar="TOPIC")
    plan.add_argument("--broker-list", required=True, type=broker_list, metavar="ID,ID,...")
    plan.add_argument("--output", type=Path, default=DEFAULT_PLAN_FILE, metavar="FILE")
    add_rack_argument(plan)
    plan.set_defaults(handler=ops_command("reassign plan", run_plan))

    execute = actions.add_parser("execute", help="start the reassignment a JSON file describes")
    add_plan_file_argument(execute)
    add_throttle_argument(execute)
    execute.add_argument(
        "--additional",
        action="store_true",
        help="start even though other reassignments are running",
    )
    execute.set_defaults(handler=ops_command("reassign execute", run_execute))

    show = actions.add_parser("status", help="progress of a reassignment (Kafka's --verify)")
    add_plan_file_argument(show)
    show.add_argument("--watch", action="store_true", help="refresh until done or --timeout")
    show.add_argument("--interval", type=positive_float, default=WATCH_INTERVAL_S, metavar="S")
    show.add_argument("--timeout", type=positive_float, default=WATCH_TIMEOUT_S, metavar="S")
    show.add_argument(
        "--preserve-throttles", action="store_true", help="keep the throttles when all are done"
    )
    show.set_defaults(handler=ops_command("reassign status", run_status))

    cancel = actions.add_parser("cancel", help="cancel a running reassignment")
    add_plan_file_argument(cancel)
    cancel.set_defaults(handler=ops_command("reassign cancel", run_cancel))

    for action in (plan, execute, show, cancel):
        add_bootstrap_argument(action)


# --- argument types shared with `odradek cluster` ------------------------------------------


def broker_list(text: str) -> list[int]:
    try:
        brokers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 4,5,6, got {text!r}") from None
    if not brokers or any(b < 0 for b in brokers) or len(set(brokers)) != len(brokers):
        raise argparse.ArgumentTypeError(f"expected distinct broker ids like 4,5,6, got {text!r}")
    return brokers


def throttle(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bytes per second, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a throttle must be positive, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def add_throttle_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--throttle",
        type=throttle,
        metavar="BYTES_PER_S",
        help="bound replication of the moving replicas to this many bytes/s per broker",
    )


def add_rack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="place replicas ignoring racks"
    )


def add_plan_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reassignment-json-file", type=Path, required=True, metavar="FILE")


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from e


def write_plan_files(plan: ops.Plan, path: Path) -> Path:
    """The plan to ``path``, the current assignment to ``<path>.rollback.json``; the latter."""
    rollback = rollback_path(path)
    try:
        path.write_text(plan.to_json() + "\n")
        rollback.write_text(plan.rollback_json() + "\n")
    except OSError as e:
        raise CommandError(f"cannot write the plan: {e}") from e
    return rollback


def rollback_path(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(".json") + ".rollback.json")


def ops_command(name: str, body):
    """``run_command`` for commands over ``odradek.ops``: its errors are one line each."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except ops.OpsError as e:
            raise CommandError(describe(e)) from e

    return run_command(name, guarded)


def describe(error: ops.OpsError) -> str:
    return f"{error} [{error.error_code.name.upper()}]"


def run(coroutine):
    """Run one library call; its errors become one line with the Kafka error code."""
    try:
        return asyncio.run(coroutine)
    except ops.OpsError as e:
        raise CommandError(describe(e)) from e
    except ValueError as e:  # a malformed --bootstrap-server
        raise CommandError(str(e)) from e


# --- rendering ------------------------------------------------------------------------------


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def print_plan(prepared: ops.PreparedPlan, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up at call time: tests and pipes replace it
    plan = prepared.plan
    for move in plan:
        kind = "reorder" if move.reorder_only else f"+{_ids(move.adding)} -{_ids(move.removing)}"
        print(
            f"  {move.topic}-{move.partition}: [{_ids(move.current)}] -> [{_ids(move.target)}]"
            f"  ({kind})",
            file=out,
        )
    reorders = sum(1 for m in plan if m.reorder_only)
    if prepared.bytes_to_move is None:
        size = "bytes to copy unknown (the cluster does not serve DescribeLogDirs)"
    else:
        size = f"{human_bytes(prepared.bytes_to_move)} to copy"
    print(
        f"{len(plan)} partitions change: {plan.replica_moves} replica moves, {reorders} "
        f"leader-only reorders; {size}",
        file=out,
    )


def print_report(
    report: ops.StatusReport, out: TextIO | None = None, *, only_moving: bool = False
) -> None:
    """Per partition (``only_moving``: only those in progress), then the totals."""
    out = out or sys.stdout
    for p in report.partitions:
        if only_moving and p.state is not ops.PartitionState.IN_PROGRESS:
            continue
        where = f"{p.move.topic}-{p.move.partition}"
        if p.state is ops.PartitionState.IN_PROGRESS:
            percent = "?" if p.percent is None else f"{p.percent:.1f}%"
            print(
                f"  {where}: in progress, adding [{_ids(p.adding)}]: "
                f"{human_bytes(p.bytes_copied)} / {human_bytes(p.bytes_total)} ({percent})",
                file=out,
            )
        elif p.state is ops.PartitionState.DONE:
            print(f"  {where}: done [{_ids(p.replicas)}]", file=out)
        else:
            print(
                f"  {where}: not running; replicas are [{_ids(p.replicas)}], "
                f"not the target [{_ids(p.move.target)}]",
                file=out,
            )
    moving = len(report.in_progress)
    copied, total = report.bytes_copied, report.bytes_total
    line = f"{len(report.partitions) - moving} of {len(report.partitions)} partitions finished"
    if moving:
        line += f"; {human_bytes(copied)} of {human_bytes(total)} copied"
    if not report.sizes_known:
        line += " (the cluster does not serve DescribeLogDirs: sizes unknown)"
    print(line, file=out, flush=True)
    if report.throttles_cleared:
        print("Throttles cleared.", file=out, flush=True)


def _ids(brokers) -> str:
    return ",".join(map(str, brokers))


# --- actions --------------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    if args.topics_to_move_json_file is not None:
        topics = ops.parse_topics_to_move(read_text(args.topics_to_move_json_file))
    else:
        topics = args.topics
    prepared = run(
        ops.prepare_move(
            bootstrap_servers(args),
            topics,
            args.broker_list,
            rack_aware=not args.disable_rack_aware,
            security=client_security(args),
        )
    )
    current = {tp: p.replicas for tp, p in prepared.view.partitions.items() if tp.topic in topics}
    proposed = {**current, **prepared.plan.targets()}
    print("Current partition replica assignment")
    print(format_reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_reassignment_json(proposed))
    print()
    print_plan(prepared)
    if not len(prepared.plan):
        print("Nothing to move: the topics are already placed so.")
        return 0
    rollback = write_plan_files(prepared.plan, args.output)
    print(f"Wrote the plan to {args.output} and the current assignment to {rollback}.")
    return 0


def run_execute(args: argparse.Namespace) -> int:
    bootstrap, security = bootstrap_servers(args), client_security(args)
    prepared = run(
        ops.prepare_plan(bootstrap, read_text(args.reassignment_json_file), security=security)
    )
    print("Current partition replica assignment")
    print()
    print(prepared.plan.rollback_json())
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    throttled = run(
        ops.execute(
            bootstrap, prepared.plan, args.throttle, additional=args.additional, security=security
        )
    )
    if throttled:
        print(
            f"Warning: You must run --verify periodically, until the reassignment completes, to "
            f"ensure the throttle is removed. (odradek reassign status): throttled "
            f"{args.throttle} B/s on brokers {_ids(throttled)}."
        )
    names = ",".join(f"{m.topic}-{m.partition}" for m in prepared.plan)
    print(f"Successfully started partition reassignments for {names}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    bootstrap, security = bootstrap_servers(args), client_security(args)
    plan = load_plan(bootstrap, args.reassignment_json_file, security)
    clear = not args.preserve_throttles
    if args.watch:
        report = run(
            ops.watch(
                bootstrap,
                plan,
                interval_s=args.interval,
                timeout_s=args.timeout,
                on_report=lambda r: print_report(r) or print(),
                clear_when_done=clear,
                security=security,
            )
        )
    else:
        report = run(ops.status(bootstrap, plan, clear_when_done=clear, security=security))
        print_report(report)
    if args.watch and not report.finished:
        print(f"Still in progress after {args.timeout:g} s.")
    done = all(p.state is ops.PartitionState.DONE for p in report.partitions)
    return 0 if done else STATUS_INCOMPLETE_EXIT


def run_cancel(args: argparse.Namespace) -> int:
    bootstrap, security = bootstrap_servers(args), client_security(args)
    plan = load_plan(bootstrap, args.reassignment_json_file, security)
    cancelled = run(ops.cancel(bootstrap, plan, security=security))
    if cancelled:
        names = ",".join(f"{tp.topic}-{tp.partition}" for tp in cancelled)
        print(f"Successfully cancelled partition reassignments for: {names}")
    else:
        print("None of these partitions is being reassigned: nothing to cancel.")
    print("Throttles cleared.")
    return 0


def load_plan(bootstrap: str, path: Path, security: ClientSecurity | None = None) -> ops.Plan:
    """The plan of a JSON file against the cluster now (a target broker may be gone)."""
    text = read_text(path)
    ops.parse_reassignment_json(text)  # a malformed file fails before any connection

    async def read():
        async with ClusterClient(bootstrap, security=security) as client:
            view = await read_cluster(client)
        return ops.Plan.from_json(text, view, check_brokers=False)

    return run(read())
