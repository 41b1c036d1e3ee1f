"""``odradek groups list|describe|reset-offsets|delete``: kafka-consumer-groups.sh for Odradek.

A shell over ``odradek.ops.groups`` (the wire protocol through Odradek's own client):

- ``list [--state S ...] [--type classic|consumer]``: every group, its type, state and protocol
  type;
- ``describe --group G``: the group's state and members, then Kafka's table per partition:
  committed offset, log end offset, lag, and the member it is assigned to;
- ``reset-offsets --group G (--topic T[:P,P...] ... | --all-topics) SCENARIO [--execute]``, with
  Kafka's scenarios ``--to-earliest``, ``--to-latest``, ``--to-datetime``, ``--by-duration``,
  ``--shift-by N``, ``--to-offset N``, ``--to-current``: prints the new offsets; a dry run
  unless ``--execute`` (``--dry-run`` is accepted and is the default), and ``--execute`` only
  while the group has no members;
- ``delete --group G ...``: deletes empty groups and their offsets.

Exit code 0 when everything asked was done, 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from odradek import ops
from odradek.commands.common import (
    CommandError,
    add_bootstrap_argument,
    bootstrap_servers,
    client_security,
    run_command,
)
from odradek.errors import ErrorCode
from odradek.ops import groups as group_ops
from odradek.ops.group_offsets import ResetKind, ResetSpec, parse_datetime, parse_duration

SCENARIOS = {
    "to_earliest": ResetKind.EARLIEST,
    "to_latest": ResetKind.LATEST,
    "to_datetime": ResetKind.DATETIME,
    "shift_by": ResetKind.SHIFT_BY,
    "to_offset": ResetKind.OFFSET,
    "to_current": ResetKind.CURRENT,
    "by_duration": ResetKind.DATETIME,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "groups", help="list, describe, reset and delete consumer groups"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="every consumer group of the cluster")
    listing.add_argument(
        "--state", action="append", default=[], help="only groups in this state (repeatable)"
    )
    listing.add_argument(
        "--type",
        action="append",
        default=[],
        type=str.lower,
        choices=("classic", "consumer"),
        help="only groups of this protocol (repeatable)",
    )
    add_bootstrap_argument(listing)
    listing.set_defaults(handler=run_command("groups list", run_list))

    describe = actions.add_parser("describe", help="members, offsets and lag of a group")
    describe.add_argument("--group", required=True)
    add_bootstrap_argument(describe)
    describe.set_defaults(handler=run_command("groups describe", run_describe))

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets (a dry run unless --execute)"
    )
    reset.add_argument("--group", required=True)
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every partition the group committed"
    )
    scenario = reset.add_mutually_exclusive_group(required=True)
    scenario.add_argument("--to-earliest", action="store_true", help="the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="the log end offset")
    scenario.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (UTC unless a zone is given)",
    )
    scenario.add_argument("--shift-by", type=int, metavar="N", help="committed offset + N")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="this offset")
    scenario.add_argument(
        "--to-current", action="store_true", help="the committed offset, clamped into the log"
    )
    scenario.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="the first offset at or after now minus this duration (P1DT2H, PT30M)",
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_bootstrap_argument(reset)
    reset.set_defaults(handler=run_command("groups reset-offsets", run_reset))

    delete = actions.add_parser("delete", help="delete empty groups and their offsets")
    delete.add_argument("--group", action="append", required=True, help="repeatable")
    add_bootstrap_argument(delete)
    delete.set_defaults(handler=run_command("groups delete", run_delete))


def run(coroutine):
    """Run one library call; its errors become one line with the Kafka error code."""
    try:
        return asyncio.run(coroutine)
    except ops.OpsError as e:
        raise CommandError(f"{e} [{e.error_code.name.upper()}]") from e
    except ValueError as e:  # a malformed --bootstrap-server
        raise CommandError(str(e)) from e


def table(rows: list[tuple[object, ...]], header: tuple[str, ...]) -> None:
    cells = [header, *[tuple("-" if c is None else str(c) for c in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# -- list -------------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    listed = run(
        group_ops.list_groups(
            bootstrap_servers(args),
            states=args.state,
            types=args.type,
            security=client_security(args),
        )
    )
    table(
        [(g.group_id, g.type, g.state, g.protocol_type or '""') for g in listed],
        ("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"),
    )
    return 0


# -- describe ---------------------------------------------------------------------------------


def run_describe(args: argparse.Namespace) -> int:
    report = run(
        group_ops.describe_group(
            bootstrap_servers(args), args.group, security=client_security(args)
        )
    )
    if report.state == "Dead":
        raise CommandError(f"consumer group {args.group!r} does not exist")
    protocol = f"{report.protocol_type or '-'}/{report.protocol or '-'}"
    print(
        f"Group {report.group_id}: {report.state}, protocol {protocol}, coordinator broker "
        f"{report.coordinator}, {len(report.members)} member(s), total lag {report.total_lag}"
    )
    if report.members:
        print()
        table(
            [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_host,
                    m.client_id,
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment) or None,
                )
                for m in report.members
            ],
            ("CONSUMER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"),
        )
    print()
    hosts = {m.member_id: m for m in report.members}
    table(
        [
            (
                report.group_id,
                p.tp.topic,
                p.tp.partition,
                p.committed,
                p.log_end_offset,
                p.lag,
                p.member_id,
                hosts[p.member_id].client_host if p.member_id in hosts else None,
                hosts[p.member_id].client_id if p.member_id in hosts else None,
            )
            for p in report.partitions
        ],
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
    )
    return 0


# -- reset-offsets ----------------------------------------------------------------------------


def parse_topics(values: list[str]) -> dict[str, list[int] | None]:
    """``--topic t`` (every partition) and ``--topic t:0,2`` (some), as Kafka's tool."""
    topics: dict[str, list[int] | None] = {}
    for value in values:
        topic, sep, partitions = value.partition(":")
        if not topic:
            raise CommandError(f"--topic {value!r}: no topic name")
        if not sep:
            topics[topic] = None
            continue
        try:
            indexes = [int(p) for p in partitions.split(",") if p.strip()]
        except ValueError as e:
            raise CommandError(f"--topic {value!r}: partitions must be numbers") from e
        if not indexes or any(i < 0 for i in indexes):
            raise CommandError(f"--topic {value!r}: expected TOPIC:P[,P...]")
        previous = topics.get(topic, [])  # None: every partition already
        topics[topic] = None if previous is None else sorted({*previous, *indexes})
    return topics


