"""Kafka Connect's REST API as an aiohttp application over a ``Herder``.

Handlers are thin: check the path, query and body (``bodies``), call one herder coroutine, encode
its answer as Kafka Connect does (status codes and JSON shapes of Kafka's ``ConnectorsResource``,
``ConnectorPluginsResource`` and ``RootResource``). Every error is Kafka's JSON shape
``{"error_code": <HTTP status>, "message": "..."}``:

- a ``HerderError`` carries its own status (400, 404, 409, 503...);
- a route that does not exist is 404, a method a route does not serve 405, a body over
  ``REST_REQUEST_BODY_MAX_BYTES`` 413, all in that JSON shape;
- a herder call that takes longer than ``REST_REQUEST_TIMEOUT_S`` is a 500 "request timed out"
  (Kafka's answer; the operation may still complete);
- anything unexpected is logged with its traceback and answered 500 with its message: the
  worker keeps serving.

``NotLeaderError`` is not answered: the request is forwarded to the leader (``forward``).

Plugins are listed by a ``PluginCatalog`` (the same for standalone and distributed workers),
since which plugins are installed is a property of the process, not of the herder.

All handlers run on the worker's event loop; the app holds no state of its own besides the
client session used for forwarding and the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from odradek import __version__
from odradek.connect.herder import (
    BadRequestError,
    ConnectorTaskId,
    Herder,
    HerderError,
    NotFoundError,
    NotLeaderError,
    TargetState,
)
from odradek.connect.rest import bodies
from odradek.connect.rest.forward import FORWARD_TIMEOUT_S, forward_to_leader
from odradek.connect.rest.security import UNAUTHORIZED_BODY, RestSecurity
from odradek.observability.metrics import OVERFLOW_LABEL, ConnectRestMetrics

__all__ = [
    "REST_REQUEST_BODY_MAX_BYTES",
    "REST_REQUEST_TIMEOUT_S",
    "PluginCatalog",
    "build_app",
    "error_response",
]

log = logging.getLogger(__name__)

REST_REQUEST_BODY_MAX_BYTES = 1024 * 1024  # a connector config is a few KiB; 413 beyond this
REST_REQUEST_TIMEOUT_S = 90.0  # Kafka's rest.request.timeout default: one herder call
GIT_COMMIT = "unknown"  # GET / answers it; the package carries no commit id

T = TypeVar("T")


class PluginCatalog(Protocol):
    """The plugins this worker can run, for ``/connector-plugins``."""

    def connector_plugins(self, *, connectors_only: bool) -> list[dict[str, Any]]:
        """``[{"class": ..., "type": "source"|"sink"|"converter"|..., "version": ...}]``."""

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """Kafka's ``ConfigKeyInfo`` list for a plugin; ``NotFoundError`` if there is none."""


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


def _http_error_message(request: web.Request, exc: web.HTTPException) -> str:
    if isinstance(exc, web.HTTPNotFound):
        return f"no such resource: {request.method} {request.path}"
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return f"method {request.method} is not allowed on {request.path} (allowed: {allowed})"
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return (
            f"the request body is larger than {REST_REQUEST_BODY_MAX_BYTES} bytes "
            "(REST_REQUEST_BODY_MAX_BYTES)"
        )
    return exc.text or exc.reason


