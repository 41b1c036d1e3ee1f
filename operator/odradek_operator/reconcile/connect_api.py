"""The port to a Connect cluster's REST API (Kafka Connect's), and its adapter on aiohttp.

``ConnectApi`` is what the connector reconciler needs: a connector's config (read, put), its
target state (pause, resume, stop), its status, and delete. ``RestConnectApi(urls)`` speaks
Kafka Connect's REST API to the workers' addresses in turn: a worker that does not answer is
skipped for the next one (any worker answers: the others forward writes to the leader).

Errors, as the reconciler acts on them:
- ``ConnectUnavailable``: no worker answered, or one answered 409 (a rebalance is in progress,
  Kafka Connect's answer while the group changes) or 5xx: try again later.
- ``ConnectRefused``: a 400 (a bad config): ``message`` is Kafka Connect's own, a user reads it.
A 404 is not an error here: ``config``/``status`` answer None, ``delete`` False.

One ``RestConnectApi`` per reconciliation pass; its session is closed by ``close()``.
Every request is bounded by ``REQUEST_TIMEOUT_S``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp

__all__ = [
    "ConnectApi",
    "ConnectApiFactory",
    "ConnectRefused",
    "ConnectUnavailable",
    "RestConnectApi",
]

REQUEST_TIMEOUT_S = 10.0
ERROR_BODY_MAX = 2000  # characters of an error body kept in a message


class ConnectUnavailable(Exception):
    """No worker gave an answer to act on (down, starting, rebalancing)."""


class ConnectRefused(Exception):
    """The workers refused the request (400): ``message`` says why, in Kafka Connect's words."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ConnectApi(Protocol):
    async def config(self, name: str) -> dict[str, str] | None: ...

    async def put_config(self, name: str, config: Mapping[str, str]) -> None: ...

    async def set_target_state(self, name: str, target: str) -> None:
        """``target``: STARTED (resume), PAUSED (pause) or STOPPED (stop)."""

    async def status(self, name: str) -> dict[str, Any] | None: ...

    async def delete(self, name: str) -> bool: ...

    async def close(self) -> None: ...


ConnectApiFactory = Callable[[Sequence[str]], ConnectApi]

_TARGET_PATHS = {"STARTED": "resume", "PAUSED": "pause", "STOPPED": "stop"}


class RestConnectApi:
    """``ConnectApi`` over HTTP to ``urls`` (``http://10.0.0.7:8083``...), tried in order."""

    def __init__(self, urls: Sequence[str]) -> None:
        if not urls:
            raise ValueError("no worker URL")
        self._urls = list(urls)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def config(self, name: str) -> dict[str, str] | None:
        status, body = await self._call("GET", f"/connectors/{_quote(name)}/config")
        return None if status == 404 else body

    async def put_config(self, name: str, config: Mapping[str, str]) -> None:
        await self._call("PUT", f"/connectors/{_quote(name)}/config", dict(config))

    async def set_target_state(self, name: str, target: str) -> None:
        await self._call("PUT", f"/connectors/{_quote(name)}/{_TARGET_PATHS[target]}")

    async def status(self, name: str) -> dict[str, Any] | None:
        status, body = await self._call("GET", f"/connectors/{_quote(name)}/status")
        return None if status == 404 else body

    async def delete(self, name: str) -> bool:
        status, _ = await self._call("DELETE", f"/connectors/{_quote(name)}")
        return status != 404

    async def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, JSON body) of the first worker that answers; 404 is an answer."""
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
            self._session = aiohttp.ClientSession(timeout=timeout)
        failures = []
        for url in self._urls:
            try:
                async with self._session.request(method, url + path, json=body) as response:
                    text = await response.text()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError) as e:
                failures.append(f"{url}: {type(e).__name__} {e}".strip())
                continue
            answer = _json(text)
            if status < 400 or status == 404:
                return status, answer
            message = _message(answer, text)
            if status == 409 or status >= 500:
                failures.append(f"{url}: {status} {message}")
                continue  # another worker may know better (a rebalance seen late)
            raise ConnectRefused(status, message)
        raise ConnectUnavailable(f"{method} {path}: " + "; ".join(failures))


def _quote(name: str) -> str:
    return quote(name, safe="")


def _json(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _message(answer: Any, text: str) -> str:
    """Kafka Connect's error body is ``{"error_code": 400, "message": "..."}``."""
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return answer["message"][:ERROR_BODY_MAX]
    return text[:ERROR_BODY_MAX] or "(no body)"
