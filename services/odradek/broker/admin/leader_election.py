"""ElectLeaders on a broker: forward the client's request to the controller, wait for the news.

Only the controller elects leaders, and Odradek's controller is its own process: the broker that
receives ElectLeaders (clients send it to the broker Metadata names as controller) forwards it
(``forwarding``) and answers with the controller's outcomes, as Kafka's KRaft brokers
forward it. Rules:

- The request goes at the client's version, except v0, which goes as v1 with election type
  PREFERRED (the same request): a v0 answer has no top-level error, so the link could not see a
  NOT_CONTROLLER from a controller that just stepped down and retry elsewhere.
- The request's ``timeout`` bounds the whole call, but the controller is given at least
  ``CONTROLLER_TIMEOUT_MS_MIN`` to answer: a client asking not to wait (timeout 0, librdkafka's
  ``operation_timeout=0``) still gets its elections made, as Kafka's controller makes them; only
  the wait below is cut short. No controller answering in that time (none elected, unreachable,
  stepped down): REQUEST_TIMED_OUT for the request (Kafka's answer for a forwarded request that
  timed out), in ``getErrorResponse``'s shape (``cluster.elect_leaders``).
- Elected partitions are answered once this broker's metadata shows their new leader (the
  preferred replica for PREFERRED, a live leader for UNCLEAN), polled every
  ``LEADER_WAIT_POLL_S`` until the timeout; those still waiting then get REQUEST_TIMED_OUT (Kafka's
  ``DelayedElectLeader``). So a client that asks for metadata next sees the new leaders.
- An unknown election type is INVALID_REQUEST, refused here without asking the controller.

A request may name 250,000 partitions in 1 MB: it is read, forwarded (encoded off the loop by
the link) and answered in time slices (``cluster.elect_leaders``' ``_in_slices`` forms), and so
is the refusal of it all (issue 23: at 1 MB another client of the broker waited 1.3 s before).

Runs on the broker's event loop; never raises into the handler.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

from odradek.broker.controller_link import ControllerLink
from odradek.broker.forwarding import forward
from odradek.broker.metadata_cache import MetadataCache
from odradek.cluster import elect_leaders as el
from odradek.cluster.election import ElectionType, Outcome
from odradek.common.partitions import NO_LEADER, TopicPartition
from odradek.errors import ErrorCode
from odradek.time_slices import TimeSlices

LEADER_WAIT_POLL_S = 0.05
CONTROLLER_TIMEOUT_MS_MIN = 5_000


class _Refused(NamedTuple):
    """The request refused whole by this broker: (error, message), answered in its version."""

    response: tuple[ErrorCode, str]


async def elect_leaders(
    controller: ControllerLink | None,
    metadata: MetadataCache,
    request: Any,
    *,
    controller_timeout_ms_min: int = CONTROLLER_TIMEOUT_MS_MIN,
) -> Any:
    """The answer to a client's ElectLeaders request (see the module docstring)."""
    version = request.__version__
    slices = TimeSlices()
    try:
        asked = await el.parse_in_slices(request, slices)
    except el.InvalidElectionRequest as e:
        return await el.error_response_in_slices(request, ErrorCode.invalid_request, str(e))
    timeout_s = max(0.0, asked.timeout_ms / 1000)
    deadline = time.monotonic() + timeout_s
    forwarded = await el.request_in_slices(
        max(version, el.FIRST_VERSION_WITH_ELECTION_TYPE),
        asked.election_type,
        asked.partitions,
        asked.timeout_ms,
        slices,
    )

    answer = await forward(
        controller,
        forwarded,
        lambda error, message: _Refused((error, message)),
        timeout_s=max(timeout_s, controller_timeout_ms_min / 1000),
    )
    if isinstance(answer, _Refused):  # no controller answered: nothing was elected
        return await el.error_response_in_slices(request, *answer.response)
    outcomes = await el.outcomes_in_slices(answer, slices)
    await _wait_for_leaders(metadata, outcomes, asked.election_type, deadline)
    return await el.build_response_in_slices(
        version, outcomes, error=el.top_level_error(answer), slices=slices
    )


async def _wait_for_leaders(
    metadata: MetadataCache,
    outcomes: dict[TopicPartition, Outcome],
    election_type: ElectionType,
    deadline: float,
) -> None:
    """Until ``metadata`` shows each elected partition's new leader; the rest time out."""
    waiting = {tp for tp, outcome in outcomes.items() if outcome.error is ErrorCode.none}
    while waiting:
        waiting = {tp for tp in waiting if not _shows_leader(metadata, tp, election_type)}
        if not waiting or time.monotonic() >= deadline:
            break
        await asyncio.sleep(min(LEADER_WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
    for tp in waiting:
        outcomes[tp] = Outcome(ErrorCode.request_timed_out)


def _shows_leader(metadata: MetadataCache, tp: TopicPartition, election_type: ElectionType) -> bool:
    topic = metadata.topic(tp[0])
    partition = None if topic is None else topic.partitions.get(tp[1])
    if partition is None:
        return False
    if election_type is ElectionType.PREFERRED:
        return bool(partition.replicas) and partition.leader == partition.replicas[0]
    return partition.leader != NO_LEADER and partition.leader in metadata.brokers
