"""ElectLeaders (API 43, v0-2) on the wire: what a request asks, and the answers built for it.

Pure functions of kio's dataclasses, shared by the controller's listener
(``controller.handlers.elect_leaders``; the controller decides the elections,
``controller.leader_balance``) and the broker (which forwards a client's request to the
controller and answers it, ``broker.admin.leader_election``); here, so that neither imports the
other. What they read and write are ``election``'s values. The rules are Kafka's:

- v0 has no ``election_type``: it is a preferred election (Kafka's ``ElectLeadersRequest
  .electionType``); v1 adds the election type and a top-level error code. An election type other
  than PREFERRED (0) or UNCLEAN (1) is INVALID_REQUEST for the whole request, as Kafka's
  controller refuses it.
- ``topic_partitions`` null means every partition of the cluster; a partition named twice is
  elected once (Kafka reads the request as a set).
- A whole-request refusal (NOT_CONTROLLER, REQUEST_TIMED_OUT, INVALID_REQUEST) is Kafka's
  ``getErrorResponse``: the top-level error (v1+), and the same error for every partition the
  request named (none when it named none, i.e. asked for every partition).
- Results are grouped by topic in the order the request named them; with a null request the
  partitions that needed no election are left out of the answer (Kafka's broker filters
  ELECTION_NOT_NEEDED from an all-partitions answer).

A request may name 250,000 partitions in 1 MB (issue 23: one kept another client of the broker
waiting 1.3 s): the ``_in_slices`` forms read, build and answer them in time slices
(``time_slices``) for the paths a request takes; the plain forms serve the refusals.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from odradek.cluster.election import ElectionAsked, ElectionType, Outcome
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.time_slices import TimeSlices, sliced

API_KEY = ApiKey.ELECT_LEADERS
FIRST_VERSION_WITH_ELECTION_TYPE = 1


class InvalidElectionRequest(Exception):
    """The request cannot be served at all (an unknown election type)."""


def parse(request: Any) -> ElectionAsked:
    """The request's election type, partitions (deduplicated, in order) and timeout."""
    election_type = _election_type(request)
    partitions = None if request.topic_partitions is None else tuple(named_partitions(request))
    return ElectionAsked(election_type, partitions, timeout_ms(request))


async def parse_in_slices(request: Any, slices: TimeSlices | None = None) -> ElectionAsked:
    """``parse``, its partitions read in time slices (``time_slices``): 1 MB names 250,000."""
    election_type = _election_type(request)
    partitions = None
    if request.topic_partitions is not None:
        partitions = tuple(await _named_in_slices(request, slices))
    return ElectionAsked(election_type, partitions, timeout_ms(request))


async def _named_in_slices(request: Any, slices: TimeSlices | None) -> list[TopicPartition]:
    """``named_partitions`` in time slices."""
    named: dict[TopicPartition, None] = {}
    async for topic in sliced(request.topic_partitions or (), slices):
        async for p in sliced(topic.partitions, slices):
            named[(topic.topic, int(p))] = None
    return list(named)


def _election_type(request: Any) -> ElectionType:
    if request.__version__ < FIRST_VERSION_WITH_ELECTION_TYPE:
        return ElectionType.PREFERRED
    try:
        return ElectionType(int(request.election_type))
    except ValueError as e:
        raise InvalidElectionRequest(f"Unknown election type {int(request.election_type)}") from e


def timeout_ms(request: Any) -> int:
    return int(request.timeout.total_seconds() * 1000)


def named_partitions(request: Any) -> list[TopicPartition]:
    """Every partition the request names, in order (none when it asks for all)."""
    if request.topic_partitions is None:
        return []
    return list(
        dict.fromkeys(
            (topic.topic, int(p)) for topic in request.topic_partitions for p in topic.partitions
        )
    )


def build_response(
    version: int,
    outcomes: Mapping[TopicPartition, Outcome],
    *,
    error: ErrorCode = ErrorCode.none,
    all_partitions: bool = False,
) -> Any:
    """An ElectLeadersResponse of ``version`` with each partition's outcome, by topic."""
    response_type, results = _partition_results(version, outcomes, all_partitions)
    by_topic: dict[str, list[Any]] = {}
    for topic, result in results:
        by_topic.setdefault(topic, []).append(result)
    return _response(version, response_type, by_topic, error)


async def build_response_in_slices(
    version: int,
    outcomes: Mapping[TopicPartition, Outcome],
    *,
    error: ErrorCode = ErrorCode.none,
    all_partitions: bool = False,
    slices: TimeSlices | None = None,
) -> Any:
    """``build_response`` in time slices (``time_slices``), for a request naming many."""
    response_type, results = _partition_results(version, outcomes, all_partitions)
    by_topic: dict[str, list[Any]] = {}
    async for topic, result in sliced(results, slices):
        by_topic.setdefault(topic, []).append(result)
    return _response(version, response_type, by_topic, error)


