"""A Kubernetes API server for tests: kmock 0.8 serving an in-memory ObjectStore (store.py).

kmock's ``KubernetesScaffold`` is the HTTP server (aiohttp on 127.0.0.1), the router and the
discovery endpoints (``/api``, ``/apis``, ``/apis/<group>``, ``/version``); ``KubeApi`` overrides
its ``_handle`` for the resource paths and serves them from the store (kmock's own
``KubernetesEmulator`` has too many gaps to patch one by one: see store.py). Served:

- GET (object, list with labelSelector/fieldSelector), watch (``?watch=true``, from a
  resourceVersion or from now with synthetic ADDED events, ``timeoutSeconds``, 410 Gone as an
  ERROR event for a too old resourceVersion), as a chunked JSON stream or, when the request asks
  to upgrade to a WebSocket (fabric8, the Java client Spark uses, watches that way), one event per
  text message; POST, PUT, PATCH, DELETE (propagationPolicy and
  gracePeriodSeconds from the query or a DeleteOptions body), DELETE on a collection;
- the ``status`` and ``scale`` subresources; errors as ``Status`` objects (404, 409, 422);
- a pod's ``log`` (``kubectl logs``: the current container's output, ``?container=``), once the
  kubelet stand-in serves them (``ApiServerThread.serve_pod_logs``); no ``follow``/``previous``;
- ``sendInitialEvents=true`` ends the initial ADDED events with the BOOKMARK that marks them.

Not served: protobuf and CBOR bodies (415: kubectl's typed ``create`` fails, ``kubectl apply
--validate=false`` and ``get``/``scale``/``delete`` work), ``dryRun`` (400), ``/openapi``,
pagination (``limit`` is ignored: every item in one page), managedFields, admission, schema
validation and defaulting of CRDs, authentication and authorization (any token passes).

``ApiServerThread`` runs it on a thread with its own event loop (for sync tests and for processes
started by the tests) and writes a kubeconfig (token auth, no TLS) that kopf and the ``kubernetes``
client both read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import rendering

from .store import ApiError, Kind, LabelSelector, ObjectStore, field_selector_matches

__all__ = ["ApiServerThread", "AuditRecord", "KubeApi", "write_kubeconfig"]

WATCH_POLL_S = 5.0  # a watch re-checks for shutdown at least this often


@attrs.frozen
class _Request:
    method: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes
    raw: aiohttp.web.BaseRequest

    @property
    def text(self) -> str:
        return self.body.decode()


@attrs.frozen
class AuditRecord:
    """One resource request, with its verb as RBAC names it (get, list, watch, create, ...)."""

    verb: str
    group: str
    resource: str  # the plural, with its subresource: ``pods``, ``pods/status``
    namespace: str | None
    name: str | None
    token: str  # the bearer token, "" without one
    body: Any  # the decoded JSON body of a write, else None


def _audit_record(
    request: _Request, kind: Kind, namespace: str | None, name: str | None, sub: str | None
) -> AuditRecord:
    method = request.method
    if method == "GET":
        watch = request.params.get("watch") in ("true", "1", "True")
        verb = "watch" if watch else "get" if name is not None else "list"
    elif method == "DELETE":
        verb = "delete" if name is not None else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
    auth = request.headers.get("Authorization", "")
    body: Any = None
    if request.body:
        with contextlib.suppress(ValueError):
            body = yaml.safe_load(request.text)  # JSON, or apply-patch YAML
    return AuditRecord(
        verb=verb,
        group=kind.group,
        resource=f"{kind.plural}/{sub}" if sub else kind.plural,
        namespace=namespace,
        name=name,
        token=auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else "",
        body=body,
    )


@attrs.define(kw_only=True)
class KubeApi(kmock.KubernetesScaffold):
    """kmock's scaffold with the resource endpoints served from an ``ObjectStore``."""

    store: ObjectStore = attrs.field(factory=ObjectStore)
    closing: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    # Called with each resource request (off by default: watches and polls would pile up);
    # tests use it to see what a client asked for, and as whom (the Authorization header).
    audit: Callable[[AuditRecord], None] | None = attrs.field(default=None)
    # (namespace, pod, container or None) -> the container's current output; raises KeyError
    # for an unknown pod or container. Set by the kubelet stand-in, which holds the logs.
    pod_logs: Callable[[str, str, str | None], str] | None = attrs.field(default=None)

    # -- discovery: from the store's kinds ----------------------------------------------

    def _get_resources(self) -> list[kmock.resource]:
        resources = {kmock.resource(k.group, k.version, k.plural) for k in self.store.kinds()}
        return list(resources | set(super()._get_resources()))

    async def _serve_version(self, request: rendering.Request) -> Any:
        assert request.resource is not None
        group, version = request.resource.group, request.resource.version
        kinds = [k for k in self.store.kinds() if k.group == group and k.version == version]
        if not kinds:
            raise kmock.KubernetesNotFoundError()
        resources = []
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        for k in kinds:
            entry = {
                "name": k.plural,
                "singularName": k.singular,
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": verbs,
                "shortNames": list(k.short_names),
                "categories": list(k.categories),
            }
            resources.append(entry)
            sub = {"singularName": "", "namespaced": k.namespaced, "kind": k.kind}
            if k.status:
                resources.append(
                    {**sub, "name": f"{k.plural}/status", "verbs": ["get", "patch", "update"]}
                )
            if k.scale is not None:
                resources.append(
                    {
                        **sub,
                        "name": f"{k.plural}/scale",
                        "kind": "Scale",
                        "group": "autoscaling",
                        "version": "v1",
                        "verbs": ["get", "patch", "update"],
                    }
                )
        return {
            "apiVersion": "v1",
            "kind": "APIResourceList",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    # -- resources ------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # Resource paths bypass kmock's request parsing (it fails on /api/v1/namespaces) and
        # recording (watch streams and polling would pile requests up in memory).
        route = self._route(raw_request.path)
        if route is None:
            return await super().__call__(raw_request)
        body = await raw_request.read()
        content_type = raw_request.headers.get("Content-Type", "")
        if body and ("protobuf" in content_type or "cbor" in content_type):
            # client-go (kubectl) retries with JSON after a 415
            error = ApiError(415, "UnsupportedMediaType", f"{content_type} is not supported")
            return aiohttp.web.json_response(error.status(), status=415)
        request = _Request(
            method=raw_request.method.upper(),
            params=dict(raw_request.query),
            headers=dict(raw_request.headers),
            body=body,
            raw=raw_request,
        )
        kind, namespace, name, sub = route
        if self.audit is not None and kind is not None:
            self.audit(_audit_record(request, kind, namespace, name, sub))
        try:
            if kind is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return await self._serve(request, kind, namespace, name, sub)
        except ApiError as e:
            return aiohttp.web.json_response(e.status(), status=e.code)

    def _route(self, path: str) -> tuple[Kind | None, str | None, str | None, str | None] | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            kind = self.store.kind(group, version, rest[2])
            if kind is not None and kind.namespaced:
                namespace, rest = rest[1], rest[2:]
        kind = self.store.kind(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return kind, namespace, name, sub

    async def _serve(
        self,
        request: _Request,
        kind: Kind,
        namespace: str | None,
        name: str | None,
        sub: str | None,
    ) -> aiohttp.web.StreamResponse:
        method = request.method
        params = request.params
        store = self.store
        if sub == "log" and kind.plural == "pods" and kind.group == "" and name is not None:
            return self._pod_log(request, namespace or "default", name)
        if sub not in (None, "status", "scale"):
            raise ApiError(404, "NotFound", f"no subresource {sub!r}")
        if kind.namespaced is False and namespace is not None:
            raise ApiError(404, "NotFound", f"{kind.plural} is not namespaced")
        if params.get("dryRun") and method != "GET":
            # refused loudly rather than written: the store has no dry mode
            raise ApiError(400, "BadRequest", "dryRun is not supported by the test API server")
        if method == "GET" and params.get("watch") in ("true", "1", "True"):
            return await self._watch(request, kind, namespace, name)
        if name is None:
            if method == "GET":
                items, rv = store.list(
                    kind, namespace, params.get("labelSelector"), params.get("fieldSelector")
                )
                return _json(
                    {
                        "apiVersion": kind.api_version,
                        "kind": f"{kind.kind}List",
                        "metadata": {"resourceVersion": str(rv)},
                        "items": items,
                    }
                )
            if method == "POST":
                return _json(store.create(kind, namespace, _body(request)), 201)
            if method == "DELETE":
                opts = _delete_options(request)
                deleted = store.delete_collection(
                    kind,
                    namespace,
                    params.get("labelSelector"),
                    params.get("fieldSelector"),
                    opts.get("propagationPolicy"),
                )
                return _json(
                    {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "items": deleted}
                )
            raise ApiError(405, "MethodNotAllowed", f"{method} on a collection")
        if method == "GET":
            obj = store.get(kind, namespace, name)
            if sub == "scale":
                return _json(store._scale_of(kind, obj))
            return _json(obj)
        if method == "PUT":
            return _json(store.replace(kind, namespace, name, _body(request), sub))
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "application/merge-patch+json")
            patch: Any
            if content_type.startswith("application/apply-patch+yaml"):
                patch = yaml.safe_load(request.text)
            else:
                patch = _body(request)
            return _json(store.patch(kind, namespace, name, patch, content_type, sub))
        if method == "DELETE":
            opts = _delete_options(request)
            grace = opts.get("gracePeriodSeconds")
            result = store.delete(
                kind,
                namespace,
                name,
                opts.get("propagationPolicy"),
                int(grace) if grace is not None else None,
                opts.get("preconditions"),
            )
            return _json(result)
        raise ApiError(405, "MethodNotAllowed", f"{method} on an object")

    def _pod_log(self, request: _Request, namespace: str, name: str) -> aiohttp.web.Response:
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed", f"{request.method} on pods/log")
        unsupported = {"follow", "previous", "sinceSeconds", "sinceTime", "tailLines"}
        asked = sorted(k for k, v in request.params.items() if k in unsupported and v != "false")
        if asked:
            raise ApiError(400, "BadRequest", f"pods/log: {', '.join(asked)} not supported here")
        self.store.get("pods", namespace, name)  # 404 for a pod that does not exist
        if self.pod_logs is None:
            raise ApiError(400, "BadRequest", f"pod {name}: no kubelet serves its logs")
        try:
            text = self.pod_logs(namespace, name, request.params.get("container"))
        except KeyError as e:
            raise ApiError(400, "BadRequest", f"pod {name}: {e.args[0]}") from e
        return aiohttp.web.Response(text=text, content_type="text/plain")

    async def _watch(
        self, request: _Request, kind: Kind, namespace: str | None, name: str | None
    ) -> aiohttp.web.StreamResponse:
        params = request.params
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        if name is not None:
            fields = ",".join(f for f in (fields, f"metadata.name={name}") if f)
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        wake = asyncio.Event()

        def listener() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(wake.set)

        response: aiohttp.web.StreamResponse
        reader: asyncio.Task[None] | None = None
        if request.headers.get("Upgrade", "").lower() == "websocket":
            response = aiohttp.web.WebSocketResponse()
            await response.prepare(request.raw)
            reader = asyncio.create_task(_read_until_closed(response, wake))
        else:
            response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request.raw)
        self.store.subscribe(listener)
        try:
            since = params.get("resourceVersion")
            if not since or since == "0":
                items, cursor = self.store.list(kind, namespace, labels, fields)
                for item in items:
                    await _send(response, {"type": "ADDED", "object": item})
                if params.get("sendInitialEvents") == "true":
                    bookmark = {
                        "apiVersion": kind.api_version,
                        "kind": kind.kind,
                        "metadata": {
                            "resourceVersion": str(cursor),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }
                    await _send(response, {"type": "BOOKMARK", "object": bookmark})
            else:
                cursor = int(since)
            selector = LabelSelector(labels)
            while not self.closing.is_set() and not (reader is not None and reader.done()):
                wake.clear()
                events = self.store.events_after(kind, cursor)
                if events is None:
                    gone = ApiError(410, "Expired", f"too old resource version: {cursor}")
                    await _send(response, {"type": "ERROR", "object": gone.status()})
                    break
                for event in events:
                    cursor = event.rv
                    meta = event.obj["metadata"]
                    if namespace is not None and meta.get("namespace") != namespace:
                        continue
                    if not selector.matches(meta.get("labels")):
                        continue
                    if not field_selector_matches(fields, event.obj):
                        continue
                    await _send(response, {"type": event.type, "object": event.obj})
                remaining = WATCH_POLL_S if deadline is None else deadline - loop.time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(remaining, WATCH_POLL_S))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unsubscribe(listener)
        if isinstance(response, aiohttp.web.WebSocketResponse):
            assert reader is not None
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await response.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            return response
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response


