"""The broker's side of a controlled shutdown: before it stops, ask the controller to move its
leaderships and take it out of the ISRs, so that clients switch to other replicas at once instead
of waiting for its ZooKeeper session to expire.

Kafka's ``KafkaServer.controlledShutdown``: up to ``controlled.shutdown.max.retries`` attempts,
``controlled.shutdown.retry.backoff.ms`` apart. An attempt sends ControlledShutdown (v3, with
this broker's id and current broker epoch) to the active controller through ``ControllerLink``,
which finds it through ZooKeeper and gives up after ``controller.socket.timeout.ms``. The
shutdown succeeded when the answer has no error and no remaining partition; any other outcome
(no controller answered, an error such as STALE_BROKER_EPOCH or NOT_CONTROLLER, partitions that
remain because no other in-sync replica can take them) is logged and retried. After the last
attempt the broker stops anyway (Kafka's "proceeding to do an unclean shutdown"), logging what it
still leads: those partitions go offline until the controller sees the broker gone and elects
from what is left (or until it is back).

A broker that is not registered (no broker epoch) has nothing to ask: the controller does not
know it. Bounded: attempts x (request timeout + backoff). Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from odradek.broker.controller_link import ControllerLink, ControllerUnavailableError
from odradek.errors import ErrorCode
from odradek.protocol.interbroker import ControlledShutdownRequest

log = logging.getLogger(__name__)

NAMES_LOGGED_MAX = 50  # partition names in one log line


@dataclass(frozen=True, slots=True)
class Settings:
    """The broker's ``controlled.shutdown.*`` and ``controller.socket.timeout.ms``."""

    max_retries: int = 3
    retry_backoff_ms: int = 5000
    request_timeout_ms: int = 30000


@dataclass(frozen=True, slots=True)
class Result:
    succeeded: bool
    attempts: int
    remaining: tuple[str, ...]  # "topic-partition" still led after the last answer
    last_error: str  # why the last attempt did not succeed; "" when it did


async def controlled_shutdown(
    link: ControllerLink,
    broker_id: int,
    broker_epoch: Callable[[], int | None],
    settings: Settings,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Result:
    """Ask until the controller says nothing remains, or the attempts run out (module doc)."""
    started_s = time.monotonic()
    remaining: tuple[str, ...] = ()
    last_error = "no attempt made (controlled.shutdown.max.retries is 0)"
    attempts = 0
    while attempts < settings.max_retries:
        epoch = broker_epoch()
        if epoch is None:
            last_error = "this broker is not registered: the controller does not know it"
            break
        attempts += 1
        try:
            response = await link.send(
                ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch),
                timeout_s=settings.request_timeout_ms / 1000,
            )
        except ControllerUnavailableError as e:
            last_error = str(e)
        else:
            remaining = tuple(
                f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions
            )
            if response.error_code != ErrorCode.none:
                last_error = f"the controller answered {ErrorCode(response.error_code).name}"
            elif remaining:
                last_error = f"{len(remaining)} partitions have no other in-sync replica to move to"
            else:
                log.info(
                    "controlled shutdown succeeded after %d attempt(s) in %.0f ms",
                    attempts,
                    (time.monotonic() - started_s) * 1000,
                )
                return Result(True, attempts, (), "")
        left = settings.max_retries - attempts
        log.info("controlled shutdown attempt %d failed: %s", attempts, last_error)
        if left > 0:
            log.info(
                "retrying controlled shutdown in %d ms (%d left)", settings.retry_backoff_ms, left
            )
            await sleep(settings.retry_backoff_ms / 1000)
    log.warning(
        "proceeding to stop without a completed controlled shutdown after %d attempt(s) in "
        "%.0f ms: %s%s",
        attempts,
        (time.monotonic() - started_s) * 1000,
        last_error,
        f"; still leading {len(remaining)} partitions: {', '.join(remaining[:NAMES_LOGGED_MAX])}"
        if remaining
        else "",
    )
    return Result(False, attempts, remaining, last_error)