def _partition_results(
    version: int, outcomes: Mapping[TopicPartition, Outcome], all_partitions: bool
) -> tuple[type[Any], Iterator[tuple[str, Any]]]:
    """The response class, and (topic, partition result) of each outcome to answer."""
    response_type = schemas.response_schema(API_KEY, version)
    partition_type = _element(
        _element(response_type, "replica_election_results"), "partition_result"
    )

    def results() -> Iterator[tuple[str, Any]]:
        for (topic, partition), outcome in outcomes.items():
            if all_partitions and outcome.error is ErrorCode.election_not_needed:
                continue
            yield (
                topic,
                partition_type(
                    partition_id=partition, error_code=outcome.error, error_message=outcome.message
                ),
            )

    return response_type, results()


def _response(
    version: int, response_type: type[Any], by_topic: dict[str, list[Any]], error: ErrorCode
) -> Any:
    topic_type = _element(response_type, "replica_election_results")
    fields: dict[str, Any] = {
        "throttle_time": timedelta(0),
        "replica_election_results": tuple(
            topic_type(topic=topic, partition_result=tuple(results))
            for topic, results in by_topic.items()
        ),
    }
    if version >= FIRST_VERSION_WITH_ELECTION_TYPE:
        fields["error_code"] = error
    return response_type(**fields)


def error_response(request: Any, error: ErrorCode, message: str | None = None) -> Any:
    """Kafka's ``getErrorResponse``: ``error`` at the top (v1+) and for every named partition."""
    outcomes = {tp: Outcome(error, message) for tp in named_partitions(request)}
    return build_response(request.__version__, outcomes, error=error)


async def error_response_in_slices(
    request: Any, error: ErrorCode, message: str | None = None
) -> Any:
    """``error_response`` in time slices (``time_slices``)."""
    slices = TimeSlices()
    named = await _named_in_slices(request, slices)
    outcome = Outcome(error, message)
    return await build_response_in_slices(
        request.__version__, dict.fromkeys(named, outcome), error=error, slices=slices
    )


def outcomes_of(response: Any) -> dict[TopicPartition, Outcome]:
    """Each partition's outcome in an ElectLeadersResponse of any version."""
    return dict(_outcomes(response))


async def outcomes_in_slices(
    response: Any, slices: TimeSlices | None = None
) -> dict[TopicPartition, Outcome]:
    """``outcomes_of`` in time slices (``time_slices``)."""
    return {tp: outcome async for tp, outcome in sliced(_outcomes(response), slices)}


def _outcomes(response: Any) -> Iterator[tuple[TopicPartition, Outcome]]:
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            yield (
                (topic.topic, int(p.partition_id)),
                Outcome(ErrorCode(p.error_code), p.error_message),
            )


def top_level_error(response: Any) -> ErrorCode:
    return ErrorCode(getattr(response, "error_code", ErrorCode.none))


def request_of(
    version: int,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None,
    timeout_ms: int,
) -> Any:
    """An ElectLeadersRequest of ``version`` (v0 only for PREFERRED)."""
    by_topic = None
    if partitions is not None:
        by_topic = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
    return _request(version, election_type, by_topic, timeout_ms)


async def request_in_slices(
    version: int,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None,
    timeout_ms: int,
    slices: TimeSlices | None = None,
) -> Any:
    """``request_of`` in time slices (``time_slices``): a broker forwards 250,000 partitions."""
    by_topic = None
    if partitions is not None:
        by_topic = {}
        async for topic, partition in sliced(partitions, slices):
            by_topic.setdefault(topic, []).append(partition)
    return _request(version, election_type, by_topic, timeout_ms)


def _request(
    version: int,
    election_type: ElectionType,
    by_topic: dict[str, list[int]] | None,
    timeout_ms: int,
) -> Any:
    if version < FIRST_VERSION_WITH_ELECTION_TYPE and election_type is not ElectionType.PREFERRED:
        raise ValueError("ElectLeaders v0 only elects preferred leaders")
    request_type = schemas.request_schema(API_KEY, version)
    topic_type = _element(request_type, "topic_partitions")
    topic_partitions = None
    if by_topic is not None:
        topic_partitions = tuple(
            topic_type(topic=topic, partitions=tuple(ids)) for topic, ids in by_topic.items()
        )
    fields: dict[str, Any] = {
        "topic_partitions": topic_partitions,
        "timeout": timedelta(milliseconds=timeout_ms),
    }
    if version >= FIRST_VERSION_WITH_ELECTION_TYPE:
        fields["election_type"] = int(election_type)
    return request_type(**fields)


def _element(cls: type[Any], field_name: str) -> type[Any]:
    """The class of the elements of a ``tuple[X, ...] | None`` field."""
    hint = cls.__dataclass_fields__[field_name].type
    args = getattr(hint, "__args__", ())
    for arg in args:
        inner = getattr(arg, "__args__", None)
        if inner:
            return inner[0]
    return args[0]
