"""Users' SCRAM credentials in ZooKeeper, as Kafka keeps them (KIP-554's broker side).

Layout (``security.scram`` has the value format)::

    /config/users/<sanitized user>   {"version":1,"config":{"SCRAM-SHA-512":"salt=...,..."}}
    /config/changes/config_change_<seq>   {"version":2,"entity_path":"users/<sanitized user>"}

The user's node may hold other configs (quotas: ``producer_byte_rate``, ...): they are kept as
they are. An alteration of one user is one ZooKeeper transaction (compare-and-set on the node's
version, plus the change notification, so Kafka's brokers and tools see it too); a lost race
reads again, up to ``WRITE_ATTEMPTS_MAX``. Brokers read a credential when a client
authenticates (``read_credential``), so a change applies to the next authentication at once.

``describe`` and ``alter`` follow Kafka's ``ZkAdminManager`` (``describeUserScramCredentials``,
``alterUserScramCredentials``): their checks, error codes and words. A user's alterations are
all applied or none (the first error is that user's result); other users are independent.

Bounded work (issue 23): a request's users are counted and grouped in one pass and answered in
time slices (``time_slices``), each distinct user once; the users that have a node are listed
once per request (``/config/users``), so a user named without one (a credential to describe or
delete that cannot exist) is answered without a ZooKeeper read of its own. 1 MB names 500,000
users (or 166,000 distinct deletions): counting each one's repeats by a scan of the whole list
held the broker's loop 3 s at a tenth of that size, and a read per user took 29 s (main,
measured by tests/integration/cluster/test_request_work_bounds.py).

Runs on the broker's event loop (ZooKeeper calls are awaited).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.broker.admin.errors import WRITE_ATTEMPTS_MAX
from odradek.errors import ErrorCode
from odradek.security.scram import (
    ITERATIONS_MAX,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    sanitize,
    unsanitize,
)
from odradek.time_slices import TimeSlices, sliced
from odradek.zk.client import CreateOp, SetDataOp, ZkClient
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError, ZkDataError
from odradek.zk.paths import (
    CONFIG_PATH,
    ConfigChangeNotification,
    EntityConfig,
    config_change_path_prefix,
    entity_config_path,
)

__all__ = [
    "Deletion",
    "DescribeResult",
    "Upsertion",
    "alter",
    "describe",
    "read_credential",
]

log = logging.getLogger(__name__)

USERS_CONFIG_PATH = f"{CONFIG_PATH}/users"
NOT_FOUND = "Attempt to describe a user credential that does not exist"  # Kafka's words
DELETE_NOT_FOUND = "Attempt to delete a user credential that does not exist"


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int  # the wire type


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.user!r}, {self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class DescribeResult:
    user: str
    error: ErrorCode
    message: str | None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism wire type, iterations)


def user_path(user: str) -> str:
    return entity_config_path("users", sanitize(user))


async def _read(zk: ZkClient, user: str) -> tuple[dict[str, str], int | None]:
    path = user_path(user)
    try:
        data, stat = await zk.aget(path)
    except NoNodeError:
        return {}, None
    return dict(EntityConfig.decode(data, path).config), stat.version


def _credentials(user: str, config: dict[str, str]) -> dict[ScramMechanism, ScramCredential]:
    found: dict[ScramMechanism, ScramCredential] = {}
    for mechanism in ScramMechanism:
        text = config.get(mechanism.mechanism_name)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.decode(text)
        except ValueError as e:
            log.warning(
                "%s: ignoring the %s credential: %s", user_path(user), mechanism.mechanism_name, e
            )
    return found


async def read_credential(
    zk: ZkClient | None, user: str, mechanism: ScramMechanism
) -> ScramCredential | None:
    """The user's credential for ``mechanism``; None if there is none (or it is unreadable)."""
    if zk is None or not user:
        return None
    try:
        config, _ = await _read(zk, user)
    except (ValueError, ZkDataError) as e:
        log.warning("%s: unreadable: %s", user_path(user), e)
        return None
    return _credentials(user, config).get(mechanism)


async def describe(
    zk: ZkClient, users: Sequence[str] | None, slices: TimeSlices | None = None
) -> list[DescribeResult]:
    """Every user with a credential when ``users`` is None or empty; else those named."""
    if not users:
        try:
            names = await zk.achildren(USERS_CONFIG_PATH)
        except NoNodeError:
            names = []
        results = []
        for name in sorted(names):
            user = unsanitize(name)
            found = await _describe_one(zk, user)
            if found.error is ErrorCode.none:
                results.append(found)
        return results
    slices = slices if slices is not None else TimeSlices()
    counts: dict[str, int] = {}
    async for user in sliced(users, slices):
        counts[user] = counts.get(user, 0) + 1
    stored = await _stored_users(zk)
    results = []
    async for user, count in sliced(counts.items(), slices):
        if count > 1:
            results.append(
                DescribeResult(
                    user,
                    ErrorCode.duplicate_resource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                )
            )
        elif sanitize(user) not in stored:
            results.append(DescribeResult(user, ErrorCode.resource_not_found, NOT_FOUND))
        else:
            results.append(await _describe_one(zk, user))
    return results


