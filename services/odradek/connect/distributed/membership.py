"""A distributed worker's membership in its group (``group.id``), through the group coordinator,
with the project's own client: FindCoordinator, JoinGroup (protocol type ``connect``, our
protocol name), SyncGroup, Heartbeat, LeaveGroup.

``GroupMember.run()`` loops until ``stop()``: find the coordinator, join, sync (the leader
computes every member's assignment through the ``assign`` callback and sends it), hand the
assignment to ``on_assignment``, then heartbeat every ``heartbeat.interval.ms`` until a rejoin
is needed: the coordinator answers REBALANCE_IN_PROGRESS (another member joined or left), the
member id or generation is no longer valid (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), the worker
asks for it (``request_rejoin()``: revocations to complete, a scheduled rebalance's delay, a
config change), or the coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost
connection: the coordinator is looked up again, a new connection opened).

Member ids: the first JoinGroup goes with an empty id; the coordinator answers
MEMBER_ID_REQUIRED with the id to use (KIP-394), and the member joins again with it. An
UNKNOWN_MEMBER_ID answer drops the id. INCONSISTENT_GROUP_PROTOCOL (a member of another kind,
e.g. a Java Connect worker, in the same group) is fatal: ``run()`` raises ``MembershipError``.

Security: ``security`` (TLS, SASL PLAIN or SCRAM, from the worker's top-level keys through
``client.security.client_security``) secures every connection, the coordinator's too. A refused
SASL exchange (a wrong password) is fatal as well: retrying cannot make it pass.

Bounds: JoinGroup waits at most ``rebalance.timeout.ms`` + ``JOIN_MARGIN_S`` (the coordinator
holds it until every member joined); SyncGroup the same; Heartbeat and LeaveGroup
``session.timeout.ms``; retries back off ``RETRY_BACKOFF_S``. ``on_assignment`` runs while the
heartbeats go on (stopping revoked tasks takes up to ``task.shutdown.graceful.timeout.ms``).

One member belongs to one event loop; ``request_rejoin`` and ``stop`` are called from that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from odradek.client.admin import ClusterClient, build, element_type
from odradek.client.connection import BrokerConnection
from odradek.client.coordinators import find_coordinator
from odradek.client.errors import AdminError, ClientError
from odradek.client.security import ClientSecurity, SaslAuthenticationError
from odradek.connect.distributed.protocol import (
    PROTOCOL_NAME,
    PROTOCOL_TYPE,
    Assignment,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from odradek.errors import ErrorCode
from odradek.protocol import schemas

__all__ = ["GroupMember", "MembershipError", "Generation"]

log = logging.getLogger(__name__)

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
JOIN_GROUP_MAX_VERSION = 7  # v8+ add only a free-text reason and v9 skip_assignment (static)
SYNC_GROUP_MAX_VERSION = 5
HEARTBEAT_MAX_VERSION = 4
LEAVE_GROUP_MAX_VERSION = 4
JOIN_MARGIN_S = 5.0
RETRY_BACKOFF_S = 0.2
LEAVE_TIMEOUT_S = 5.0
CLIENT_ID = "odradek-connect"

_COORDINATOR_MOVED = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
}
_REJOIN = {
    ErrorCode.rebalance_in_progress,
    ErrorCode.illegal_generation,
}


class MembershipError(Exception):
    """The group refuses this worker for good (e.g. INCONSISTENT_GROUP_PROTOCOL)."""


def _authentication_failed(error: BaseException) -> bool:
    """Whether a refused SASL exchange is the cause (ClusterClient wraps it)."""
    while error is not None:
        if isinstance(error, SaslAuthenticationError):
            return True
        error = error.__cause__
    return False


class _CoordinatorLost(Exception):
    """Look the coordinator up again and rejoin."""


class _Rejoin(Exception):
    """Join the group again (with the same member id unless it was dropped)."""


@dataclass(frozen=True)
class Generation:
    generation_id: int
    member_id: str
    leader_id: str

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


AssignFn = Callable[[Generation, Mapping[str, MemberMetadata]], Awaitable[Mapping[str, Assignment]]]
OnAssignmentFn = Callable[[Generation, Assignment], Awaitable[None]]


class GroupMember:
    """See the module docstring."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        group_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        metadata: Callable[[], MemberMetadata],
        assign: AssignFn,
        on_assignment: OnAssignmentFn,
        on_revoke_all: Callable[[], Awaitable[None]] | None = None,
        security: ClientSecurity | None = None,
    ):
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self.session_timeout_s = session_timeout_ms / 1000
        self.rebalance_timeout_s = rebalance_timeout_ms / 1000
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self._session_timeout_ms = session_timeout_ms
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._metadata = metadata
        self._assign = assign
        self._on_assignment = on_assignment
        self._on_revoke_all = on_revoke_all
        self.member_id = ""
        self.generation: Generation | None = None
        self._client = ClusterClient(
            bootstrap_servers,
            request_timeout_s=self.session_timeout_s,
            security=security,
            client_id=CLIENT_ID,
        )
        self._coordinator: BrokerConnection | None = None
        self._rejoin = asyncio.Event()
        self._stopping = asyncio.Event()
        self.joined = asyncio.Event()  # set after each completed SyncGroup, cleared on rejoin
        self.rebalances = 0

    # -- control ---------------------------------------------------------------------------------

    def request_rejoin(self) -> None:
        self._rejoin.set()

    async def stop(self) -> None:
        """Leave the group (bounded) and close the connections. ``run()`` returns."""
        self._stopping.set()
        self._rejoin.set()
        if self._coordinator is not None and self.member_id:
            with contextlib.suppress(ClientError, asyncio.TimeoutError, OSError):
                await asyncio.wait_for(self._leave(), LEAVE_TIMEOUT_S)
        await self._close_coordinator()
        await self._client.close()

    # -- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._coordinator is None or self._coordinator.closed:
                    await self._connect_coordinator()
                generation, assignment = await self._join_and_sync()
                self.generation = generation
                self.rebalances += 1
                self._rejoin.clear()
                self.joined.set()
                await self._stable(generation, assignment)
            except _CoordinatorLost as e:
                log.info("group %s: coordinator lost (%s); looking it up again", self.group_id, e)
                await self._close_coordinator()
                await self._pause(RETRY_BACKOFF_S)
            except _Rejoin as e:
                log.debug("group %s: rejoining (%s)", self.group_id, e)
                if not self.member_id and self.generation is not None:
                    # Our membership is gone: the leader may hand our work to others, so stop
                    # it all before joining as a new member (as Kafka's WorkerCoordinator does).
                    self.generation = None
                    if self._on_revoke_all is not None:
                        await self._on_revoke_all()
            except (ClientError, AdminError, OSError) as e:
                if _authentication_failed(e):
                    raise MembershipError(f"group {self.group_id}: {e}") from e
                log.info("group %s: %s; retrying", self.group_id, e)
                await self._close_coordinator()
                await self._pause(RETRY_BACKOFF_S)
            except MembershipError:
                raise
            except Exception:  # a callback failed (a store unreadable): log, rejoin, go on
                log.exception("group %s: a rebalance step failed; rejoining", self.group_id)
                await self._pause(RETRY_BACKOFF_S)
            finally:
                self.joined.clear()

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _stable(self, generation: Generation, assignment: Assignment) -> None:
        """Heartbeat while ``on_assignment`` applies the assignment and until a rejoin."""
        applying = asyncio.ensure_future(self._on_assignment(generation, assignment))
        try:
            while not self._stopping.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._rejoin.wait(), self.heartbeat_interval_s)
                if self._rejoin.is_set():
                    break
                await self._heartbeat(generation)
        finally:
            # The assignment is applied before the next join reports what runs here.
            await applying

    # -- requests --------------------------------------------------------------------------------

    async def _connect_coordinator(self) -> None:
        try:
            node_id = await find_coordinator(self._client, self.group_id)
        except AdminError as e:
            raise _CoordinatorLost(str(e)) from e
        host, port = self._client.broker_addresses[node_id]
        self._coordinator = await self._client.open_connection(host, port)

    async def _close_coordinator(self) -> None:
        connection, self._coordinator = self._coordinator, None
        if connection is not None:
            await connection.close()

    async def _send(self, api_key: int, max_version: int, timeout_s: float, **fields: Any) -> Any:
        connection = self._coordinator
        if connection is None or connection.closed:
            raise _CoordinatorLost("no connection to the coordinator")
        version = connection.pick_version(api_key, max_version)
        request_type = schemas.request_schema(api_key, version)
        if "protocols" in fields:
            protocol = element_type(request_type, "protocols")
            offered = fields["protocols"]
            fields["protocols"] = tuple(protocol(name=n, metadata=m) for n, m in offered)
        if "assignments" in fields:
            entry = element_type(request_type, "assignments")
            fields["assignments"] = tuple(
                entry(member_id=m, assignment=a) for m, a in fields["assignments"]
            )
        try:
            return await connection.send(build(request_type, **fields), timeout_s=timeout_s)
        except ClientError as e:
            raise _CoordinatorLost(str(e)) from e

    def _check(self, what: str, error: ErrorCode) -> None:
        if error == ErrorCode.none:
            return
        if error in _COORDINATOR_MOVED:
            raise _CoordinatorLost(f"{what}: {error.name}")
        if error == ErrorCode.unknown_member_id:
            self.member_id = ""
            raise _Rejoin(f"{what}: {error.name}")
        if error in _REJOIN:
            raise _Rejoin(f"{what}: {error.name}")
        if error == ErrorCode.inconsistent_group_protocol:
            raise MembershipError(
                f"group {self.group_id!r} has members that do not speak {PROTOCOL_NAME!r} "
                "(a Java Connect worker, or a consumer group of the same name?)"
            )
        raise MembershipError(f"group {self.group_id!r}: {what} answered {error.name}")

    async def _join_and_sync(self) -> tuple[Generation, Assignment]:
        metadata = encode_metadata(self._metadata())
        wait_s = self.rebalance_timeout_s + JOIN_MARGIN_S
        joined = await self._send(
            JOIN_GROUP,
            JOIN_GROUP_MAX_VERSION,
            wait_s,
            group_id=self.group_id,
            session_timeout=timedelta(milliseconds=self._session_timeout_ms),
            rebalance_timeout=timedelta(milliseconds=self._rebalance_timeout_ms),
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type=PROTOCOL_TYPE,
            protocols=((PROTOCOL_NAME, metadata),),
            reason=None,
        )
        error = ErrorCode(joined.error_code)
        if error == ErrorCode.member_id_required:
            self.member_id = str(joined.member_id)
            raise _Rejoin("the coordinator gave a member id")
        self._check("JoinGroup", error)
        self.member_id = str(joined.member_id)
        generation = Generation(int(joined.generation_id), self.member_id, str(joined.leader))
        assignments: list[tuple[str, bytes]] = []
        if generation.is_leader:
            members = {}
            for member in joined.members:
                try:
                    members[str(member.member_id)] = decode_metadata(member.metadata)
                except ProtocolError as e:
                    raise MembershipError(f"member {member.member_id}: {e}") from e
            computed = await self._assign(generation, members)
            assignments = [(m, encode_assignment(a)) for m, a in computed.items()]
        synced = await self._send(
            SYNC_GROUP,
            SYNC_GROUP_MAX_VERSION,
            wait_s,
            group_id=self.group_id,
            generation_id=generation.generation_id,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=PROTOCOL_NAME,
            assignments=assignments,
        )
        self._check("SyncGroup", ErrorCode(synced.error_code))
        try:
            assignment = decode_assignment(synced.assignment)
        except ProtocolError as e:
            raise _Rejoin(f"unreadable assignment: {e}") from e
        return generation, assignment

    async def _heartbeat(self, generation: Generation) -> None:
        answer = await self._send(
            HEARTBEAT,
            HEARTBEAT_MAX_VERSION,
            self.session_timeout_s,
            group_id=self.group_id,
            generation_id=generation.generation_id,
            member_id=self.member_id,
            group_instance_id=None,
        )
        self._check("Heartbeat", ErrorCode(answer.error_code))

    async def _leave(self) -> None:
        connection = self._coordinator
        if connection is None or connection.closed:
            return
        version = connection.pick_version(LEAVE_GROUP, LEAVE_GROUP_MAX_VERSION)
        request_type = schemas.request_schema(LEAVE_GROUP, version)
        if version < 3:
            request = build(request_type, group_id=self.group_id, member_id=self.member_id)
        else:
            identity = element_type(request_type, "members")
            member = build(identity, member_id=self.member_id, group_instance_id=None, reason=None)
            request = build(request_type, group_id=self.group_id, members=(member,))
        await connection.send(request, timeout_s=LEAVE_TIMEOUT_S)
        self.member_id = ""
