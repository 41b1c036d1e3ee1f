"""A Connect worker process: ``odradek connect standalone`` and ``odradek connect distributed``.

Standalone (``run_standalone``), in order: the plugins are found; the REST listener is bound
first (``listeners``; port 0 picks one) so the worker id (``rest.advertised.host.name:port``)
is known before anything reports a status; the cluster id is asked of the brokers (bounded;
unknown if they do not answer; credentials they refuse stop the start with exit code 1); the
worker, its file offset store and in-memory statuses are made; the REST API starts serving; the
connectors given on the command line are created, in order (one that is refused stops the
process with its reason, as Kafka's ``ConnectStandalone`` does). It then runs until SIGTERM
or SIGINT: the REST listener closes, every task and connector stops (tasks commit their offsets
as they stop), all within ``STOP_TIMEOUT_S``; past it the process exits at once with code 1 (a
plugin stuck in its thread cannot be interrupted).

Connector files (``read_connector_file``): a ``.properties`` file read by the project's own
reader (``odradek.config.properties``), or a ``.json`` file holding either the config map or
``{"name": ..., "config": {...}}`` (the body of ``POST /connectors``), checked as the REST API
checks bodies.

Logs go to stderr (``odradek.cli`` configures logging).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.connect.api import ConfigException
from odradek.connect.herder import BadRequestError, HerderError
from odradek.connect.rest import bodies
from odradek.connect.rest import security as rest_security
from odradek.connect.rest.catalog import PluginsCatalog
from odradek.connect.rest.security import RestSecurity
from odradek.connect.rest.server import (
    advertised_address,
    bind_listener,
    listener_scheme,
    parse_listener,
    start_rest_server,
)
from odradek.connect.worker_config import WorkerConfig
from odradek.observability.metrics import connect_rest_metrics, new_registry

__all__ = [
    "CLUSTER_ID_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "ConnectorFileError",
    "read_connector_file",
    "run_standalone",
]

log = logging.getLogger(__name__)

CLUSTER_ID_TIMEOUT_S = 10.0  # how long the start waits for the brokers to name their cluster
STOP_TIMEOUT_S = 60.0  # the whole stop: REST listener, tasks, connectors, clients
CONNECTOR_FILE_MAX_BYTES = PROPERTIES_FILE_MAX_BYTES


class ConnectorFileError(ValueError):
    """A connector file given on the command line that cannot be used (the message says why)."""


def read_connector_file(path: str) -> tuple[str, dict[str, str]]:
    """(name, config) of a ``.properties`` or ``.json`` connector file."""
    file = Path(path)
    try:
        if file.stat().st_size > CONNECTOR_FILE_MAX_BYTES:
            raise ConnectorFileError(f"{path}: larger than {CONNECTOR_FILE_MAX_BYTES} bytes")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConnectorFileError(f"{path}: {exc}") from exc
    try:
        if file.suffix == ".json":
            document = bodies.decode_json(text.encode())
            if isinstance(document, dict) and isinstance(document.get("config"), dict):
                name, config, _ = bodies.parse_create(document)
                return name, config
            config = bodies.parse_config(document, where="the file")
        else:
            config = {p.key: p.value for p in parse_properties(text, source=path)}
        name = bodies.check_connector_name(config.get("name"), where='"name"')
        return name, bodies.with_name(name, config)
    except HerderError as exc:
        raise ConnectorFileError(f"{path}: {exc.message}") from exc
    except ValueError as exc:  # the properties reader's own errors
        raise ConnectorFileError(f"{path}: {exc}") from exc


class ClusterAuthenticationError(Exception):
    """The brokers refused the worker's credentials: a start cannot go on (retrying cannot
    make a wrong password right). The message is librdkafka's, which holds no secret."""


