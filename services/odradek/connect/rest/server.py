"""Serving the REST application on a listener, and the URL other workers reach it at.

``listeners`` is Kafka's worker key (``http://host:port``; an empty host binds every interface,
as Kafka's ``http://:8083``); only plain HTTP is served. ``rest.advertised.host.name`` and
``rest.advertised.port`` override what ``RestServer.advertised_url`` reports (the URL statuses
carry as ``worker_id`` and that followers forward to). Port 0 binds a free port, which
``RestServer.port`` reports. All methods run on the worker's event loop.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from odradek.connect.herder import Herder
from odradek.connect.rest.app import PluginCatalog, build_app
from odradek.observability.metrics import ConnectRestMetrics

__all__ = ["REST_SHUTDOWN_TIMEOUT_S", "RestServer", "parse_listener", "start_rest_server"]

log = logging.getLogger(__name__)

REST_SHUTDOWN_TIMEOUT_S = 5.0  # how long stop() lets in-flight requests finish
REST_BACKLOG = 128


def parse_listener(listeners: str) -> tuple[str, int]:
    """``http://host:port`` (the first of a comma-separated list) -> (host, port)."""
    first = listeners.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme != "http":
        raise ValueError(f"listeners: only http:// is served, not {first!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"listeners: bad port in {first!r}") from exc
    if port is None:
        raise ValueError(f"listeners: {first!r} names no port")
    return parts.hostname or "", port


@dataclass(eq=False)
class RestServer:
    host: str
    port: int
    advertised_url: str
    _runner: web.AppRunner

    async def stop(self) -> None:
        await self._runner.cleanup()


async def start_rest_server(
    herder: Herder,
    plugins: PluginCatalog,
    *,
    host: str,
    port: int,
    advertised_host: str | None = None,
    advertised_port: int | None = None,
    metrics: ConnectRestMetrics | None = None,
    registry=None,
) -> RestServer:
    """Serve the REST API on ``host:port`` until ``RestServer.stop()``; ``OSError`` if unbound."""
    app = build_app(herder, plugins, metrics=metrics, registry=registry)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=REST_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host or None, port, backlog=REST_BACKLOG)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = runner.addresses[0][1]
    shown = advertised_host or host or socket.gethostname()
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"http://{shown}:{advertised_port or bound_port}"
    log.info("Connect REST API listening on %s:%d (advertised %s)", host, bound_port, url)
    return RestServer(host=host, port=bound_port, advertised_url=url, _runner=runner)
