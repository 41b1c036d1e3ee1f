"""Play rounds of cases over raw sockets to a broker's listeners, and say what came back.

A ``Target`` is one listener: its address, the APIs it serves (what its ApiVersions
advertises), the ``Pools`` its cases aim at, and how it is reached (``Role``): over TLS or not,
logged in over SASL first or not (``fuzzing.login``). ``play`` opens one TCP connection per
connection of the round (127.0.0.1 only) and, on each, either writes every frame at once
(pipelined) or one at a time, waiting for each answer. It reads responses until every case that
must be answered has been, the broker closes the connection, or the round's time is up; then a
short linger for late answers, and the connections are closed (whatever a huge size prefix made
the broker hold is given back only then, so memory is sampled meanwhile).

Responses are matched to cases by the correlation id each frame carries as sent (a mutation
may have changed the one drawn), in order. ``Outcome`` records, per case, the response frame
(without its size prefix), whether the connection was closed before it, and whether its answer
was owed: a well-formed request (``Case.answer_expected``) with only well-formed requests before
it on its connection and a correlation id no other case there carries, answered within its own
wait (Fetch's ``max_wait``, a request ``timeout``) plus the work it and the answers ahead of it
may rightly take (``Case.work_s``) plus ``ANSWER_GRACE_S``. ``judge`` turns
outcomes into findings: an owed answer missing (a hang) or the connection closed on it, a
response that does not decode, a record set Kafka refuses that the broker accepted, an answer
to anything but ApiVersions and SASL on a connection that never authenticated, and a control
plane request of a principal that is not the cluster that was not refused. It also returns
the acknowledged appends (topic, partition, base offset, count) of well-formed Produce
requests.

Everything is bounded: ``ROUND_TIMEOUT_S`` per round (or the round's own ``timeout_s``),
``RESPONSE_BYTES_MAX`` per response.
Called from the test's thread; each ``play`` runs its own event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ssl
import struct
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fuzzing.login import Login, log_in
from fuzzing.strategies import Case, Pools, Round
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import decode_response
from odradek.protocol.errors import InvalidResponseError

__all__ = ["Target", "Role", "Outcome", "Ack", "play", "judge", "round_timeout", "ROUND_TIMEOUT_S"]

ROUND_TIMEOUT_S = 6.0
ANSWER_GRACE_S = 3.0  # generous: the machine is shared and loaded
LINGER_S = 0.3  # after the owed answers, for the others (and for memory to be sampled)
CONNECT_TIMEOUT_S = 5.0
RESPONSE_BYTES_MAX = 256 * 1024 * 1024


class Role(enum.Enum):
    """What a target's connections are, and so what its answers must be."""

    SERVED = "served"  # plaintext, or authenticated (``login``): well-formed requests answered
    UNAUTHENTICATED = "unauthenticated"  # a SASL listener, no login: only SASL_APIS answered
    REFUSED = "refused"  # authenticated, not the cluster: CLUSTER_REFUSED_APIS refused
    RAW = "raw"  # bytes into a TLS listener without TLS: nothing is owed


# Before authentication a SASL listener answers these alone (Kafka's SaslServerAuthenticator);
# an answer to any other request on an unauthenticated connection is a way around SASL.
SASL_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# The control plane's requests: a principal without CLUSTER_ACTION gets this error code, whole.
CLUSTER_REFUSED_APIS = frozenset(
    {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA}
)


@dataclass(frozen=True)
class Target:
    """One listener of one broker, reached over ``tls`` if given, logged in as ``login`` if
    given (``fuzzing.login``)."""

    name: str
    host: str
    port: int
    apis: Mapping[int, tuple[int, int]]
    pools: Pools
    tls: ssl.SSLContext | None = None
    login: Login | None = None
    role: Role = Role.SERVED

    @property
    def owes_answers(self) -> bool:
        return self.role in (Role.SERVED, Role.REFUSED)


@dataclass
class Outcome:
    case: Case
    connection: int
    owed: bool  # the broker owes an answer within ``deadline_s`` of the round's start
    deadline_s: float
    response: bytes | None = None
    closed_before_answer: bool = False
    answered_after_s: float | None = None
    round: int = 0  # set by the session, for reports
    # The correlation id as sent (a mutation may have changed it), and whether no other case
    # on the connection was sent with the same one (else an answer cannot be told apart).
    wire_id: int | None = None
    unique_id: bool = True


@dataclass(frozen=True)
class Ack:
    """An append the broker acknowledged to a well-formed Produce request."""

    topic: str
    partition: int
    base_offset: int
    count: int
    case: Case


@dataclass
class _Connection:
    index: int
    target: Target
    outcomes: list[Outcome] = field(default_factory=list)
    unmatched: list[int] = field(default_factory=list)  # correlation ids of stray responses