def reset_spec(args: argparse.Namespace) -> ResetSpec:
    for name, kind in SCENARIOS.items():
        value = getattr(args, name)
        if value is None or value is False:
            continue
        if kind is ResetKind.DATETIME:
            try:
                if name == "by_duration":
                    return ResetSpec(kind, int(time.time() * 1000) - parse_duration(value))
                return ResetSpec(kind, parse_datetime(value))
            except ValueError as e:
                raise CommandError(str(e)) from e
        if kind is ResetKind.OFFSET and value < 0:
            raise CommandError("--to-offset must be 0 or more")
        return ResetSpec(kind, 0 if value is True else value)
    raise CommandError("a reset scenario is required")


def run_reset(args: argparse.Namespace) -> int:
    spec = reset_spec(args)
    topics = None if args.all_topics else parse_topics(args.topic)
    bootstrap, security = bootstrap_servers(args), client_security(args)
    call = group_ops.reset_offsets if args.execute else group_ops.plan_reset
    planned = run(call(bootstrap, args.group, spec, topics=topics, security=security))
    if not planned:
        print(f"Group {args.group} has no committed offsets to reset (name --topic)")
        return 0
    table(
        [(args.group, r.tp.topic, r.tp.partition, r.committed, r.target) for r in planned],
        ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
    )
    skipped = [r for r in planned if r.target is None]
    for r in skipped:
        print(
            f"{r.tp.topic}-{r.tp.partition}: no committed offset to shift from; left alone",
            file=sys.stderr,
        )
    if not args.execute:
        print("(dry run: nothing changed; add --execute to commit these offsets)")
    return 0


# -- delete -----------------------------------------------------------------------------------


def run_delete(args: argparse.Namespace) -> int:
    results = run(
        group_ops.delete_groups(bootstrap_servers(args), args.group, security=client_security(args))
    )
    deleted = [g for g, code in results.items() if code == ErrorCode.none]
    failed = {g: code for g, code in results.items() if code != ErrorCode.none}
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for group_id, code in failed.items():
        print(f"Group '{group_id}' could not be deleted: {_why(code)}", file=sys.stderr)
    if failed:
        raise CommandError(f"{len(failed)} group(s) not deleted")
    return 0


def _why(code: ErrorCode) -> str:
    reasons = {
        ErrorCode.group_id_not_found: "the group does not exist",
        ErrorCode.non_empty_group: "the group has members (stop its consumers first)",
        ErrorCode.invalid_group_id: "the group id is invalid",
    }
    return f"{reasons.get(code, code.name)} [{code.name.upper()}]"
