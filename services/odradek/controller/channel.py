"""The controller's requests to brokers: one ordered queue and one connection per live broker.

A broker must apply the controller's requests in the order they were decided (a LeaderAndIsr
after the UpdateMetadata that announced it, a StopReplica after both), so each broker has one
queue served by one task over one connection, as Kafka's ControllerChannelManager. A request
that fails (connection refused, timeout) is retried on a new connection, with a bounded backoff,
until it is answered or the broker leaves the live set; a broker that comes back gets the full
state again from the controller, so nothing queued for a dead broker needs keeping.

Each connection goes to the broker's control-plane endpoint: the one its registration lists
under ``control.plane.listener.name`` (brokers serve the controller's requests nowhere else). A
broker that registered no such endpoint cannot be controlled: it gets no queue, and an error is
logged naming the setting to align.

Runs on the controller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.config.controller import CONTROLLER_KEYS
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.zk.paths import BrokerInfo, Endpoint

log = logging.getLogger(__name__)

RETRY_BACKOFF_S_FIRST = 0.1
RETRY_BACKOFF_S_MAX = 2.0
QUEUE_MAX_REQUESTS = 10_000  # per broker; the controller's own output, bounded all the same
REQUEST_TIMEOUT_S = CONTROLLER_KEYS["controller.socket.timeout.ms"].default / 1000
SEND_ATTEMPTS_MAX = 1000  # then the request is dropped: at RETRY_BACKOFF_S_MAX, about 30 min

Connect = Callable[[str, int], Awaitable[BrokerConnection]]
OnResponse = Callable[[int, Any], None]


async def _connect(
    host: str,
    port: int,
    *,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
) -> BrokerConnection:
    return await BrokerConnection.open(
        host, port, client_id="odradek-controller", request_timeout_s=request_timeout_s, tls=tls
    )


def control_plane_endpoint(info: BrokerInfo, listener_name: str) -> Endpoint | None:
    """The endpoint a broker registered for ``listener_name``, if any."""
    return next((e for e in info.endpoints if e.listener_name == listener_name), None)


class _BrokerQueue:
    def __init__(
        self, broker_id: int, endpoint: Endpoint, connect: Connect, on_response: OnResponse
    ):
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.connect = connect
        self.on_response = on_response
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_MAX_REQUESTS)
        self.connection: BrokerConnection | None = None
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            request = await self.queue.get()
            backoff_s = RETRY_BACKOFF_S_FIRST
            for _ in range(SEND_ATTEMPTS_MAX):
                try:
                    if self.connection is None or self.connection.closed:
                        self.connection = await self.connect(self.endpoint.host, self.endpoint.port)
                    response = await self.connection.send(request)
                    self.on_response(self.broker_id, response)
                    break
                except ClientError as e:
                    log.info(
                        "retrying %s to broker %d in %.1f s: %s",
                        type(request).__name__,
                        self.broker_id,
                        backoff_s,
                        e,
                    )
                    await asyncio.sleep(backoff_s)
                    backoff_s = min(backoff_s * 2, RETRY_BACKOFF_S_MAX)
            else:
                log.error(
                    "dropping %s to broker %d after %d attempts",
                    type(request).__name__,
                    self.broker_id,
                    SEND_ATTEMPTS_MAX,
                )

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if self.connection is not None:
            await self.connection.close()


class ControllerChannels:
    def __init__(
        self,
        control_plane_listener_name: str = CONTROL_PLANE_LISTENER_NAME,
        connect: Connect | None = None,
        on_response: OnResponse = lambda broker, r: None,
        *,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        tls: ssl.SSLContext | None = None,
    ):
        """``tls``: how to reach the control-plane listeners (None: they are PLAINTEXT)."""
        self.control_plane_listener_name = control_plane_listener_name
        self.connect = connect or functools.partial(
            _connect, request_timeout_s=request_timeout_s, tls=tls
        )
        self.on_response = on_response
        self._queues: dict[int, _BrokerQueue] = {}

    async def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        """Open queues for new live brokers, drop those of brokers that left (or moved)."""
        endpoints = {
            broker_id: control_plane_endpoint(info, self.control_plane_listener_name)
            for broker_id, info in brokers.items()
        }
        for broker_id in list(self._queues):
            queue = self._queues[broker_id]
            if endpoints.get(broker_id) != queue.endpoint:
                del self._queues[broker_id]
                await queue.close()
        for broker_id, endpoint in endpoints.items():
            if endpoint is None:
                log.error(
                    "broker %d registered no %s endpoint (it has %s): the controller cannot send "
                    "it requests; set control.plane.listener.name alike on brokers and controllers",
                    broker_id,
                    self.control_plane_listener_name,
                    [e.connection_string() for e in brokers[broker_id].endpoints],
                )
            elif broker_id not in self._queues:
                self._queues[broker_id] = _BrokerQueue(
                    broker_id, endpoint, self.connect, self.on_response
                )

    def send(self, broker_id: int, request: Any) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            log.debug("not sending %s to broker %d: not live", type(request).__name__, broker_id)
            return
        queue.queue.put_nowait(request)

    def pending(self) -> int:
        return sum(q.queue.qsize() for q in self._queues.values())

    async def close(self) -> None:
        for queue in self._queues.values():
            await queue.close()
        self._queues.clear()
