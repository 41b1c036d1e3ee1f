"""``odradek controller``: run a controller candidate until SIGTERM."""

from __future__ import annotations

import argparse

from odradek.commands.service import add_service_parser
from odradek.config.controller import ControllerConfig


async def _run(config: ControllerConfig) -> None:
    from odradek.controller.app import ControllerApp  # heavy: only for this command

    await ControllerApp(config).run()


def register(subparsers: argparse._SubParsersAction) -> None:
    add_service_parser(
        subparsers,
        "controller",
        "run a controller (one of them is active)",
        ControllerConfig.load,
        _run,
    )