def round_timeout(round_: Round) -> float:
    return ROUND_TIMEOUT_S if round_.timeout_s is None else round_.timeout_s


def _owed_deadlines(round_: Round, owes_answers: Sequence[bool]) -> list[tuple[bool, float]]:
    """For each case: whether its answer is owed, and by when (seconds into the round).
    ``owes_answers`` says, for each target, whether it answers well-formed requests at all
    (``Target.owes_answers``).

    What follows a request on its connection never excuses its answer: Kafka reads the next
    request only once it has answered the previous one, so a request that does not parse, or a
    size prefix out of bounds, closes the connection only after the answers before it.
    """
    result = []
    clean_so_far: dict[int, bool] = {}
    waited: dict[int, float] = {}
    worked: dict[int, float] = {}  # the work of the answers ahead of it, and its own
    round_timeout_s = round_timeout(round_)
    for case, connection in zip(round_.cases, round_.connection_of, strict=True):
        clean = clean_so_far.get(connection, True)
        wait_s = max(waited.get(connection, 0.0), max(case.wait_ms, 0) / 1000)
        worked[connection] = worked.get(connection, 0.0) + case.work_s
        deadline = wait_s + worked[connection] + ANSWER_GRACE_S
        owed = (
            clean
            and case.answer_expected
            and deadline < round_timeout_s
            and owes_answers[case.target]
        )
        result.append((owed, deadline))
        # After an ill-formed request (or acks=0, which Kafka answers with a closed connection
        # when it fails) nothing on this connection is owed.
        clean_so_far[connection] = clean and case.answer_expected
        waited[connection] = wait_s
    return result


def _wire_id(case: Case) -> int | None:
    """The correlation id in the frame as sent: after the size prefix, api key and version."""
    return struct.unpack_from(">i", case.frame, 8)[0] if len(case.frame) >= 12 else None


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    if not 0 <= size <= RESPONSE_BYTES_MAX:
        raise ValueError(f"response size prefix {size}")
    return await reader.readexactly(size)


async def _serve_connection(
    connection: _Connection, pipelined: bool, started: float, round_end: float
) -> None:
    loop = asyncio.get_running_loop()
    target = connection.target
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                target.host,
                target.port,
                ssl=target.tls,
                server_hostname=target.host if target.tls is not None else None,
            ),
            CONNECT_TIMEOUT_S,
        )
    except (OSError, TimeoutError):
        for outcome in connection.outcomes:
            outcome.closed_before_answer = True
        return
    if target.login is not None:
        try:
            await log_in(reader, writer, target.login)
        except BaseException:
            writer.transport.abort()
            raise
    pending = list(connection.outcomes)

    def owed_open() -> list[Outcome]:
        return [o for o in pending if o.owed]

    async def read_until(done, end: float) -> bool:
        """Read responses until ``done()`` or ``end``; False once the connection is closed."""
        while not done():
            remaining = end - loop.time()
            if remaining <= 0:
                return True
            try:
                frame = await asyncio.wait_for(_read_frame(reader), remaining)
            except TimeoutError:
                return True
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                for outcome in pending:
                    outcome.closed_before_answer = True
                return False
            correlation_id = struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else None
            match = next((o for o in pending if o.wire_id == correlation_id), None)
            if match is None:
                connection.unmatched.append(correlation_id)
                continue
            # Answers come in order: earlier cases with no answer got none (acks=0, or closed).
            del pending[: pending.index(match) + 1]
            match.response = frame
            match.answered_after_s = loop.time() - started
        return True

    try:
        open_ = True
        if pipelined:
            writer.write(b"".join(o.case.frame for o in connection.outcomes))
            # Not read meanwhile: a broker that stops reading until its answers are read holds
            # this up to the round's end (then the owed answers are missing).
            with contextlib.suppress(ConnectionError, TimeoutError):
                await asyncio.wait_for(writer.drain(), max(0.0, round_end - loop.time()))
            owed_end = max((started + o.deadline_s for o in owed_open()), default=loop.time())
            open_ = await read_until(lambda: not owed_open(), min(owed_end, round_end))
        else:
            for outcome in connection.outcomes:
                writer.write(outcome.case.frame)
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
                end = started + outcome.deadline_s if outcome.owed else loop.time() + LINGER_S
                open_ = await read_until(lambda o=outcome: o not in pending, min(end, round_end))
                if not open_:
                    break
        if open_ and pending:
            await read_until(lambda: not pending, min(loop.time() + LINGER_S, round_end))
    finally:
        writer.transport.abort()


