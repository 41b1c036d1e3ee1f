"""One module per Kafka API; each has ``API_KEY`` and ``async def handle(ctx, request)``.

A handler decodes nothing and encodes nothing: it gets a kio request dataclass, calls the domain
(``ReplicaManager``, the metadata cache), and returns a kio response dataclass, or None when the
API sends no answer (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from odradek.broker.context import RequestContext
from odradek.broker.handlers import api_versions, fetch, list_offsets, metadata, produce

Handler = Callable[[RequestContext, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    module.API_KEY: module.handle
    for module in (api_versions, metadata, produce, fetch, list_offsets)
}
