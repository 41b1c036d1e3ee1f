"""The OAUTHBEARER validator's keys: a JWKS from ``sasl.oauthbearer.jwks.endpoint.url``, as Kafka's
``RefreshingHttpsJwks`` (an http or https URL) and ``JwksFileVerificationKeyResolver`` (a file
URL). Both are ``oauthbearer.VerificationKeys``.

``HttpJwks``: fetched with aiohttp in a background task, never on an authentication's path
unless the token names a key the set lacks:

- at ``start`` the first fetch begins (the broker does not wait for it: until it lands, a token
  waits for it as for a missing key, below). Kafka fails the broker's start when the endpoint
  is down then; here the broker starts and retries;
- every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (3600000) a fetch, retried as Kafka's
  ``Retry``: waits of ``retry.backoff.ms`` (100) doubling, for at most ``retry.backoff.max.ms``
  (10000) in all. A failed refresh keeps the last good set (logged), so an endpoint that is down
  stalls no token whose key is known; the next one comes ``retry.backoff.max.ms`` later
  instead of ``refresh.ms``;
- a token whose ``kid`` is not in the set (``refresh_for_missing``) asks for a refresh now,
  within bounds: a kid longer than ``MISSING_KEY_ID_MAX_LENGTH`` is not looked for; one kid is
  looked for at most once per ``MISSING_KEY_ID_RETRY_MS`` (Kafka's 60 s, ``MISSING_KEY_IDS_MAX``
  kids remembered); and refreshes asked for this way start at most once per
  ``retry.backoff.ms`` (so tokens with made-up kids cannot hammer the endpoint). The token waits
  for that refresh (or one in flight) up to ``MISSING_KEY_WAIT_MS``, then looks again
  (Kafka fails it at once and lets the next attempt see the new key);
- a response must be 200 with a JWKS of at most ``JWKS_MAX_BYTES``, each request bounded by
  ``JWKS_FETCH_TIMEOUT_S``; https uses the system's trust store.

``FileJwks``: the file is read once at ``start`` (off the loop); a bad file fails the start; a
missing key is not looked for again, as Kafka's file resolver.

Clock and fetch are injectable for tests. One object per broker, on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiohttp

from odradek.errors import InvalidConfigError
from odradek.security.oauthbearer import VerificationKey, parse_jwks

__all__ = [
    "JWKS_FETCH_TIMEOUT_S",
    "JWKS_MAX_BYTES",
    "MISSING_KEY_WAIT_MS",
    "FileJwks",
    "HttpJwks",
    "JwksSettings",
    "jwks_keys",
]

log = logging.getLogger(__name__)

JWKS_MAX_BYTES = 1 << 20  # a JWKS document larger than this is refused
JWKS_FETCH_TIMEOUT_S = 10.0  # one HTTP request, connect to last byte
MISSING_KEY_WAIT_MS = 5000  # how long a token with an unknown kid waits for a refresh
MISSING_KEY_ID_MAX_LENGTH = 1000  # Kafka's MISSING_KEY_ID_MAX_KEY_LENGTH
MISSING_KEY_ID_RETRY_MS = 60000  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KEY_IDS_MAX = 16  # Kafka's MISSING_KEY_ID_CACHE_MAX_ENTRIES

Fetch = Callable[[str], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class JwksSettings:
    """``sasl.oauthbearer.jwks.endpoint.*`` as the key source uses them (Kafka's defaults)."""

    url: str
    refresh_ms: int = 3600000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10000


def jwks_keys(settings: JwksSettings) -> HttpJwks | FileJwks:
    """The key source for the URL's scheme (``config.oauthbearer`` has checked it)."""
    if urlsplit(settings.url).scheme.lower() == "file":
        return FileJwks(settings.url)
    return HttpJwks(settings)


class FileJwks:
    """A JWKS file, read once at start; see the module."""

    def __init__(self, url: str):
        self.url = url
        self.path = Path(unquote(urlsplit(url).path))
        self._keys: tuple[VerificationKey, ...] = ()

    async def start(self) -> None:
        try:
            data = await asyncio.to_thread(_read_bounded, self.path)
            self._keys = parse_jwks(data)
        except (OSError, ValueError) as e:
            raise InvalidConfigError(
                f"sasl.oauthbearer.jwks.endpoint.url {self.url}: cannot read a JWKS from "
                f"{self.path}: {e}"
            ) from e
        log.info("OAUTHBEARER: %d verification keys from %s", len(self._keys), self.path)

    async def close(self) -> None:
        return None

    def current(self) -> tuple[VerificationKey, ...]:
        return self._keys

    async def refresh_for_missing(self, kid: str | None) -> bool:
        return False


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as f:
        data = f.read(JWKS_MAX_BYTES + 1)
    if len(data) > JWKS_MAX_BYTES:
        raise ValueError(f"larger than {JWKS_MAX_BYTES} bytes")
    return data


async def http_get(url: str) -> bytes:
    """The body of a 200 answer to GET ``url``, at most ``JWKS_MAX_BYTES``; ``OSError`` (or
    ``ValueError``) otherwise."""
    timeout = aiohttp.ClientTimeout(total=JWKS_FETCH_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers={"Accept": "application/json"}, max_redirects=3) as answer,
        ):
            if answer.status != 200:
                raise OSError(f"HTTP {answer.status} from {url}")
            body = bytearray()
            async for chunk in answer.content.iter_chunked(65536):
                body += chunk
                if len(body) > JWKS_MAX_BYTES:
                    raise ValueError(f"the JWKS at {url} is larger than {JWKS_MAX_BYTES} bytes")
            return bytes(body)
    except (aiohttp.ClientError, TimeoutError) as e:
        raise OSError(f"GET {url} failed: {e!r}") from e


