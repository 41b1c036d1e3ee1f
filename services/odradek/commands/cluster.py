"""``odradek cluster drain|rebalance``: move every replica off a broker, or even out the brokers.

Both run the same steps over ``odradek.ops`` (the calls the Kubernetes operator makes):

1. read the cluster and plan (``prepare_drain`` / ``prepare_rebalance``), print the plan: each
   partition's change, the number of replica moves and the bytes they copy;
2. write it as a kafka-reassign-partitions JSON file (``--output``) with its rollback beside
   it, so ``odradek reassign status|cancel --reassignment-json-file`` work on it from another
   shell; ``--dry-run`` stops here;
3. ask for confirmation (``--yes`` skips it; no answer, e.g. stdin closed, is a no);
4. execute with ``--throttle`` bytes/s, then follow it (``reassign status --watch``) until done
   or ``--timeout``. Ctrl-C asks whether to cancel when stdin is a terminal, and cancels
   otherwise; a cancel also clears the throttles.

Exit codes: 0 done (or nothing to do, or a dry run); 1 an error or a refused confirmation;
3 still in progress at ``--timeout`` (it keeps running; follow it with ``reassign status``);
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from odradek import ops
from odradek.client.security import ClientSecurity
from odradek.commands.common import add_bootstrap_argument, bootstrap_servers, client_security
from odradek.commands.reassign import (
    STATUS_INCOMPLETE_EXIT,
    WATCH_INTERVAL_S,
    WATCH_TIMEOUT_S,
    add_rack_argument,
    add_throttle_argument,
    describe,
    ops_command,
    positive_float,
    print_plan,
    print_report,
    run,
    write_plan_files,
)

INTERRUPTED_EXIT = 130


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster", help="drain a broker or rebalance the cluster (planned, throttled, cancellable)"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    drain = actions.add_parser("drain", help="move every replica off a broker")
    drain.add_argument("--broker", type=int, required=True, metavar="ID")
    drain.set_defaults(handler=ops_command("cluster drain", run_drain))

    rebalance = actions.add_parser(
        "rebalance", help="even out replicas and preferred leaders over the brokers"
    )
    rebalance.set_defaults(handler=ops_command("cluster rebalance", run_rebalance))

    for action in (drain, rebalance):
        add_throttle_argument(action)
        add_rack_argument(action)
        action.add_argument("--dry-run", action="store_true", help="plan and write it, no more")
        action.add_argument("--yes", action="store_true", help="execute without asking")
        action.add_argument("--output", type=Path, metavar="FILE", help="where the plan goes")
        action.add_argument("--interval", type=positive_float, default=WATCH_INTERVAL_S)
        action.add_argument("--timeout", type=positive_float, default=WATCH_TIMEOUT_S)
        add_bootstrap_argument(action)


def run_drain(args: argparse.Namespace) -> int:
    return _operate(
        args,
        f"drain broker {args.broker}",
        lambda bootstrap, security: ops.prepare_drain(
            bootstrap, args.broker, rack_aware=not args.disable_rack_aware, security=security
        ),
        args.output or Path(f"drain-broker-{args.broker}.json"),
    )


def run_rebalance(args: argparse.Namespace) -> int:
    return _operate(
        args,
        "rebalance the cluster",
        lambda bootstrap, security: ops.prepare_rebalance(
            bootstrap, rack_aware=not args.disable_rack_aware, security=security
        ),
        args.output or Path("rebalance.json"),
    )


def _operate(args: argparse.Namespace, what: str, prepare, output: Path) -> int:
    bootstrap, security = bootstrap_servers(args), client_security(args)
    prepared = run(prepare(bootstrap, security))
    plan = prepared.plan
    if not len(plan):
        print(f"Nothing to do to {what}: no replica or leader needs to move.")
        return 0
    print(f"Plan to {what}:")
    print_plan(prepared)
    rollback = write_plan_files(plan, output)
    print(f"Wrote the plan to {output} and the current assignment to {rollback}.")
    if args.dry_run:
        print(
            f"Dry run: nothing changed. To run it: odradek reassign execute "
            f"--reassignment-json-file {output}"
        )
        return 0
    if not args.yes and not _confirm(f"Execute this plan to {what}? [y/N] "):
        print("Not executed.")
        return 1
    throttled = run(ops.execute(bootstrap, plan, args.throttle, security=security))
    limit = f", throttled to {args.throttle} B/s on brokers {throttled}" if throttled else ""
    print(f"Started {len(plan)} partition reassignments{limit}.")
    print(f"Follow: odradek reassign status --reassignment-json-file {output} --watch")
    print(f"Cancel: odradek reassign cancel --reassignment-json-file {output}")
    try:
        report = asyncio.run(
            ops.watch(
                bootstrap,
                plan,
                interval_s=args.interval,
                timeout_s=args.timeout,
                on_report=lambda r: print_report(r, only_moving=True),
                security=security,
            )
        )
    except KeyboardInterrupt:
        return _interrupted(bootstrap, security, plan, output)
    except ops.OpsError as e:
        print(f"Following the reassignment failed: {describe(e)}; it keeps running.")
        return 1
    if not report.finished:
        print(f"Still in progress after {args.timeout:g} s; it keeps running.")
        return STATUS_INCOMPLETE_EXIT
    different = [p for p in report.partitions if p.state is not ops.PartitionState.DONE]
    if different:
        print(f"{len(different)} partitions did not reach their target (cancelled elsewhere?).")
        return 1
    # A reassignment moves a leader only off a removed replica; the plan's preferred leaders
    # (the first replicas it chose) lead once elected.
    not_elected = run(ops.elect_preferred_leaders(bootstrap, plan.targets(), security=security))
    for tp, error in sorted(not_elected.items()):
        print(f"Preferred leader of {tp.topic}-{tp.partition} not elected yet: {error.name}")
    print(f"Done: {what}.")
    return 0


def _confirm(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _interrupted(
    bootstrap: str, security: ClientSecurity | None, plan: ops.Plan, output: Path
) -> int:
    if sys.stdin.isatty() and not _confirm("\nCancel the reassignment? [y/N] "):
        print(f"Left running. Cancel: odradek reassign cancel --reassignment-json-file {output}")
        return INTERRUPTED_EXIT
    cancelled = run(ops.cancel(bootstrap, plan, security=security))
    print(f"Cancelled {len(cancelled)} partition reassignments; throttles cleared.")
    return INTERRUPTED_EXIT