class _Api:
    def __init__(self, herder: Herder, plugins: PluginCatalog) -> None:
        self.herder = herder
        self.plugins = plugins
        self._in_flight: set[asyncio.Future[Any]] = set()  # herder calls, referenced until done

    # -------------------------------------------------------------- helpers

    async def call(self, awaitable: Awaitable[T]) -> T:
        """Await one herder call for at most ``REST_REQUEST_TIMEOUT_S``. The call is shielded: a
        timeout or a client that hangs up does not cancel it half-way (a herder holds its lock
        across the worker's blocking calls); it completes in the background, as in Kafka."""
        task = asyncio.ensure_future(awaitable)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        try:
            return await asyncio.wait_for(asyncio.shield(task), REST_REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise HerderError(
                f"request timed out after {REST_REQUEST_TIMEOUT_S:.0f} s "
                "(REST_REQUEST_TIMEOUT_S); it may still complete"
            ) from None

    @staticmethod
    async def body(request: web.Request) -> Any:
        return bodies.decode_json(await request.read())

    @staticmethod
    def name(request: web.Request) -> str:
        return bodies.check_connector_name(request.match_info["name"])

    def task_id(self, request: web.Request) -> ConnectorTaskId:
        return ConnectorTaskId(self.name(request), bodies.parse_task_id(request.match_info["task"]))

    @staticmethod
    def location(name: str) -> dict[str, str]:
        return {"Location": f"/connectors/{quote(name, safe='')}"}

    # -------------------------------------------------------------- root

    async def root(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "version": __version__,
                "commit": GIT_COMMIT,
                "kafka_cluster_id": self.herder.kafka_cluster_id,
            }
        )

    async def health(self, request: web.Request) -> web.Response:
        """KIP-1017: 200 once the worker can serve requests, else 503 with the reason. A herder
        that knows more (a distributed one waiting to join its group) says so through an
        optional ``health() -> (ready, message)``; answering at all proves the loop runs."""
        check = getattr(self.herder, "health", None)
        ready, message = check() if check is not None else (True, "")
        if ready:
            message = message or "Worker has completed startup and is ready to handle requests."
            return web.json_response({"status": "healthy", "message": message})
        return web.json_response(
            {"status": "starting", "message": message or "Worker is still starting up."},
            status=503,
        )

    # -------------------------------------------------------------- connectors

    async def list_connectors(self, request: web.Request) -> web.Response:
        names = await self.call(self.herder.connectors())
        expand = set(request.query.getall("expand", []))
        if not expand & {"status", "info"}:
            return web.json_response(sorted(names))
        result: dict[str, dict[str, Any]] = {}
        for name in sorted(names):
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = (
                        await self.call(self.herder.connector_status(name))
                    ).to_json()
                if "info" in expand:
                    entry["info"] = (await self.call(self.herder.connector_info(name))).to_json()
            except NotFoundError:
                continue  # deleted between the listing and now
            result[name] = entry
        return web.json_response(result)

    async def create_connector(self, request: web.Request) -> web.Response:
        name, config, initial = bodies.parse_create(await self.body(request))
        _, info = await self.call(
            self.herder.put_connector_config(
                name, config, allow_replace=False, initial_state=initial
            )
        )
        return web.json_response(info.to_json(), status=201, headers=self.location(name))

    async def get_connector(self, request: web.Request) -> web.Response:
        info = await self.call(self.herder.connector_info(self.name(request)))
        return web.json_response(info.to_json())

    async def get_config(self, request: web.Request) -> web.Response:
        return web.json_response(await self.call(self.herder.connector_config(self.name(request))))

    async def put_config(self, request: web.Request) -> web.Response:
        name = self.name(request)
        config = bodies.with_name(name, bodies.parse_config(await self.body(request)))
        created, info = await self.call(
            self.herder.put_connector_config(name, config, allow_replace=True)
        )
        if created:
            return web.json_response(info.to_json(), status=201, headers=self.location(name))
        return web.json_response(info.to_json())

    async def patch_config(self, request: web.Request) -> web.Response:
        """KIP-477: merge into the current config; a null value removes the key."""
        name = self.name(request)
        patch = bodies.parse_config_patch(await self.body(request))
        if "name" in patch and patch["name"] != name:
            raise BadRequestError(
                f"connector name in the patch ({patch['name']!r}) does not match the connector "
                f"name ({name!r}); a connector cannot be renamed"
            )
        current = await self.call(self.herder.connector_config(name))
        merged = {k: v for k, v in {**current, **patch}.items() if v is not None}
        _, info = await self.call(
            self.herder.put_connector_config(
                name, bodies.with_name(name, merged), allow_replace=True
            )
        )
        return web.json_response(info.to_json())

    async def delete_connector(self, request: web.Request) -> web.Response:
        await self.call(self.herder.delete_connector(self.name(request)))
        return web.Response(status=204)

    async def connector_status(self, request: web.Request) -> web.Response:
        status = await self.call(self.herder.connector_status(self.name(request)))
        return web.json_response(status.to_json())

    async def restart_connector(self, request: web.Request) -> web.Response:
        name = self.name(request)
        include_tasks = bodies.parse_bool("includeTasks", request.query.get("includeTasks"), False)
        only_failed = bodies.parse_bool("onlyFailed", request.query.get("onlyFailed"), False)
        status = await self.call(
            self.herder.restart_connector(
                name, include_tasks=include_tasks, only_failed=only_failed
            )
        )
        if not include_tasks and not only_failed:
            return web.Response(status=204)  # Kafka's answer before KIP-745, kept for old clients
        return web.json_response(status.to_json(), status=202)

    async def _target(self, request: web.Request, state: TargetState, status: int) -> web.Response:
        await self.call(self.herder.set_target_state(self.name(request), state))
        return web.Response(status=status)

    async def pause(self, request: web.Request) -> web.Response:
        return await self._target(request, TargetState.PAUSED, 202)

    async def resume(self, request: web.Request) -> web.Response:
        return await self._target(request, TargetState.STARTED, 202)

    async def stop(self, request: web.Request) -> web.Response:
        return await self._target(request, TargetState.STOPPED, 204)

    # -------------------------------------------------------------- tasks

    async def tasks(self, request: web.Request) -> web.Response:
        configs = await self.call(self.herder.task_configs(self.name(request)))
        return web.json_response([{"id": t.to_json(), "config": c} for t, c in configs])

    async def task_status(self, request: web.Request) -> web.Response:
        task = self.task_id(request)
        entry = await self.call(self.herder.task_status(task))
        body: dict[str, Any] = {
            "id": task.task,
            "state": entry.state.value,
            "worker_id": entry.worker_id,
        }
        if entry.trace:
            body["trace"] = entry.trace
        return web.json_response(body)

    async def restart_task(self, request: web.Request) -> web.Response:
        await self.call(self.herder.restart_task(self.task_id(request)))
        return web.Response(status=204)

    # -------------------------------------------------------------- offsets (KIP-875)

    async def get_offsets(self, request: web.Request) -> web.Response:
        offsets = await self.call(self.herder.connector_offsets(self.name(request)))
        return web.json_response({"offsets": offsets})

    async def alter_offsets(self, request: web.Request) -> web.Response:
        name = self.name(request)
        offsets = bodies.parse_offsets(await self.body(request))
        message = await self.call(self.herder.alter_offsets(name, offsets))
        return web.json_response({"message": message})

    async def reset_offsets(self, request: web.Request) -> web.Response:
        message = await self.call(self.herder.reset_offsets(self.name(request)))
        return web.json_response({"message": message})

    # -------------------------------------------------------------- plugins

    async def list_plugins(self, request: web.Request) -> web.Response:
        only = bodies.parse_bool("connectorsOnly", request.query.get("connectorsOnly"), True)
        return web.json_response(self.plugins.connector_plugins(connectors_only=only))

    async def plugin_config(self, request: web.Request) -> web.Response:
        return web.json_response(self.plugins.plugin_config(request.match_info["plugin"]))

    async def validate(self, request: web.Request) -> web.Response:
        plugin = request.match_info["plugin"]
        config = bodies.parse_config(await self.body(request))
        included = config.get("connector.class")
        if included is None:
            config["connector.class"] = plugin
        elif not _normalized(included).endswith(_normalized(plugin)):
            raise BadRequestError(
                f"connector.class {included!r} does not match the plugin in the path ({plugin!r})"
            )
        return web.json_response(await self.call(self.herder.validate(config)))


