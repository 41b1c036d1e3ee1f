"""One module per Kafka API; each has ``API_KEY`` and ``async def handle(ctx, request)``.

A handler decodes nothing and encodes nothing: it gets a kio request dataclass, calls the domain
(``ReplicaManager``, the metadata cache, ZooKeeper), and returns a kio response dataclass, or
None when the API sends no answer (Produce with acks=0). Every module of this package that
defines ``API_KEY`` is registered: adding an API is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.broker.context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


def _discover() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        api_key = getattr(module, "API_KEY", None)
        if api_key is not None:
            if api_key in handlers:
                raise RuntimeError(f"two handler modules for api key {api_key}")
            handlers[int(api_key)] = module.handle
    return handlers


HANDLERS: dict[int, Handler] = _discover()
