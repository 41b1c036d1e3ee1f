"""What ``odradek topics``, ``produce`` and ``consume`` share: where the cluster is, how errors and
rates are reported.

These commands are thin shells around confluent-kafka (librdkafka), the client most Kafka users
run, so they exercise the broker the way users will. ``--bootstrap-server`` defaults to the local
cluster that ``odradek local up`` recorded in ``var/local/cluster.json``; without one, the user
must name a cluster, as Kafka's tools require. ``--command-config FILE`` (next to it on every
command) is Kafka's client properties file (``client_properties``): its security settings go
into every client, its ``bootstrap.servers`` stands in for a missing ``--bootstrap-server``;
without either option, a local cluster started with ``--security sasl_ssl`` is reached with
its ``client.properties``. The commands on Odradek's own client take an ``ssl.SSLContext`` from
it (``client_security``: TLS, SASL PLAIN or SCRAM).

A command fails by raising ``CommandError``; ``run_command`` turns that into one line on stderr
and exit code 1. A cluster that cannot be reached (no broker answers at the bootstrap address) is
one such line, naming the address and what to do next, whichever call found it out.
librdkafka's own log lines go through Python's ``logging`` and are shown only with ``-v``, so a
broker restart or a wrong address does not spray connection notices over a command's output.

Ctrl-C: librdkafka calls back into Python (delivery reports, log lines) from inside ``poll()``
and ``consume()``; a ``KeyboardInterrupt`` raised in such a callback comes out as a
``SystemError``, and the command's summary is lost. The loops therefore run inside
``SigintFlag``, which turns SIGINT into a flag they check: they stop, finish what is in flight
(bounded), and print their summary.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from odradek.client.security import ClientSecurity
from odradek.commands import client_properties
from odradek.commands.client_properties import ClientProperties
from odradek.commands.invocation import odradek_command
from odradek.errors import InvalidConfigError
from odradek.local.cluster import ClusterState

LOCAL_DATA_DIR = Path("var/local")
REQUEST_TIMEOUT_S = 15.0
PROGRESS_INTERVAL_S = 1.0
MIB = 1024 * 1024

librdkafka_logger = logging.getLogger("odradek.librdkafka")
# librdkafka's errors that mean no broker at the bootstrap address answered.
UNREACHABLE_ERRORS = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
}


class CommandError(Exception):
    """A failure the user can act on; its message is printed as is."""


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"brokers to connect to (default: the local cluster in {LOCAL_DATA_DIR})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        help="a Kafka client properties file: security settings, bootstrap.servers (default: "
        f"{LOCAL_DATA_DIR}/client.properties when the local cluster is secured)",
    )


def command_config(args: argparse.Namespace) -> ClientProperties:
    """``--command-config``, else the secured local cluster's ``client.properties`` when no
    ``--bootstrap-server`` is given, else nothing (PLAINTEXT)."""
    path = getattr(args, "command_config", None)
    if path is None and not getattr(args, "bootstrap_server", None):
        state = ClusterState.read(LOCAL_DATA_DIR.absolute())
        if state is not None and state.security != "plaintext":
            path = LOCAL_DATA_DIR / "client.properties"
    if path is None:
        return ClientProperties()
    try:
        return client_properties.load(Path(path))
    except InvalidConfigError as e:
        if getattr(args, "command_config", None) is None:  # the local cluster's, by default
            raise CommandError(
                f"the local cluster in {LOCAL_DATA_DIR} is secured and its client settings "
                f"cannot be used ({e}): pass --command-config FILE"
            ) from e
        raise CommandError(str(e)) from e


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """TLS and SASL for a command on Odradek's own client, from the same settings."""
    try:
        return command_config(args).client_security()
    except InvalidConfigError as e:
        raise CommandError(str(e)) from e


def bootstrap_servers(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else ``bootstrap.servers`` of ``--command-config``, else the
    running local cluster's, else a ``CommandError``."""
    if args.bootstrap_server:
        return args.bootstrap_server
    if getattr(args, "command_config", None) is not None:
        from_file = command_config(args).bootstrap_servers
        if from_file:
            return from_file
    state = ClusterState.read(LOCAL_DATA_DIR.absolute())
    if state is None:
        raise CommandError(
            "no --bootstrap-server given and no local cluster found in "
            f"{LOCAL_DATA_DIR}: pass --bootstrap-server HOST:PORT or run "
            f"`{odradek_command()} local up`"
        )
    if not any(m.role == "broker" and m.is_ours() for m in state.members):
        raise CommandError(
            f"the local cluster in {LOCAL_DATA_DIR} is not running: start it with "
            f"`{odradek_command()} local up` or pass --bootstrap-server HOST:PORT"
        )
    return state.bootstrap_servers


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings common to every client these commands create."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "odradek-cli",
        # Metadata for a topic must never create it (``delete`` polls a topic it just deleted).
        "allow.auto.create.topics": False,
        "logger": librdkafka_logger,
        **extra,
    }


