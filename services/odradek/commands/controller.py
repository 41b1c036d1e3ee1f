"""``odradek controller``: run a controller candidate until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging

from odradek.config.controller import ControllerConfig
from odradek.config.properties import parse_overrides
from odradek.controller.app import ControllerApp
from odradek.errors import InvalidConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="run a controller (one of them is active)")
    parser.add_argument("--config", help="a controller.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration value over the file's (repeatable)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = ControllerConfig.load(args.config, parse_overrides(args.override))
    except (InvalidConfigError, OSError) as e:
        print(f"odradek controller: {e}")
        return 2
    logging.getLogger("odradek").setLevel(logging.INFO)
    asyncio.run(ControllerApp(config).run())
    return 0
