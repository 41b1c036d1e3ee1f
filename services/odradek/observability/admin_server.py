"""The admin HTTP port every Odradek service opens: ``/metrics``, ``/healthz`` and ``/readyz``.

- ``GET /metrics``: the service's own registry in Prometheus' text format (or OpenMetrics when the
  scraper asks for it in ``Accept``), rendered in a worker thread so a large registry does not
  stall the event loop that also serves Kafka clients.
- ``GET /healthz``: liveness. Answering at all proves the event loop runs; an optional ``health``
  callable may add a check of its own (a stuck request loop, say). 200 ``ok`` or 503.
- ``GET /readyz``: readiness. ``ready()`` returns ``True`` or an empty collection when the service
  can take traffic, else ``False`` or the reasons in words, e.g. ``["zookeeper session not
  connected"]``. 200 or 503, with ``{"ready": ..., "reasons": [...]}`` as JSON either way.

Anything else is 404, a method other than GET or HEAD is 405 (aiohttp's routing does both).

The checks run on the event loop and must only read in-memory state: no I/O, no blocking. The
server binds to exactly the given host (pass a literal address such as ``127.0.0.1``); port 0
picks a free port, which ``AdminServer.port`` reports. All methods run on one event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from odradek.listeners import bind_any_port

log = logging.getLogger(__name__)

ADMIN_REQUEST_BODY_MAX_BYTES = 1024  # only GET and HEAD are served; aiohttp answers 413 beyond
ADMIN_BACKLOG = 64  # pending connections; scrapers and probes are few
ADMIN_SHUTDOWN_TIMEOUT_S = 5.0  # how long stop() lets in-flight scrapes finish
READY_REASONS_MAX = 32  # reasons listed in a /readyz body; the rest are summarised

HealthCheck = Callable[[], bool]
ReadyCheck = Callable[[], "bool | Iterable[str]"]


@dataclass(eq=False)
class AdminServer:
    """A running admin server. ``port`` is the bound port, even when 0 was asked for."""

    host: str
    port: int
    _runner: web.AppRunner

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        """Close the listening socket and wait (bounded) for in-flight requests."""
        await self._runner.cleanup()


def not_ready_reasons(result: bool | Iterable[str]) -> list[str]:
    """Normalise what a ``ReadyCheck`` returned to the reasons for not being ready."""
    if result is True:
        return []
    if result is False:
        return ["not ready"]
    return [str(reason) for reason in result]


def build_admin_app(
    registry: CollectorRegistry,
    *,
    ready: ReadyCheck,
    health: HealthCheck | None = None,
) -> web.Application:
    """The aiohttp application, without a socket; ``start_admin_server`` serves it."""

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await asyncio.to_thread(encoder, registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(request: web.Request) -> web.Response:
        try:
            healthy = health is None or bool(health())
        except Exception as exc:
            log.exception("health check failed")
            return web.Response(status=503, text=f"health check failed: {exc!r}\n")
        if not healthy:
            return web.Response(status=503, text="unhealthy\n")
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        try:
            reasons = not_ready_reasons(ready())
        except Exception as exc:
            log.exception("readiness check failed")
            reasons = [f"readiness check failed: {exc!r}"]
        if len(reasons) > READY_REASONS_MAX:
            hidden = len(reasons) - READY_REASONS_MAX
            reasons = [*reasons[:READY_REASONS_MAX], f"... and {hidden} more"]
        body = {"ready": not reasons, "reasons": reasons}
        return web.json_response(body, status=503 if reasons else 200)

    app = web.Application(client_max_size=ADMIN_REQUEST_BODY_MAX_BYTES)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def start_admin_server(
    host: str,
    port: int,
    registry: CollectorRegistry,
    *,
    ready: ReadyCheck,
    health: HealthCheck | None = None,
) -> AdminServer:
    """Serve the admin endpoints on ``host:port`` until ``AdminServer.stop()``.

    Raises ``OSError`` if the address cannot be bound (nothing is left running then).
    """
    app = build_admin_app(registry, ready=ready, health=health)
    # access_log=None: a scrape every few seconds would drown the service's own log lines.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=ADMIN_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    try:
        site: web.BaseSite
        if port == 0:  # any free port (listeners.bind_any_port)
            site = web.SockSite(runner, bind_any_port(host), backlog=ADMIN_BACKLOG)
        else:
            site = web.TCPSite(runner, host, port, backlog=ADMIN_BACKLOG)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = runner.addresses[0][1]
    log.info("admin server listening on %s:%d", host, bound_port)
    return AdminServer(host=host, port=bound_port, _runner=runner)