def _cluster_id(config: WorkerConfig) -> str | None:
    """The cluster id (None if the brokers do not answer in time: the worker runs and GET /
    says it is unknown); ``ClusterAuthenticationError`` if they refuse the credentials."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    refused: list[str] = []

    def on_error(error: KafkaError) -> None:  # librdkafka's thread: only records
        if error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            refused.append(error.str())

    admin = AdminClient({**config.admin_config(), "error_cb": on_error})
    try:
        return admin.list_topics(timeout=CLUSTER_ID_TIMEOUT_S).cluster_id
    except Exception as exc:  # noqa: BLE001 - the worker runs; GET / says the id is unknown
        admin.poll(0)  # librdkafka hands errors to error_cb in poll only
        if refused:
            raise ClusterAuthenticationError(
                f"the Kafka cluster refused the worker's credentials: {refused[0]}"
            ) from exc
        log.warning("could not read the Kafka cluster id: %s", exc)
        return None


def _validator(plugins: Any, config: WorkerConfig):
    """``validate_connector_config`` bound to ``plugins`` and the worker's client override
    checks (``WorkerConfig.override_errors``): what a herder validates with; a missing or
    unknown ``connector.class`` is a ``BadRequestError`` naming it."""
    from odradek.connect.connector_config import validate_connector_config

    def validate(props: Mapping[str, str]) -> dict[str, Any]:
        try:
            return validate_connector_config(plugins, props, config.override_errors(props))
        except ConfigException as exc:  # no connector class to validate against: Kafka's 400
            raise BadRequestError(str(exc)) from exc

    return validate


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


@dataclass(frozen=True)
class _RestListener:
    """The REST listener, bound before anything else: its port is part of the worker id."""

    sock: socket.socket
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    security: RestSecurity

    @property
    def worker_id(self) -> str:
        return f"{self.advertised_host}:{self.advertised_port}"

    @property
    def url(self) -> str:
        return f"{self.security.scheme}://{self.worker_id}"


def _bind_rest(config: WorkerConfig) -> _RestListener:
    """Bind ``listeners`` (port 0 picks one) and work out the advertised address; the REST
    security's files are read first (``ConfigException`` naming a key)."""
    host, port = parse_listener(config.get("listeners"))
    security = rest_security.load(
        config.props, listener_scheme(config.get("listeners")), os.environ
    )
    sock = bind_listener(host, port)
    try:
        bound_port = sock.getsockname()[1]
        advertised_host, advertised_port = advertised_address(
            host,
            bound_port,
            config.get("rest.advertised.host.name"),
            config.get("rest.advertised.port"),
        )
    except BaseException:
        sock.close()
        raise
    return _RestListener(sock, host, bound_port, advertised_host, advertised_port, security)


async def _serve_rest(herder: Any, plugins: Any, listener: _RestListener) -> Any:
    """The REST API of ``herder`` serving on the bound listener, with its metrics."""
    registry = new_registry()
    return await start_rest_server(
        herder,
        PluginsCatalog(plugins),
        host=listener.host,
        port=listener.port,
        advertised_host=listener.advertised_host,
        advertised_port=listener.advertised_port,
        metrics=connect_rest_metrics(registry),
        registry=registry,
        sock=listener.sock,
        security=listener.security,
    )


async def _stop_within(server: Any, herder: Any) -> bool:
    """Close the REST listener, then the herder (its work here); False when that overran
    ``STOP_TIMEOUT_S`` (the caller decides how to exit)."""
    try:
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await server.stop()
            await herder.close()
    except TimeoutError:
        return False
    log.info("stopped")
    return True


async def run_standalone(
    config: WorkerConfig, connector_files: list[tuple[str, dict[str, str]]]
) -> int:
    """Run a standalone worker until SIGTERM/SIGINT; the exit code (0, or 1 if the brokers refused
    the worker's credentials or a connector given on the command line was refused; a stop that
    overruns ``STOP_TIMEOUT_S`` exits with 1 at once)."""
    from odradek.connect.plugins import Plugins
    from odradek.connect.runtime.offsets import FileOffsetStore
    from odradek.connect.runtime.status import MemoryStatusListener
    from odradek.connect.runtime.worker import Worker
    from odradek.connect.sink_offsets import SinkOffsets
    from odradek.connect.standalone import StandaloneHerder

    stop = _stop_event()
    plugins = Plugins()
    listener = _bind_rest(config)
    try:
        worker_id = listener.worker_id
        try:
            cluster_id = await asyncio.to_thread(_cluster_id, config)
        except ClusterAuthenticationError as exc:
            log.error("%s", exc)
            listener.sock.close()
            return 1
        status = MemoryStatusListener()
        offset_store = FileOffsetStore(config.offset_storage_file)
        worker = Worker(config, plugins, offset_store, status, worker_id=worker_id)
        herder = StandaloneHerder(
            worker,
            status,
            offset_store,
            worker_id=worker_id,
            validate=_validator(plugins, config),
            sink_offsets=SinkOffsets(config.admin_config()),
            kafka_cluster_id=cluster_id,
        )
        server = await _serve_rest(herder, plugins, listener)
    except BaseException:
        listener.sock.close()  # nothing else was started yet
        raise
    log.info("standalone worker %s serving the REST API at %s", worker_id, server.advertised_url)
    code = 0
    try:
        for name, connector_config in connector_files:
            try:
                await herder.put_connector_config(name, connector_config, allow_replace=False)
            except HerderError as exc:
                log.error("connector %s refused: %s", name, exc.message)
                code = 1
                return code
            log.info("connector %s created", name)
        await stop.wait()
        log.info("stopping: signal received")
        return code
    finally:
        if not await _stop_within(server, herder):
            # Plugin code stuck in a thread cannot be interrupted, and the interpreter would wait
            # for it at exit (the executors' threads are joined): the bound holds only by
            # leaving now.
            log.error(
                "the stop took longer than %.0f s (STOP_TIMEOUT_S); exiting without waiting for "
                "the threads still running",
                STOP_TIMEOUT_S,
            )
            logging.shutdown()
            os._exit(1)
