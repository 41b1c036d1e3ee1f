"""The broker's requests to the active controller, other than AlterPartition's stream.

Odradek's controller is its own process (``controller.server``), so what a client asks of "the
controller" (ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments) arrives at a
broker and is forwarded here, as is the broker's own ControlledShutdown. One request at a time
per call; calls may overlap (the connection pipelines them).

- The controller is found through ``/controller`` (``find_controller``); no controller known, a
  lost connection, or a top-level NOT_CONTROLLER answer (the controller changed under us) is
  retried after ``RETRY_BACKOFF_S`` (doubling up to ``RETRY_BACKOFF_S_MAX``) until the call's
  ``timeout_s``; then ``ControllerUnavailableError``. Any other answer, errors included, is the
  caller's to read.
- Requests are sent as the kio dataclasses they are, at their own version: a forwarded request
  keeps the version the client chose, and the controller serves the same ranges as the broker
  advertises for them. They are encoded, and large answers decoded, on a codec thread
  (``BrokerConnection``'s ``offload_codec``): a client's AlterPartitionReassignments of 1 MB
  (166,000 partitions), encoded and its answer decoded on the loop, kept another client
  waiting 385 ms (issue 23).

AlterPartition keeps its own connection (``alter_partition``): a slow admin request must never
hold up an ISR change. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_S_MAX = 1.0
DEFAULT_TIMEOUT_S = 30.0

FindController = Callable[[], Awaitable[HostPort | None]]
Connect = Callable[[str, int], Awaitable[BrokerConnection]]


class ControllerUnavailableError(Exception):
    """No active controller answered within the call's time."""


async def open_connection(
    host: str, port: int, *, tls: ssl.SSLContext | None = None
) -> BrokerConnection:
    return await BrokerConnection.open(
        host,
        port,
        client_id="odradek-controller-link",
        request_timeout_s=DEFAULT_TIMEOUT_S,
        tls=tls,
        offload_codec=True,  # clients' requests, forwarded: megabytes, encoded off the loop
    )


class ControllerConnection:
    """One connection to the controller ``find_controller`` names now: kept while it is open
    and the controller the same, opened again otherwise (a new controller, a lost connection).
    AlterPartition's sender and ``ControllerLink`` each hold one."""

    def __init__(self, find_controller: FindController, connect: Connect):
        self.find_controller = find_controller
        self.connect = connect
        self._connection: BrokerConnection | None = None
        self._address: HostPort | None = None
        self._connecting = asyncio.Lock()

    async def get(self) -> BrokerConnection | None:
        """The connection to the active controller; None while no controller is known."""
        async with self._connecting:
            address = await self.find_controller()
            if address is None:
                return None
            if self._connection is not None and not self._connection.closed:
                if address == self._address:
                    return self._connection
                await self.close()
            self._connection = await self.connect(address.host, address.port)
            self._address = address
            return self._connection

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()


class ControllerLink:
    def __init__(self, find_controller: FindController, *, connect: Connect = open_connection):
        self.controller = ControllerConnection(find_controller, connect)

    async def send(self, request: Any, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """``request``'s answer from the active controller (see the module docstring)."""
        deadline = time.monotonic() + timeout_s
        backoff_s = RETRY_BACKOFF_S
        last = "no controller known"
        while True:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise ControllerUnavailableError(f"no controller answered in {timeout_s} s: {last}")
            try:
                connection = await asyncio.wait_for(self.controller.get(), left_s)
                if connection is not None:
                    response = await connection.send(request, timeout_s=left_s)
                    if getattr(response, "error_code", ErrorCode.none) != ErrorCode.not_controller:
                        return response
                    last = "NOT_CONTROLLER"
                    await self.controller.close()
            except (ClientError, TimeoutError, OSError) as e:
                last = str(e) or type(e).__name__
                await self.controller.close()
            await asyncio.sleep(min(backoff_s, max(0.0, deadline - time.monotonic())))
            backoff_s = min(backoff_s * 2, RETRY_BACKOFF_S_MAX)

    async def close(self) -> None:
        await self.controller.close()