def args_client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """``client_config`` for the cluster the command's options name, with its security
    settings (``--command-config``, or the secured local cluster's)."""
    return client_config(bootstrap_servers(args), **{**command_config(args).librdkafka, **extra})


def show_librdkafka_log(verbose: bool) -> None:
    """librdkafka's log lines reach the console only with ``-v``: the command itself reports
    what went wrong, in one line."""
    librdkafka_logger.setLevel(logging.DEBUG if verbose else logging.CRITICAL + 1)


def unreachable(bootstrap: str, cause: str) -> CommandError:
    """The one line for a cluster that does not answer: where we looked, and what to do."""
    return CommandError(
        f"cannot reach a broker at {bootstrap} ({cause}): check --bootstrap-server, or run "
        f"`{odradek_command()} local status` to see the local cluster's address"
    )


def describe_kafka_error(error: KafkaError | KafkaException | BaseException) -> str:
    """The broker's message if it sent one, with the error's name: what a user needs to act."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.str()} ({error.name()})"
    return str(error)


def error_code(error: BaseException | None) -> int | None:
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
            # A command that put a librdkafka error in its own words still names the address
            # when the cause was that no broker answered.
            if error_code(e.__cause__) in UNREACHABLE_ERRORS:
                e = unreachable(_bootstrap_or_default(args), describe_kafka_error(e.__cause__))
            print(f"odradek {name}: error: {e}", file=sys.stderr)
            return 1
        except KafkaException as e:
            if error_code(e) in UNREACHABLE_ERRORS:
                e = unreachable(_bootstrap_or_default(args), describe_kafka_error(e))
            else:
                e = describe_kafka_error(e)
            print(f"odradek {name}: error: {e}", file=sys.stderr)
            return 1
        except concurrent.futures.TimeoutError:  # an AdminClient future: no answer in time
            e = unreachable(_bootstrap_or_default(args), f"no answer in {REQUEST_TIMEOUT_S:.0f} s")
            print(f"odradek {name}: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130

    return handler


def _bootstrap_or_default(args: argparse.Namespace) -> str:
    try:
        return bootstrap_servers(args)
    except CommandError:
        return "the bootstrap address"


class SigintFlag:
    """Within ``with SigintFlag() as interrupt:``, Ctrl-C sets ``interrupt.requested`` (a second
    one ``interrupt.forced``) instead of raising ``KeyboardInterrupt``; the previous handler is
    back afterwards. Main thread only (as every signal handler)."""

    def __init__(self) -> None:
        self.requested = False
        self.forced = False
        self._previous: Any = None

    def __enter__(self) -> SigintFlag:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, _signum: int, _frame: object) -> None:
        if self.requested:
            self.forced = True
        self.requested = True


def list_topic_names(admin: AdminClient, timeout_s: float = REQUEST_TIMEOUT_S) -> list[str]:
    """Every topic in the cluster, sorted."""
    return sorted(admin.list_topics(timeout=timeout_s).topics)


def topic_partitions(client: Any, topic: str, timeout_s: float = REQUEST_TIMEOUT_S) -> list[int]:
    """The topic's partition ids from ``client``'s Metadata (any librdkafka client), sorted;
    a ``CommandError`` if the cluster does not know the topic (a ``KafkaException`` if it
    cannot be reached)."""
    try:
        metadata = client.list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as e:
        if error_code(e) in UNREACHABLE_ERRORS:
            raise  # run_command says so, with the address
        raise CommandError(f"cannot read the cluster's metadata: {describe_kafka_error(e)}") from e
    found = metadata.topics.get(topic)
    if found is None or (found.error and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise CommandError(f"topic {topic!r} does not exist")
    if found.error is not None or not found.partitions:
        reason = describe_kafka_error(found.error) if found.error else "no partitions"
        raise CommandError(f"topic {topic!r}: {reason}")
    return sorted(found.partitions)


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
