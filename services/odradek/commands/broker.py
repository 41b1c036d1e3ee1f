"""``odradek broker``: run a broker until SIGTERM (configuration as Kafka's server.properties)."""

from __future__ import annotations

import argparse
import asyncio
import logging

from odradek.broker.app import BrokerApp
from odradek.config.broker import BrokerConfig
from odradek.config.properties import parse_overrides
from odradek.errors import InvalidConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("broker", help="run a broker")
    parser.add_argument("--config", help="a server.properties file")
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
        config = BrokerConfig.load(args.config, parse_overrides(args.override))
    except (InvalidConfigError, OSError) as e:
        print(f"odradek broker: {e}")
        return 2
    logging.getLogger("odradek").setLevel(logging.INFO)
    asyncio.run(BrokerApp(config).run())
    return 0