async def _stored_users(zk: ZkClient) -> frozenset[str]:
    """The (sanitized) users with a node under ``/config/users``: one read for a request, so a
    user named without one costs no ZooKeeper round trip (see the module docstring)."""
    try:
        return frozenset(await zk.achildren(USERS_CONFIG_PATH))
    except NoNodeError:
        return frozenset()


async def _describe_one(zk: ZkClient, user: str) -> DescribeResult:
    try:
        config, _ = await _read(zk, user)
    except (ValueError, ZkDataError):
        config = {}
    credentials = _credentials(user, config)
    if not credentials:
        return DescribeResult(user, ErrorCode.resource_not_found, NOT_FOUND)
    return DescribeResult(
        user,
        ErrorCode.none,
        None,
        tuple((m.wire_type, c.iterations) for m, c in sorted(credentials.items(), key=_order)),
    )


def _order(item: tuple[ScramMechanism, ScramCredential]) -> int:
    return item[0].wire_type


def _check_upsertion(upsertion: Upsertion, mechanism: ScramMechanism) -> str | None:
    if upsertion.iterations < mechanism.min_iterations:
        return "Too few iterations"
    if upsertion.iterations > ITERATIONS_MAX:
        return "Too many iterations"
    if not upsertion.salt:
        return "Salt must not be empty"
    if len(upsertion.salted_password) != mechanism.digest_bytes:
        return (
            f"The salted password of a {mechanism.mechanism_name} credential is "
            f"{mechanism.digest_bytes} bytes"
        )
    return None


async def alter(
    zk: ZkClient,
    deletions: Sequence[Deletion],
    upsertions: Sequence[Upsertion],
    slices: TimeSlices | None = None,
) -> list[tuple[str, ErrorCode, str | None]]:
    """(user, error, message) per user named, in the order first named; see the module."""
    slices = slices if slices is not None else TimeSlices()
    ops: dict[str, list[Deletion | Upsertion]] = {}  # per user, in the order first named
    async for op in sliced(itertools.chain(deletions, upsertions), slices):
        ops.setdefault(op.user, []).append(op)
    stored = await _stored_users(zk)
    results = []
    async for user, mine in sliced(ops.items(), slices):
        error, message = _check_user(user, mine)
        if error is ErrorCode.none:
            if sanitize(user) not in stored and any(isinstance(op, Deletion) for op in mine):
                error, message = ErrorCode.resource_not_found, DELETE_NOT_FOUND
            else:
                error, message = await _apply(zk, user, mine)
        results.append((user, error, message))
    return results


def _check_user(user: str, ops: Sequence[Deletion | Upsertion]) -> tuple[ErrorCode, str | None]:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if sanitize(user) in (".", ".."):  # no znode can have that name
        return ErrorCode.unacceptable_credential, f"Username {user!r} cannot be stored"
    seen: set[int] = set()
    for op in ops:
        mechanism = ScramMechanism.by_wire_type(op.mechanism)
        if mechanism is None:
            return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        if op.mechanism in seen:
            return (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        seen.add(op.mechanism)
        if isinstance(op, Upsertion):
            problem = _check_upsertion(op, mechanism)
            if problem is not None:
                return ErrorCode.unacceptable_credential, problem
    return ErrorCode.none, None


async def _apply(
    zk: ZkClient, user: str, ops: Sequence[Deletion | Upsertion]
) -> tuple[ErrorCode, str | None]:
    path = user_path(user)
    for _ in range(WRITE_ATTEMPTS_MAX):
        try:
            config, version = await _read(zk, user)
        except (ValueError, ZkDataError) as e:
            return ErrorCode.unknown_server_error, f"{path} is unreadable: {e}"
        for op in ops:
            mechanism = ScramMechanism.by_wire_type(op.mechanism)
            assert mechanism is not None  # checked
            if isinstance(op, Deletion):
                if config.pop(mechanism.mechanism_name, None) is None:
                    return ErrorCode.resource_not_found, DELETE_NOT_FOUND
            else:
                credential = credential_from_salted_password(
                    mechanism, op.salt, op.salted_password, op.iterations
                )
                config[mechanism.mechanism_name] = credential.encode()
        data = EntityConfig(config).encode()
        write = CreateOp(path, data) if version is None else SetDataOp(path, data, version=version)
        notification = ConfigChangeNotification.for_entity("users", sanitize(user)).encode()
        try:
            await zk.atransaction(
                [write, CreateOp(config_change_path_prefix(), notification, sequence=True)]
            )
        except (BadVersionError, NodeExistsError):
            continue  # another alteration won: read again and apply ours again
        log.info(
            "%s: SCRAM credentials altered (%s)",
            path,
            ", ".join(
                f"{'deleted' if isinstance(op, Deletion) else 'set'} "
                f"{ScramMechanism.by_wire_type(op.mechanism).mechanism_name}"  # type: ignore[union-attr]
                for op in ops
            ),
        )
        return ErrorCode.none, None
    return ErrorCode.unknown_server_error, f"{path} kept changing while it was being altered"
