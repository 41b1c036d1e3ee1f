"""FindCoordinator through the admin client: which broker coordinates a group or a transactional
id. The one lookup the cluster operations (``odradek.ops``: groups, transactions) and Connect's
distributed workers share.

``find_coordinator`` asks any broker (``send_any``) and retries while the coordinator is not
available or loading (the first use creates ``__consumer_offsets`` or ``__transaction_state``),
at most ``COORDINATOR_ATTEMPTS`` times, ``COORDINATOR_RETRY_S`` apart; any other error code, or
the last retriable one, is ``ClusterRequestError``. A transactional id needs v1+ (v0 finds group
coordinators only): else ``UnsupportedByClusterError``. The coordinator found is added to the
client's ``broker_addresses`` when its Metadata did not list it yet (a broker newer than the
last Metadata answer), so ``send_to`` and ``open_connection`` reach it.

Async; called on the client's event loop, one call at a time per client.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.client.admin import build
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.errors import ErrorCode

__all__ = ["GROUP_KEY_TYPE", "TRANSACTION_KEY_TYPE", "find_coordinator"]

FIND_COORDINATOR = 10
FIND_COORDINATOR_MAX_VERSION = 4
GROUP_KEY_TYPE = 0  # Kafka's CoordinatorType.GROUP
TRANSACTION_KEY_TYPE = 1  # CoordinatorType.TRANSACTION
COORDINATOR_ATTEMPTS = 40
COORDINATOR_RETRY_S = 0.25
_RETRIABLE = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress)


class Client(Protocol):
    """What the lookup needs of ``admin.ClusterClient`` (tests pass a double)."""

    broker_addresses: dict[int, tuple[str, int]]

    async def send_any(self, api_key: int, max_version: int, make: Any) -> Any: ...


async def find_coordinator(client: Client, key: str, key_type: int = GROUP_KEY_TYPE) -> int:
    """The id of the broker coordinating ``key``, a group id (``GROUP_KEY_TYPE``) or a
    transactional id (``TRANSACTION_KEY_TYPE``); retried while it is being set up."""
    error = ErrorCode.coordinator_not_available
    for attempt in range(COORDINATOR_ATTEMPTS):
        if attempt:
            await asyncio.sleep(COORDINATOR_RETRY_S)
        response = await client.send_any(
            FIND_COORDINATOR,
            FIND_COORDINATOR_MAX_VERSION,
            lambda t: _request(t, key, key_type),
        )
        answer = response.coordinators[0] if hasattr(response, "coordinators") else response
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.none:
            node_id = int(answer.node_id)
            if node_id not in client.broker_addresses:  # a broker newer than our Metadata
                client.broker_addresses[node_id] = (str(answer.host), int(answer.port))
            return node_id
        if error not in _RETRIABLE:
            break
    if key_type == TRANSACTION_KEY_TYPE:
        raise ClusterRequestError(f"no transaction coordinator for {key!r}: {error.name}", error)
    raise ClusterRequestError(f"no coordinator for group {key!r}: {error.name}", error)


def _request(request_type: type, key: str, key_type: int) -> Any:
    fields = request_type.__dataclass_fields__  # type: ignore[attr-defined]
    if key_type != GROUP_KEY_TYPE and "key_type" not in fields:  # v0 finds group coordinators only
        raise UnsupportedByClusterError("the cluster cannot find transaction coordinators")
    return build(request_type, key=key, key_type=key_type, coordinator_keys=(key,))