async def _play(round_: Round, targets: Sequence[Target]) -> list[Outcome]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    connections: dict[int, _Connection] = {}
    outcomes = []
    sent_ids = Counter(
        (index, _wire_id(case))
        for case, index in zip(round_.cases, round_.connection_of, strict=True)
    )
    for case, index, (owed, deadline) in zip(
        round_.cases,
        round_.connection_of,
        _owed_deadlines(round_, [t.owes_answers for t in targets]),
        strict=True,
    ):
        connection = connections.setdefault(index, _Connection(index, targets[case.target]))
        wire_id = _wire_id(case)
        unique = sent_ids[(index, wire_id)] == 1
        outcome = Outcome(case, index, owed and unique, deadline, wire_id=wire_id, unique_id=unique)
        connection.outcomes.append(outcome)
        outcomes.append(outcome)
    await asyncio.gather(
        *(
            _serve_connection(c, round_.pipelined[i], started, started + round_timeout(round_))
            for i, c in connections.items()
        )
    )
    return outcomes


def play(round_: Round, targets: Sequence[Target]) -> tuple[list[Outcome], float]:
    """Send ``round_``; its outcomes, in case order, and how long it took."""
    started = time.monotonic()
    outcomes = asyncio.run(_play(round_, targets))
    return outcomes, time.monotonic() - started


def _produce_acks(outcome: Outcome, body) -> tuple[list[Ack], list[str]]:
    """Acknowledged appends of a Produce answer, and accepted record sets Kafka refuses."""
    acks, accepted = [], []
    results = {
        (topic.name, p.index): p for topic in body.responses for p in topic.partition_responses
    }
    named = Counter((topic, partition) for topic, partition, _ in outcome.case.produce)
    for topic, partition, records in outcome.case.produce:
        result = results.get((topic, partition))
        if result is None or result.error_code != ErrorCode.none:
            continue
        if named[(topic, partition)] > 1:
            continue  # named twice: which record set the answer is about is not known
        if records.kafka_refuses:
            accepted.append(f"{topic}[{partition}] at {result.base_offset}: {records.kind}")
        elif records.offsets_max:
            acks.append(
                Ack(topic, partition, result.base_offset, records.offsets_max, outcome.case)
            )
    return acks, accepted


def _wire_api_key(case: Case) -> int | None:
    """The api key in the frame as sent (a mutation may have put another one there)."""
    return struct.unpack_from(">h", case.frame, 4)[0] if len(case.frame) >= 6 else None


def _refusal_findings(outcomes: Sequence[Outcome], targets: Sequence[Target]) -> list[str]:
    """What an unauthenticated connection, or a principal that is not the cluster, got served.

    Only cases on a stream still framed as sent are judged (after a broken size prefix the
    broker reads other bytes than the harness thinks), and only answers that match one case.
    """
    findings = []
    broken: set[int] = set()
    for outcome in outcomes:
        case, role = outcome.case, targets[outcome.case.target].role
        judged = outcome.connection not in broken and outcome.unique_id
        if case.breaks_stream:
            broken.add(outcome.connection)
        if not judged or outcome.response is None:
            continue
        if role is Role.UNAUTHENTICATED:
            api_key = _wire_api_key(case)
            if api_key not in SASL_APIS:
                findings.append(
                    f"answered api key {api_key} on a connection that never authenticated: "
                    f"{case.description}"
                )
        elif role is Role.REFUSED and case.api_key in CLUSTER_REFUSED_APIS and not case.mutated:
            try:
                decoded = decode_response(case.api_key, case.api_version, outcome.response)
            except InvalidResponseError as e:
                findings.append(f"a response that does not decode ({e}): {case.description}")
                continue
            code = int(decoded.body.error_code)
            if code != ErrorCode.cluster_authorization_failed:
                findings.append(
                    f"a principal without CLUSTER_ACTION got error code {code}, not "
                    f"CLUSTER_AUTHORIZATION_FAILED: {case.description}"
                )
    return findings


def judge(outcomes: Sequence[Outcome], targets: Sequence[Target]) -> tuple[list[str], list[Ack]]:
    """Findings about the answers (see the module docstring), and the acknowledged appends."""
    findings: list[str] = _refusal_findings(outcomes, targets)
    acks: list[Ack] = []
    for outcome in outcomes:
        case = outcome.case
        if outcome.owed and outcome.response is None:
            what = "closed the connection" if outcome.closed_before_answer else "did not answer"
            findings.append(
                f"the broker {what} within {outcome.deadline_s:.1f} s on a well-formed request: "
                f"{case.description}"
            )
            continue
        if outcome.response is None or case.mutated or not outcome.unique_id:
            continue  # a mutated request may have become another one: its answer proves little
        if targets[case.target].role is not Role.SERVED:
            continue  # judged above
        try:
            decoded = decode_response(case.api_key, case.api_version, outcome.response)
        except InvalidResponseError as e:
            findings.append(f"a response that does not decode ({e}): {case.description}")
            continue
        if case.api_key == ApiKey.PRODUCE:
            produce_acks, accepted = _produce_acks(outcome, decoded.body)
            acks += produce_acks
            findings += [f"accepted a record set Kafka refuses: {a}" for a in accepted]
    return findings, acks
