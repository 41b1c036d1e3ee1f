"""``odradek connect standalone|distributed``: a Kafka Connect worker (``odradek.connect``).

- ``standalone WORKER.properties [CONNECTOR.properties|CONNECTOR.json ...]``: one worker, the
  connectors given here plus those created over REST, source offsets in
  ``offset.storage.file.filename`` (Kafka's ``connect-standalone.sh``);
- ``distributed WORKER.properties``: a worker of the group ``group.id``, its state in the
  internal topics (Kafka's ``connect-distributed.sh``).

Worker files use Kafka Connect's keys (``odradek.connect.worker_config``); ``--override
key=value`` sets one on top of the file. A file or key that cannot be used is reported in one
line on stderr with exit code 2; a listener that cannot be bound or an offsets file that cannot
be read, with exit code 1. SIGTERM or SIGINT stops the worker gracefully (tasks and
connectors stopped, offsets flushed) within ``odradek.connect.process.STOP_TIMEOUT_S``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_overrides, parse_properties
from odradek.errors import InvalidConfigError


def _worker_config(path: str, overrides: list[str], *, distributed: bool):
    from odradek.connect.worker_config import WorkerConfig

    file = Path(path)
    if file.stat().st_size > PROPERTIES_FILE_MAX_BYTES:
        raise InvalidConfigError(f"{path}: larger than {PROPERTIES_FILE_MAX_BYTES} bytes")
    props = {p.key: p.value for p in parse_properties(file.read_text("utf-8"), source=path)}
    props.update(parse_overrides(overrides))
    return WorkerConfig(props, distributed=distributed)


def _fail(mode: str, message: object) -> int:
    print(f"odradek connect {mode}: {message}", file=sys.stderr)
    return 2


def _standalone(args: argparse.Namespace) -> int:
    from odradek.connect.api import ConfigException
    from odradek.connect.process import ConnectorFileError, read_connector_file, run_standalone
    from odradek.connect.runtime.offsets import OffsetStoreError

    try:
        config = _worker_config(args.worker_config, args.override, distributed=False)
        connectors = [read_connector_file(path) for path in args.connector_configs]
    except (InvalidConfigError, ConfigException, ConnectorFileError, OSError, ValueError) as e:
        return _fail("standalone", e)
    names = [name for name, _ in connectors]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        return _fail("standalone", f"connector(s) given twice: {', '.join(duplicated)}")
    logging.getLogger("odradek").setLevel(logging.INFO)
    try:
        return asyncio.run(run_standalone(config, connectors))
    except (OSError, OffsetStoreError, ValueError) as e:  # the listener, the offsets file
        print(f"odradek connect standalone: could not start: {e}", file=sys.stderr)
        return 1


def _distributed(args: argparse.Namespace) -> int:
    from odradek.connect.api import ConfigException

    try:
        config = _worker_config(args.worker_config, args.override, distributed=True)
    except (InvalidConfigError, ConfigException, OSError, ValueError) as e:
        return _fail("distributed", e)
    try:
        from odradek.connect.distributed.herder import run
    except ImportError as e:
        return _fail("distributed", f"distributed mode is not available in this build: {e}")
    logging.getLogger("odradek").setLevel(logging.INFO)
    try:
        result = asyncio.run(run(config))
    except (OSError, ValueError, InvalidConfigError) as e:  # the listener, TLS and auth files
        print(f"odradek connect distributed: could not start: {e}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("connect", help="run a Kafka Connect worker")
    modes = parser.add_subparsers(dest="mode", required=True, metavar="MODE")

    def override(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--override",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a worker configuration value over the file's (repeatable)",
        )

    standalone = modes.add_parser("standalone", help="one worker, connectors from files and REST")
    standalone.add_argument("worker_config", metavar="WORKER.properties")
    standalone.add_argument(
        "connector_configs",
        nargs="*",
        metavar="CONNECTOR.properties|CONNECTOR.json",
        help="connectors to create at start",
    )
    override(standalone)
    standalone.set_defaults(handler=_standalone)

    distributed = modes.add_parser("distributed", help="a worker of a group (group.id)")
    distributed.add_argument("worker_config", metavar="WORKER.properties")
    override(distributed)
    distributed.set_defaults(handler=_distributed)
