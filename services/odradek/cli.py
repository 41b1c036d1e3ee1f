"""The ``odradek`` command: one entry point, one module per subcommand under ``commands``.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` to a function taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from odradek import __version__
from odradek.commands import (
    acls,
    broker,
    cluster,
    common,
    connect,
    consume,
    controller,
    demo,
    groups,
    leaders,
    local,
    produce,
    quotas,
    reassign,
    storage_demo,
    topics,
    transactions,
    users,
)

COMMANDS = (
    demo,
    storage_demo,
    broker,
    controller,
    local,
    topics,
    leaders,
    produce,
    consume,
    reassign,
    quotas,
    cluster,
    groups,
    transactions,
    acls,
    users,
    connect,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek",
        description="A partitioned, replicated commit log that speaks the Kafka protocol.",
    )
    parser.add_argument("--version", action="version", version=f"odradek {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    common.show_librdkafka_log(args.verbose)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
