"""Lookups the group and transaction proofs share (tests/groups/group_proof,
tests/transactions/txn_proof): the end offsets of what was acknowledged, and which broker
coordinates a group or a transactional id.

``coordinator_of`` asks FindCoordinator v3 of the first bootstrap broker that answers (one may
just have been killed), each retried while the coordinator is not available, at most 100 times
0.2 s apart; it raises AssertionError if none answers. Stateless: any number of tests may look up
at once (each call opens and closes its own connection and event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.protocol import schemas

__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "coordinator_of", "end_offsets"]

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
ANSWER_TIMEOUT_S = 15.0
ASKS_MAX = 100
ASK_PAUSE_S = 0.2


def end_offsets(acknowledged: Iterable[tuple[int, int]]) -> dict[int, int]:
    """partition -> the offset after its last acknowledged record, from (partition, offset)
    pairs (the keys of what a producer got acknowledged)."""
    ends: dict[int, int] = {}
    for partition, offset in acknowledged:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int:
    """The id of the broker coordinating ``key`` (a group for ``GROUP_KEY``, a transactional id
    for ``TRANSACTION_KEY``)."""

    async def ask(host: str, port: int) -> int | None:
        connection = await BrokerConnection.open(host, port)
        try:
            for _ in range(ASKS_MAX):
                request = schemas.request_schema(10, 3)(key=key, key_type=key_type)
                response = await connection.send(request, timeout_s=ANSWER_TIMEOUT_S)
                if response.error_code == 0:
                    return int(response.node_id)
                await asyncio.sleep(ASK_PAUSE_S)
        finally:
            await connection.close()
        return None

    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            found = asyncio.run(ask(host, int(port)))
        except (OSError, ClientError):
            continue
        if found is not None:
            return found
    raise AssertionError(f"no coordinator for {key} (key type {key_type}) at any of {bootstrap}")
