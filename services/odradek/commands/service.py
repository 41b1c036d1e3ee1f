"""What ``odradek broker`` and ``odradek controller`` share: a properties file, overrides, a run.

Both read Kafka-style ``.properties`` configuration (``--config FILE``) with ``--override
key=value`` on top, as Kafka's start scripts do, then run their service until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from odradek.config.properties import parse_overrides
from odradek.errors import InvalidConfigError


def add_service_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    help_text: str,
    load: Callable[..., Any],
    run: Callable[[Any], Coroutine[Any, Any, None]],
) -> None:
    """``odradek NAME [--config FILE] [--override k=v ...]``: load the config, run the service."""
    parser = subparsers.add_parser(name, help=help_text)
    parser.add_argument("--config", help=f"a {name}.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration value over the file's (repeatable)",
    )

    def handler(args: argparse.Namespace) -> int:
        try:
            config = load(args.config, parse_overrides(args.override))
        except (InvalidConfigError, OSError) as e:
            print(f"odradek {name}: {e}")
            return 2
        logging.getLogger("odradek").setLevel(logging.INFO)
        asyncio.run(run(config))
        return 0

    parser.set_defaults(handler=handler)
