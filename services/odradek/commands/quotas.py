"""``odradek quotas``: client quotas, as ``kafka-configs.sh`` sets and shows them.

    odradek quotas --alter --add-config producer_byte_rate=1024 \
        --entity-type users --entity-name alice
    odradek quotas --alter --delete-config producer_byte_rate \
        --entity-type clients --entity-default
    odradek quotas --alter --add-config controller_mutation_rate=10 \
        --entity-type users --entity-name alice
    odradek quotas --describe [--entity-type users [--entity-name alice | --entity-default]]

The keys are Kafka's: ``producer_byte_rate``, ``consumer_byte_rate`` (LONG),
``request_percentage`` and ``controller_mutation_rate`` (DOUBLE; partitions created, added or
deleted per second). ``--entity-type`` (``users``, ``clients``) may be given twice, for a user's
client; each is followed by its ``--entity-name`` or ``--entity-default``, paired in order. Sent as
AlterClientQuotas and DescribeClientQuotas with Odradek's own client (confluent-kafka has no
client quota API), over TLS with ``--command-config``'s SSL settings (no SASL yet); a
refused entry prints the broker's error and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.security import ClientSecurity
from odradek.commands.common import (
    CommandError,
    add_bootstrap_argument,
    bootstrap_servers,
    client_security,
)
from odradek.commands.common import run_command as command
from odradek.ops.errors import OpsError

ALTER_CLIENT_QUOTAS = 49
DESCRIBE_CLIENT_QUOTAS = 48
ENTITY_TYPES = {"users": "user", "clients": "client-id"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("quotas", help="set and show client quotas (kafka-configs.sh)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change an entity's quotas")
    action.add_argument("--describe", action="store_true", help="show quotas")
    parser.add_argument(
        "--entity-type", action="append", choices=sorted(ENTITY_TYPES), default=[], dest="types"
    )
    parser.add_argument("--entity-name", action="append", dest="names", metavar="NAME")
    parser.add_argument(
        "--entity-default", action="append_const", const=None, dest="names", help="<default>"
    )
    parser.add_argument(
        "--add-config",
        default="",
        metavar="K=V,...",
        help="producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate",
    )
    parser.add_argument("--delete-config", default="", metavar="K,...")
    add_bootstrap_argument(parser)
    parser.set_defaults(handler=command("quotas", run_quotas))


def entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    names = args.names or []
    if len(names) != len(args.types):
        raise CommandError("give each --entity-type one --entity-name or --entity-default")
    return [(ENTITY_TYPES[t], n) for t, n in zip(args.types, names, strict=True)]


def parse_ops(add: str, delete: str) -> list[tuple[str, float | None]]:
    ops: list[tuple[str, float | None]] = []
    for item in filter(None, (s.strip() for s in add.split(","))):
        key, sep, value = item.partition("=")
        try:
            ops.append((key.strip(), float(value)))
        except ValueError:
            sep = ""
        if not sep:
            raise CommandError(f"--add-config {item!r} is not KEY=NUMBER")
    ops.extend((key.strip(), None) for key in delete.split(",") if key.strip())
    if not ops:
        raise CommandError("--alter needs --add-config or --delete-config")
    return ops


def run_quotas(args: argparse.Namespace) -> int:
    parts = entity(args)
    bootstrap = bootstrap_servers(args)
    security = client_security(args)
    if args.alter:
        if not parts:
            raise CommandError("--alter needs --entity-type with --entity-name or --entity-default")
        ops = parse_ops(args.add_config, args.delete_config)
        return _run(_alter(bootstrap, security, parts, ops))
    return _run(_describe(bootstrap, security, parts))


def _run(coroutine) -> int:
    try:
        return asyncio.run(coroutine)
    except OpsError as e:
        raise CommandError(str(e)) from e
    except ValueError as e:  # a malformed --bootstrap-server
        raise CommandError(str(e)) from e


def _show(parts: list[tuple[str, str | None]]) -> str:
    return ", ".join(
        f"{kind} {'<default>' if name is None else repr(name)}" for kind, name in parts
    )


async def _alter(bootstrap: str, security: ClientSecurity | None, parts, ops) -> int:
    def make(request_type):
        entry_type = element_type(request_type, "entries")
        entity_type = element_type(entry_type, "entity")
        op_type = element_type(entry_type, "ops")
        entry = build(
            entry_type,
            entity=tuple(build(entity_type, entity_type=k, entity_name=n) for k, n in parts),
            ops=tuple(
                build(op_type, key=key, value=value or 0.0, remove=value is None)
                for key, value in ops
            ),
        )
        return build(request_type, entries=(entry,), validate_only=False)

    async with ClusterClient(bootstrap, security=security) as client:
        response = await client.send_any(ALTER_CLIENT_QUOTAS, 1, make)
    [entry] = response.entries
    if entry.error_code:
        print(f"odradek quotas: error {entry.error_code}: {entry.error_message}", file=sys.stderr)
        return 1
    print(f"Completed updating quotas for {_show(parts)}.")
    return 0


async def _describe(bootstrap: str, security: ClientSecurity | None, parts) -> int:
    def make(request_type):
        component_type = element_type(request_type, "components")
        components = tuple(
            build(
                component_type,
                entity_type=kind,
                match_type=MATCH_DEFAULT if name is None else MATCH_EXACT,
                match=name,
            )
            for kind, name in parts
        )
        return build(request_type, components=components, strict=bool(parts))

    async with ClusterClient(bootstrap, security=security) as client:
        response = await client.send_any(DESCRIBE_CLIENT_QUOTAS, 1, make)
    if response.error_code:
        print(
            f"odradek quotas: error {response.error_code}: {response.error_message}",
            file=sys.stderr,
        )
        return 1
    for entry in response.entries or ():
        found = [(e.entity_type, e.entity_name) for e in entry.entity]
        values = ", ".join(
            f"{v.key}={v.value:g}" for v in sorted(entry.values, key=lambda v: v.key)
        )
        print(f"Quota configs for {_show(found)} are {values}")
    return 0