def _json(obj: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(
        body=json.dumps(obj).encode(), status=status, content_type="application/json"
    )


def _body(request: _Request) -> Any:
    try:
        return json.loads(request.body or b"{}")
    except ValueError as e:
        raise ApiError(400, "BadRequest", f"the body is not JSON: {e}") from e


def _delete_options(request: _Request) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if request.body:
        with contextlib.suppress(ValueError):
            body = json.loads(request.body)
            if isinstance(body, dict):
                opts.update(body)
    for key in ("propagationPolicy", "gracePeriodSeconds"):
        if key in request.params:
            opts[key] = request.params[key]
    if str(request.params.get("orphanDependents", opts.get("orphanDependents"))).lower() == "true":
        opts["propagationPolicy"] = "Orphan"
    return opts


async def _send(response: aiohttp.web.StreamResponse, event: dict[str, Any]) -> None:
    if isinstance(response, aiohttp.web.WebSocketResponse):
        await response.send_str(json.dumps(event))
    else:
        await response.write(json.dumps(event).encode() + b"\n")


async def _read_until_closed(ws: aiohttp.web.WebSocketResponse, wake: asyncio.Event) -> None:
    """A watch client sends nothing but pings and its close: this notices the close."""
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        async for _ in ws:
            pass
    wake.set()


def write_kubeconfig(path: Path, url: str, namespace: str = "default") -> Path:
    """A kubeconfig for ``url`` (plain HTTP, a bearer token nobody checks)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": url}}],
        "users": [{"name": "kmock", "user": {"token": "odradek-test-token"}}],
        "contexts": [
            {
                "name": "kmock",
                "context": {"cluster": "kmock", "user": "kmock", "namespace": namespace},
            }
        ],
        "current-context": "kmock",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config))
    return path


class ApiServerThread:
    """``KubeApi`` on 127.0.0.1 in a thread with its own event loop.

    >>> with ApiServerThread(tmp_path / "kubeconfig") as api:
    ...     api.store.create("configmaps", "default", {...})
    """

    def __init__(
        self,
        kubeconfig: Path | None = None,
        store: ObjectStore | None = None,
        audit: Callable[[AuditRecord], None] | None = None,
    ):
        """``audit``: called (on the server's thread) with each resource request."""
        self.store = store or ObjectStore()
        self.audit = audit
        self.kubeconfig = kubeconfig
        self.url = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.handler: KubeApi | None = None

    def start(self, timeout: float = 10.0) -> ApiServerThread:
        self._thread = threading.Thread(target=self._run, name="kube-api", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the API server did not start")
        if self._error is not None:
            raise RuntimeError("the API server failed to start") from self._error
        if self.kubeconfig is not None:
            write_kubeconfig(self.kubeconfig, self.url)
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported to start()
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        handler = KubeApi(store=self.store, audit=self.audit)
        async with handler, kmock.Server(handler) as server:
            self.handler = handler
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()
            handler.closing.set()
            self.store._notify()  # wake the watch streams so that they see ``closing``
            await asyncio.sleep(0.05)

    def serve_pod_logs(self, pod_logs: Callable[[str, str, str | None], str] | None) -> None:
        """Serve ``pods/<name>/log`` from ``pod_logs`` (the kubelet stand-in's), None to stop."""
        if self.handler is None:
            raise RuntimeError("the API server is not running")
        self.handler.pod_logs = pod_logs

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> ApiServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