class HttpJwks:
    """A JWKS endpoint, refreshed in the background; see the module."""

    def __init__(
        self,
        settings: JwksSettings,
        *,
        fetch: Fetch = http_get,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.settings = settings
        self._fetch = fetch
        self._monotonic = monotonic
        self._sleep = sleep
        self._keys: tuple[VerificationKey, ...] = ()
        self._refresh: asyncio.Task[bool] | None = None  # in flight
        self._periodic: asyncio.Task[None] | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()  # kid -> when it may be looked for
        self._last_asked_s: float | None = None  # when a refresh for a missing kid last started
        self.refreshes = 0  # successful ones, for tests and logs

    async def start(self) -> None:
        self._periodic = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        for task in (self._periodic, self._refresh):
            if task is not None:
                task.cancel()
        for task in (self._periodic, self._refresh):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def current(self) -> tuple[VerificationKey, ...]:
        return self._keys

    async def refresh_for_missing(self, kid: str | None) -> bool:
        key = kid or ""
        if len(key) > MISSING_KEY_ID_MAX_LENGTH:
            log.warning("OAUTHBEARER: a token's kid is too long (%d characters)", len(key))
            return False
        now = self._monotonic()
        task = self._refresh
        due = self._missing.get(key)
        backoff_s = self.settings.retry_backoff_ms / 1000
        may_start = (due is None or due <= now) and (
            self._last_asked_s is None or now - self._last_asked_s >= backoff_s
        )
        if may_start:
            self._missing[key] = now + MISSING_KEY_ID_RETRY_MS / 1000
            self._missing.move_to_end(key)
            while len(self._missing) > MISSING_KEY_IDS_MAX:
                self._missing.popitem(last=False)
            self._last_asked_s = now
            if task is None:
                log.info("OAUTHBEARER: no key %r in the JWKS: refreshing it now", kid)
                task = self._start_refresh()
        if task is None:
            return False
        try:
            return await asyncio.wait_for(asyncio.shield(task), MISSING_KEY_WAIT_MS / 1000)
        except TimeoutError:
            return False
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                return False  # the key source is closing, not this waiter
            raise

    def _start_refresh(self) -> asyncio.Task[bool]:
        task = asyncio.get_running_loop().create_task(self._refresh_with_retries())
        self._refresh = task
        task.add_done_callback(self._refresh_done)
        return task

    def _refresh_done(self, task: asyncio.Task[bool]) -> None:
        if self._refresh is task:
            self._refresh = None

    async def _run(self) -> None:
        settings = self.settings
        while True:
            task = self._refresh or self._start_refresh()
            refreshed = await asyncio.shield(task)
            # After a failed refresh (the endpoint down), try again sooner than refresh.ms.
            wait_ms = settings.refresh_ms if refreshed else settings.retry_backoff_max_ms
            await self._sleep(max(wait_ms, settings.retry_backoff_ms, 1) / 1000)

    async def _refresh_with_retries(self) -> bool:
        """One refresh as Kafka's ``Retry``; True when a new key set came in."""
        settings = self.settings
        end_s = self._monotonic() + settings.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                keys = parse_jwks(await self._fetch(settings.url))
            except Exception as e:  # whatever fails, the last good keys stay
                if not isinstance(e, OSError | ValueError):
                    log.exception("OAUTHBEARER: unexpected error fetching %s", settings.url)
                wait_s = min(
                    settings.retry_backoff_ms / 1000 * 2 ** (attempt - 1),
                    end_s - self._monotonic(),
                )
                if wait_s <= 0:
                    log.warning(
                        "OAUTHBEARER: JWKS refresh of %s failed after %d attempts, keeping the "
                        "%d keys it had: %s",
                        settings.url,
                        attempt,
                        len(self._keys),
                        e,
                    )
                    return False
                log.info(
                    "OAUTHBEARER: JWKS fetch attempt %d failed (%s), again in %.3f s",
                    attempt,
                    e,
                    wait_s,
                )
                await self._sleep(wait_s)
                continue
            self._keys = keys
            for key in keys:
                if key.kid is not None:
                    self._missing.pop(key.kid, None)
            self.refreshes += 1
            log.info("OAUTHBEARER: %d verification keys from %s", len(keys), settings.url)
            return True