def _normalized(plugin: str) -> str:
    """Kafka's alias rule: ``FileStreamSourceConnector`` and ``FileStreamSource`` are one."""
    plugin = plugin.rsplit(":", 1)[-1]  # package.module:Class, the Python form
    suffix = "Connector"
    return plugin[: -len(suffix)] if plugin.endswith(suffix) and plugin != suffix else plugin


def build_app(
    herder: Herder,
    plugins: PluginCatalog,
    *,
    metrics: ConnectRestMetrics | None = None,
    registry: CollectorRegistry | None = None,
    security: RestSecurity | None = None,
) -> web.Application:
    """The REST application, without a socket (``server.start_rest_server`` serves it).

    ``registry``, when given, is served at ``GET /metrics`` (Prometheus' text format).
    ``security`` (``rest.security``): basic authentication of every request, and the TLS that
    forwarding to the leader connects with.
    """
    api = _Api(herder, plugins)
    security = security or RestSecurity()

    @web.middleware
    async def authenticate(request: web.Request, handler: Callable) -> web.StreamResponse:
        if not security.authorized(
            request.method, request.path, request.headers.get("Authorization")
        ):
            return web.Response(status=401, text=UNAUTHORIZED_BODY)
        return await handler(request)

    @web.middleware
    async def observe(request: web.Request, handler: Callable) -> web.StreamResponse:
        started = time.monotonic()
        response = await handler(request)
        elapsed_s = time.monotonic() - started
        if metrics is not None:
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else OVERFLOW_LABEL
            metrics.observe(request.method, route, response.status, elapsed_s)
        log.debug(
            "%s %s -> %d in %.1f ms",
            request.method,
            request.path_qs,
            response.status,
            elapsed_s * 1000,
        )
        return response

    @web.middleware
    async def errors(request: web.Request, handler: Callable) -> web.StreamResponse:
        try:
            return await handler(request)
        except NotLeaderError as exc:
            try:
                response = await forward_to_leader(request, exc, request.app[_SESSION])
            except HerderError as failed:
                return error_response(failed.status, failed.message)
            if metrics is not None:
                metrics.forwarded.inc()
            return response
        except HerderError as exc:
            return error_response(exc.status, exc.message)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return error_response(exc.status, _http_error_message(request, exc))
        except Exception as exc:
            log.exception("unexpected error answering %s %s", request.method, request.path)
            return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    app = web.Application(
        middlewares=[observe, authenticate, errors], client_max_size=REST_REQUEST_BODY_MAX_BYTES
    )
    app[_SECURITY] = security
    app.cleanup_ctx.append(_client_session)
    routes = [
        ("GET", "/", api.root),
        ("GET", "/health", api.health),
        ("GET", "/connectors", api.list_connectors),
        ("POST", "/connectors", api.create_connector),
        ("GET", "/connectors/{name}", api.get_connector),
        ("DELETE", "/connectors/{name}", api.delete_connector),
        ("GET", "/connectors/{name}/config", api.get_config),
        ("PUT", "/connectors/{name}/config", api.put_config),
        ("PATCH", "/connectors/{name}/config", api.patch_config),
        ("GET", "/connectors/{name}/status", api.connector_status),
        ("POST", "/connectors/{name}/restart", api.restart_connector),
        ("PUT", "/connectors/{name}/pause", api.pause),
        ("PUT", "/connectors/{name}/resume", api.resume),
        ("PUT", "/connectors/{name}/stop", api.stop),
        ("GET", "/connectors/{name}/tasks", api.tasks),
        ("GET", "/connectors/{name}/tasks/{task}/status", api.task_status),
        ("POST", "/connectors/{name}/tasks/{task}/restart", api.restart_task),
        ("GET", "/connectors/{name}/offsets", api.get_offsets),
        ("PATCH", "/connectors/{name}/offsets", api.alter_offsets),
        ("DELETE", "/connectors/{name}/offsets", api.reset_offsets),
        ("GET", "/connector-plugins", api.list_plugins),
        ("GET", "/connector-plugins/{plugin}/config", api.plugin_config),
        ("PUT", "/connector-plugins/{plugin}/config/validate", api.validate),
    ]
    r = app.router
    for method, path, handler in routes:
        r.add_route(method, path, handler)
        if path != "/":
            r.add_route(method, path + "/", handler)  # Kafka's Jersey takes a trailing slash too
    if registry is not None:

        async def serve_metrics(request: web.Request) -> web.Response:
            encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
            body = await asyncio.to_thread(encoder, registry)
            return web.Response(body=body, headers={"Content-Type": content_type})

        r.add_get("/metrics", serve_metrics)
    return app


_SESSION = web.AppKey("forward_session", aiohttp.ClientSession)
_SECURITY = web.AppKey("rest_security", RestSecurity)


async def _client_session(app: web.Application):
    """One client session per app for forwarding (over the listener's TLS, if any); closed with
    the app."""
    timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
    tls = app[_SECURITY].client_tls
    connector = aiohttp.TCPConnector(ssl=tls) if tls is not None else None
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        app[_SESSION] = session
        yield
