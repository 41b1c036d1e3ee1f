"""Forwarding a request to the leader, as a distributed worker that is not the leader does.

Kafka's rule (``HerderRequestHandler.completeOrForwardRequest``): a request a client sent (no
``forward`` query parameter) may be forwarded with ``forward=true``, which lets the next worker
forward it once more (the leader may have changed in between); a request that arrives with
``forward=false`` must not travel further and gets 409. So a request makes at most two hops,
and two workers that each think the other leads cannot bounce it forever.

The client's ``Authorization`` header goes along (Kafka's ``RestClient`` does the same), so a
leader with basic authentication takes what the client's worker took. The leader's answer
(status, body, content type) is answered as is. A leader that cannot be
reached within ``FORWARD_TIMEOUT_S`` is a 503 naming it, so a client retries.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import web
from yarl import URL

from odradek.connect.herder import ConflictError, NotLeaderError, ServiceUnavailableError

__all__ = ["FORWARD_TIMEOUT_S", "FORWARD_BODY_MAX_BYTES", "forward_to_leader"]

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 30.0  # one forwarded request, connect to last byte
FORWARD_BODY_MAX_BYTES = 16 * 1024 * 1024  # a leader's answer larger than this is refused
FORWARD_PARAM = "forward"


async def forward_to_leader(
    request: web.Request, error: NotLeaderError, session: aiohttp.ClientSession
) -> web.Response:
    """Send ``request`` again to ``error.leader_url`` and answer what the leader answers."""
    forward = request.query.get(FORWARD_PARAM)
    if error.leader_url is None:
        raise ConflictError(
            "cannot complete the request now: no leader is known, likely because a rebalance "
            "is under way; retry"
        )
    if forward is not None and forward.lower() == "false":
        raise ConflictError(
            "cannot complete the request because of a conflicting operation (e.g. a worker "
            "rebalance): it was already forwarded to this worker as the leader; retry"
        )
    # The first worker to handle a client's request lets the next forward it once more.
    recursive = forward is None
    query = [(k, v) for k, v in request.query.items() if k != FORWARD_PARAM]
    query.append((FORWARD_PARAM, "true" if recursive else "false"))
    # The path as the client encoded it: a connector name may hold spaces or '%'.
    target = URL(error.leader_url.rstrip("/") + request.rel_url.raw_path, encoded=True)
    target = target.with_query(query)
    body = await request.read()
    headers = {}
    if request.content_type and body:
        headers["Content-Type"] = request.headers.get("Content-Type", "application/json")
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    log.debug("forwarding %s %s to the leader at %s", request.method, request.path, target)
    try:
        async with asyncio.timeout(FORWARD_TIMEOUT_S):
            async with session.request(
                request.method, target, data=body or None, headers=headers, allow_redirects=False
            ) as answer:
                content = await answer.content.read(FORWARD_BODY_MAX_BYTES + 1)
                if len(content) > FORWARD_BODY_MAX_BYTES:
                    raise ServiceUnavailableError(
                        f"the leader at {error.leader_url} answered more than "
                        f"{FORWARD_BODY_MAX_BYTES} bytes"
                    )
                return web.Response(
                    status=answer.status,
                    body=content if answer.status != 204 else None,
                    headers=_passed_headers(answer),
                )
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ServiceUnavailableError(
            f"could not forward {request.method} {request.path} to the leader at "
            f"{error.leader_url}: {exc!r}; retry"
        ) from exc


def _passed_headers(answer: aiohttp.ClientResponse) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k in ("Content-Type", "Location")}
