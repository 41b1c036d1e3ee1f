"""One module per Kafka API; each has ``API_KEY`` and ``async def handle(ctx, request)``.

A handler decodes nothing and encodes nothing: it gets a kio request dataclass, calls the domain
(``ReplicaManager``, the metadata cache, ZooKeeper), and returns a kio response dataclass, or
None when the API sends no answer (Produce with acks=0). Every module of this package that
defines ``API_KEY`` is registered: adding an API is adding a module. A module may also define
``error_response(request, error)``, Kafka's ``AbstractRequest.getErrorResponse``: the answer that
refuses the whole request with ``error`` (the server uses it for a request its listener does not
serve; an authorizer will use it for a request its principal may not send).

Which listener serves what (``served_versions``): a CLIENT listener serves every API with a
handler except the controller's (``CONTROLLER_APIS``); the CONTROL_PLANE listener serves only the
controller's APIs and ApiVersions. ApiVersions advertises exactly what its listener serves.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from odradek.broker.context import RequestContext
from odradek.config.endpoints import ListenerRole
from odradek.errors import ErrorCode
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
ErrorResponse = Callable[[Any, ErrorCode], Any]

# The controller-to-broker requests: only the controller may send them, on the control plane.
CONTROLLER_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA})
CONTROL_PLANE_APIS = CONTROLLER_APIS | {ApiKey.API_VERSIONS}


def _discover() -> tuple[dict[int, Handler], dict[int, ErrorResponse]]:
    handlers: dict[int, Handler] = {}
    error_responses: dict[int, ErrorResponse] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        api_key = getattr(module, "API_KEY", None)
        if api_key is not None:
            if api_key in handlers:
                raise RuntimeError(f"two handler modules for api key {api_key}")
            handlers[int(api_key)] = module.handle
            if hasattr(module, "error_response"):
                error_responses[int(api_key)] = module.error_response
    if not error_responses.keys() >= CONTROLLER_APIS:
        raise RuntimeError("every controller API needs an error_response (to refuse it)")
    return handlers, error_responses


HANDLERS, ERROR_RESPONSES = _discover()


def served_versions(role: ListenerRole) -> Mapping[int, tuple[int, int]]:
    """The APIs (and versions) a listener of ``role`` serves and advertises."""

    def served(api_key: int) -> bool:
        if role is ListenerRole.CONTROL_PLANE:
            return api_key in CONTROL_PLANE_APIS
        return api_key not in CONTROLLER_APIS

    return MappingProxyType(
        {
            key: versions
            for key, versions in SUPPORTED_VERSIONS.items()
            if key in HANDLERS and served(key)
        }
    )
