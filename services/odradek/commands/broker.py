"""``odradek broker``: run a broker until SIGTERM (configuration as Kafka's server.properties)."""

from __future__ import annotations

import argparse

from odradek.commands.service import add_service_parser
from odradek.config.broker import BrokerConfig


async def _run(config: BrokerConfig) -> None:
    from odradek.broker.app import BrokerApp  # heavy: only for this command, not every CLI call

    await BrokerApp(config).run()


def _load(path: str | None, overrides: dict[str, str]) -> BrokerConfig:
    """The config, with broker.rack from odradek.broker.rack.file once that file has it; the
    SSL listeners' key and trust stores are loaded once here, so a bad one is refused (exit 2,
    with the message) before anything starts."""
    from odradek.security.tls import listener_tls

    config = BrokerConfig.load(path, overrides)
    listener_tls(config)
    return config.with_rack_from_file()


def register(subparsers: argparse._SubParsersAction) -> None:
    add_service_parser(subparsers, "broker", "run a broker", _load, _run)
