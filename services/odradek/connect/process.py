"""A Connect worker process: ``odradek connect standalone`` and ``odradek connect distributed``.

Standalone (``run_standalone``), in order: the plugins are found; the REST listener is bound
first (``listeners``; port 0 picks one) so the worker id (``rest.advertised.host.name:port``)
is known before anything reports a status; the worker, its file offset store and in-memory
statuses are made; the cluster id is asked of the brokers (bounded; unknown if they do not
answer); the REST API starts serving; the connectors given on the command line are created, in
order (one that is refused stops the process with its reason, as Kafka's ``ConnectStandalone``
does). It then runs until SIGTERM or SIGINT: the REST listener closes, every task and connector
stops (tasks commit their offsets as they stop), all within ``STOP_TIMEOUT_S``.

Connector files (``read_connector_file``): a ``.properties`` file read by the project's own
reader (``odradek.config.properties``), or a ``.json`` file holding either the config map or
``{"name": ..., "config": {...}}`` (the body of ``POST /connectors``), checked as the REST API
checks bodies.

Logs go to stderr (``odradek.cli`` configures logging).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.connect.herder import HerderError
from odradek.connect.rest import bodies
from odradek.connect.rest.catalog import PluginsCatalog
from odradek.connect.rest.server import (
    advertised_address,
    bind_listener,
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


def _cluster_id(config: WorkerConfig) -> str | None:
    from confluent_kafka.admin import AdminClient

    try:
        admin = AdminClient(config.admin_config())
        return admin.list_topics(timeout=CLUSTER_ID_TIMEOUT_S).cluster_id
    except Exception as exc:  # noqa: BLE001 - the worker runs; GET / says the id is unknown
        log.warning("could not read the Kafka cluster id: %s", exc)
        return None


class WorkerPlugins:
    """``Plugins`` with the ``load(kind, name)`` lookup the runtime's pipeline calls."""

    _LOOKUPS = {
        "connector": "connector_class",
        "converter": "converter_class",
        "header_converter": "header_converter_class",
        "transform": "transform_class",
        "predicate": "predicate_class",
    }

    def __init__(self, plugins: Any) -> None:
        self._plugins = plugins

    def load(self, kind: str, name: str) -> type:
        lookup = getattr(self._plugins, self._LOOKUPS[kind])
        return lookup(name) if kind in ("connector", "converter") else lookup(name, kind)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._plugins, attribute)


def _validator(plugins: Any):
    """Core's ``validate_connector_config`` when present; until it is, the connector's own
    ``ConfigDef`` (Kafka's validation minus the common connector keys)."""
    try:
        from odradek.connect.connector_config import validate_connector_config
    except ImportError:
        validate_connector_config = None

    def validate(props: Mapping[str, str]) -> dict[str, Any]:
        if validate_connector_config is not None:
            return validate_connector_config(plugins, props)
        return _connector_validation(plugins, props)

    return validate


def _connector_validation(plugins: Any, props: Mapping[str, str]) -> dict[str, Any]:
    from odradek.connect.api import ConfigException
    from odradek.connect.config_def import error_count
    from odradek.connect.rest.catalog import config_key_info

    name = props.get("connector.class", "")
    try:
        connector = plugins.new_connector(name)
    except ConfigException as exc:
        value = {
            "name": "connector.class",
            "value": name,
            "recommended_values": [],
            "errors": [exc.message],
            "visible": True,
        }
        return {"name": name, "error_count": 1, "groups": [], "configs": [{"value": value}]}
    definition = connector.config()
    values = connector.validate(props)
    configs = [
        {
            "definition": config_key_info(definition.keys[v.name])
            if v.name in definition.keys
            else None,
            "value": {
                "name": v.name,
                "value": v.value,
                "recommended_values": list(v.recommended_values),
                "errors": list(v.errors),
                "visible": v.visible,
            },
        }
        for v in values
    ]
    return {"name": name, "error_count": error_count(values), "groups": [], "configs": configs}


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_standalone(
    config: WorkerConfig, connector_files: list[tuple[str, dict[str, str]]]
) -> int:
    """Run a standalone worker until SIGTERM/SIGINT; the exit code (0, or 1 if a connector given
    on the command line was refused or the stop overran ``STOP_TIMEOUT_S``)."""
    from odradek.connect.plugins import Plugins
    from odradek.connect.runtime.offsets import FileOffsetStore
    from odradek.connect.runtime.status import MemoryStatusListener
    from odradek.connect.runtime.worker import Worker
    from odradek.connect.sink_offsets import SinkOffsets
    from odradek.connect.standalone import StandaloneHerder

    stop = _stop_event()
    plugins = WorkerPlugins(Plugins())
    host, port = parse_listener(config.get("listeners"))
    sock = bind_listener(host, port)
    bound_port = sock.getsockname()[1]
    advertised = advertised_address(
        host,
        bound_port,
        config.get("rest.advertised.host.name"),
        config.get("rest.advertised.port"),
    )
    worker_id = f"{advertised[0]}:{advertised[1]}"
    status = MemoryStatusListener()
    offset_store = FileOffsetStore(config.offset_storage_file)
    worker = Worker(config, plugins, offset_store, status, worker_id=worker_id)
    cluster_id = await asyncio.to_thread(_cluster_id, config)
    herder = StandaloneHerder(
        worker,
        status,
        offset_store,
        worker_id=worker_id,
        validate=_validator(plugins),
        sink_offsets=SinkOffsets(config.admin_config()),
        kafka_cluster_id=cluster_id,
    )
    registry = new_registry()
    server = await start_rest_server(
        herder,
        PluginsCatalog(plugins),
        host=host,
        port=bound_port,
        advertised_host=advertised[0],
        advertised_port=advertised[1],
        metrics=connect_rest_metrics(registry),
        registry=registry,
        sock=sock,
    )
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
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await server.stop()
                await herder.close()
            log.info("stopped")
        except TimeoutError:
            log.error("the stop took longer than %.0f s (STOP_TIMEOUT_S)", STOP_TIMEOUT_S)
            code = 1
