"""Serving the REST application on a listener, and the URL other workers reach it at.

``listeners`` is Kafka's worker key (``http://host:port`` or ``https://host:port``; an empty
host binds every interface, as Kafka's ``http://:8083``); HTTPS and basic authentication are
``rest.security``'s. ``rest.advertised.host.name`` and
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
from prometheus_client import CollectorRegistry

from odradek.connect.herder import Herder
from odradek.connect.rest.app import PluginCatalog, build_app
from odradek.connect.rest.security import RestSecurity
from odradek.observability.metrics import ConnectRestMetrics

__all__ = [
    "REST_SHUTDOWN_TIMEOUT_S",
    "RestServer",
    "advertised_address",
    "bind_listener",
    "listener_scheme",
    "parse_listener",
    "start_rest_server",
]

log = logging.getLogger(__name__)

REST_SHUTDOWN_TIMEOUT_S = 5.0  # how long stop() lets in-flight requests finish
REST_BACKLOG = 128


def listener_scheme(listeners: str) -> str:
    """``http`` or ``https``: the scheme of the first of ``listeners``."""
    return urlsplit(listeners.split(",")[0].strip()).scheme


def parse_listener(listeners: str) -> tuple[str, int]:
    """``http(s)://host:port`` (the first of a comma-separated list) -> (host, port)."""
    first = listeners.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"listeners: only http:// and https:// are served, not {first!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"listeners: bad port in {first!r}") from exc
    if port is None:
        raise ValueError(f"listeners: {first!r} names no port")
    return parts.hostname or "", port


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), for ``start_rest_server``."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(REST_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def advertised_address(
    host: str, port: int, advertised_host: str | None, advertised_port: int | None
) -> tuple[str, int]:
    """``rest.advertised.host.name``/``port`` when set, else the bound host (or this machine's
    name when bound to every interface) and port."""
    return advertised_host or host or socket.getfqdn(), advertised_port or port


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
    registry: CollectorRegistry | None = None,
    sock: socket.socket | None = None,
    security: RestSecurity | None = None,
) -> RestServer:
    """Serve the REST API on ``host:port`` (or on ``sock``, from ``bind_listener``, when the
    port must be known before the herder exists) until ``RestServer.stop()``; ``OSError`` if
    the address cannot be bound."""
    security = security or RestSecurity()
    app = build_app(herder, plugins, metrics=metrics, registry=registry, security=security)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=REST_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        if sock is not None:
            site: web.BaseSite = web.SockSite(
                runner, sock, backlog=REST_BACKLOG, ssl_context=security.server_tls
            )
        else:
            site = web.TCPSite(
                runner, host or None, port, backlog=REST_BACKLOG, ssl_context=security.server_tls
            )
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = runner.addresses[0][1]
    shown, shown_port = advertised_address(host, bound_port, advertised_host, advertised_port)
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"{security.scheme}://{shown}:{shown_port}"
    log.info("Connect REST API listening on %s:%d (advertised %s)", host, bound_port, url)
    return RestServer(host=host, port=bound_port, advertised_url=url, _runner=runner)
