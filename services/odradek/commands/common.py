"""What ``odradek topics``, ``produce`` and ``consume`` share: where the cluster is, how errors and
rates are reported.

These commands are thin shells around confluent-kafka (librdkafka), the client most Kafka users
run, so they exercise the broker the way users will. ``--bootstrap-server`` defaults to the local
cluster that ``odradek local up`` recorded in ``var/local/cluster.json``; without one, the user
must name a cluster, as Kafka's tools require.

A command fails by raising ``CommandError``; ``run_command`` turns that into one line on stderr
and exit code 1. librdkafka's own log lines go through Python's ``logging`` (shown with ``-v``),
so a broker restart does not spray connection notices over a command's output.

One workaround lives here: librdkafka (up to 2.16 at least, librdkafka issue #5049) encodes the
"all topics" Metadata request of flexible versions with a 4-byte null array where a 1-byte varint
belongs, leaving 3 stray bytes at the end of the request. Apache Kafka ignores trailing bytes; our
broker closes the connection. ``list_topic_names`` therefore asks for all topics with Odradek's
own client (``odradek.client``); every other request goes through librdkafka.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import KafkaError, KafkaException

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.local.cluster import ClusterState, pid_alive
from odradek.protocol import schemas

LOCAL_DATA_DIR = Path("var/local")
REQUEST_TIMEOUT_S = 15.0
PROGRESS_INTERVAL_S = 1.0
MIB = 1024 * 1024
METADATA_API_KEY = 3
METADATA_VERSION = 1  # the oldest version with a nullable topic array ("all topics")

librdkafka_logger = logging.getLogger("odradek.librdkafka")


class CommandError(Exception):
    """A failure the user can act on; its message is printed as is."""


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"brokers to connect to (default: the local cluster in {LOCAL_DATA_DIR})",
    )


def bootstrap_servers(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else the running local cluster's, else a ``CommandError``."""
    if args.bootstrap_server:
        return args.bootstrap_server
    state = ClusterState.read(LOCAL_DATA_DIR.absolute())
    if state is None:
        raise CommandError(
            "no --bootstrap-server given and no local cluster found in "
            f"{LOCAL_DATA_DIR}: pass --bootstrap-server HOST:PORT or run `odradek local up`"
        )
    if not any(m.role == "broker" and pid_alive(m.pid) for m in state.members):
        raise CommandError(
            f"the local cluster in {LOCAL_DATA_DIR} is not running: start it with "
            "`odradek local up` or pass --bootstrap-server HOST:PORT"
        )
    return state.bootstrap_servers


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings common to every client these commands create."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "odradek-cli",
        "logger": librdkafka_logger,
        **extra,
    }


def describe_kafka_error(error: KafkaError | KafkaException | BaseException) -> str:
    """The broker's message if it sent one, with the error's name: what a user needs to act."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.str()} ({error.name()})"
    return str(error)


def error_code(error: BaseException) -> int | None:
    """The Kafka error code inside a ``KafkaException``, if any."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].code()
    return None


def run_command(
    name: str, body: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """Wrap a handler: ``CommandError`` and librdkafka errors become a line on stderr and 1."""

    def handler(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except CommandError as e:
            print(f"odradek {name}: error: {e}", file=sys.stderr)
            return 1
        except KafkaException as e:
            print(f"odradek {name}: error: {describe_kafka_error(e)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130

    return handler


def list_topic_names(bootstrap: str, timeout_s: float = REQUEST_TIMEOUT_S) -> list[str]:
    """Every topic in the cluster, sorted (see the module docstring for why not librdkafka)."""
    errors = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            return sorted(asyncio.run(_all_topic_names(host, int(port), timeout_s)))
        except (ClientError, OSError, ValueError) as e:
            errors.append(f"{address}: {e}")
    raise CommandError(f"no broker answered Metadata: {'; '.join(errors)}")


async def _all_topic_names(host: str, port: int, timeout_s: float) -> list[str]:
    request = schemas.request_schema(METADATA_API_KEY, METADATA_VERSION)(topics=None)
    async with await BrokerConnection.open(host, port, connect_timeout_s=timeout_s) as conn:
        response = await conn.send(request, timeout_s=timeout_s)
    return [t.name for t in response.topics if t.error_code == 0]


def mib(n_bytes: int) -> float:
    return n_bytes / MIB


class Progress:
    """Prints a line to ``out`` at most every ``interval_s``; ``due()`` is cheap to call often."""

    def __init__(self, out: TextIO = sys.stderr, interval_s: float = PROGRESS_INTERVAL_S):
        self.out = out
        self.interval_s = interval_s
        self.started_s = time.monotonic()
        self._next_s = self.started_s + interval_s

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next_s:
            return False
        self._next_s = now + self.interval_s
        return True

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)
