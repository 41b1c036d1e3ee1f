"""Kafka's ``AclAuthorizer`` (ZooKeeper mode): ACLs in ZooKeeper, a cache in every broker.

``authorize`` follows Kafka's ``AclAuthorizer.authorizeAction``:

- a principal of ``super.users`` may do everything;
- the ACLs that apply to a resource are those of its LITERAL name, of the LITERAL ``*`` of its
  type and of every PREFIXED pattern that starts its name;
- none at all: allowed only if ``allow.everyone.if.no.acl.found`` (default false);
- else denied if a DENY entry matches, allowed if an ALLOW entry matches, denied otherwise. An
  entry matches by principal (the same, or ``User:*``), host (the same, or ``*``) and operation
  (the same, or ALL); an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of
  ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies nothing).

``authorize_any`` is Kafka's ``authorizeByResourceType`` (KIP-679): allowed if some ALLOW
pattern (LITERAL or PREFIXED) for the operation is not cancelled by a DENY that covers it (a
LITERAL DENY of the same name, a PREFIXED DENY of a prefix of it, a LITERAL DENY of ``*``);
``allow.everyone.if.no.acl.found`` allows when no DENY of ``*`` matches. Implied operations
play no part there, as in Kafka.

The cache holds every resource's ACLs: read at ``start`` and refreshed from the change
notifications (``zk.acl_store``); a broker's own changes apply at once. Denials are logged at
INFO on this module's logger in Kafka's authorizer-log words, at most
``DENIAL_LOGS_PER_S_MAX`` a second (the rest are counted and the count logged).

``create_acls``/``delete_acls``/``acls`` serve CreateAcls, DeleteAcls and DescribeAcls. A
request may hold 100,000 bindings or filters in 1 MB (issue 23): they are checked in time slices
(``time_slices``); DeleteAcls compares a filter that names one pattern exactly with that pattern
alone (not with every other one: quadratic before, hours for 90,000 distinct names), and reaches
such a pattern only if this broker caches it or it has a node (listed once per request: no
ZooKeeper read for each name without ACLs).

Runs on one event loop: ``authorize`` is synchronous and reads the cache, which an update
replaces whole (copy on write).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.config.authorizer import ACL_AUTHORIZER_CLASS_NAMES
from odradek.errors import ErrorCode, InvalidConfigError
from odradek.security.acl import (
    WILDCARD,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
    parse_principal,
)
from odradek.security.acl_filter import AclBindingFilter
from odradek.security.principal import KafkaPrincipal
from odradek.time_slices import TimeSlices, sliced
from odradek.zk.acl_store import AclNodeTooLargeError, ZkAclStore

__all__ = [
    "ACL_AUTHORIZER_CLASS_NAMES",
    "AclAuthorizer",
    "AclResult",
    "DeleteResult",
    "from_config",
    "parse_super_users",
]

log = logging.getLogger(__name__)

DENIAL_LOGS_PER_S_MAX = 20

Entries = frozenset[AccessControlEntry]
_ResourceKey = tuple[AccessControlEntry, ResourceType, PatternType]

_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


class AclStore(Protocol):
    """Where ACLs live (``zk.acl_store.ZkAclStore``; a dict in unit tests)."""

    async def ensure_paths(self) -> None: ...

    async def read(self, pattern: ResourcePattern) -> tuple[Entries, int]: ...

    async def read_all(self) -> dict[ResourcePattern, Entries]: ...

    async def patterns(self) -> set[ResourcePattern]: ...

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> tuple[Entries, Entries]: ...

    async def follow_changes(self, on_change: Callable[[ResourcePattern], Any]) -> None: ...


@dataclass(frozen=True, slots=True)
class AclResult:
    error_code: ErrorCode = ErrorCode.none
    message: str | None = None


NO_ERROR = AclResult()


@dataclass(slots=True)
class DeleteResult:
    """One DeleteAcls filter's outcome: the bindings it deleted, each with its own result."""

    error: AclResult = NO_ERROR  # frozen: one shared
    deleted: list[tuple[AclBinding, AclResult]] = field(default_factory=list)


def parse_super_users(text: str) -> frozenset[KafkaPrincipal]:
    """``User:admin;User:CN=broker0`` -> principals (``ValueError`` for a bad one)."""
    return frozenset(parse_principal(p.strip()) for p in (text or "").split(";") if p.strip())


class _DenialLog:
    """At most ``DENIAL_LOGS_PER_S_MAX`` denial lines a second; the others are counted."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._second = -1
        self._logged = 0
        self._suppressed = 0

    def denied(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, what: str
    ) -> None:
        second = int(self._clock())
        if second != self._second:
            if self._suppressed:
                log.info("%d more authorization denials not logged", self._suppressed)
            self._second, self._logged, self._suppressed = second, 0, 0
        if self._logged >= DENIAL_LOGS_PER_S_MAX:
            self._suppressed += 1
            return
        self._logged += 1
        log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s",
            principal,
            kafka_name(operation),
            host,
            what,
        )


class AclAuthorizer:
    def __init__(
        self,
        store: AclStore,
        *,
        super_users: Iterable[KafkaPrincipal] = (),
        allow_everyone_if_no_acl_found: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, Entries] = {}
        # Kafka's resourceCache: for each (entry, type, pattern type), the names it is on.
        self._resources: dict[_ResourceKey, frozenset[str]] = {}
        # The lengths of the PREFIXED patterns' names, per resource type: an authorization
        # looks up only those prefixes of a name, not every one (it runs for each topic of
        # each produce and fetch).
        self._prefix_lengths: dict[ResourceType, frozenset[int]] = {}
        self._denials = _DenialLog(clock)
        self._updating = asyncio.Lock()

    # --- the cache -------------------------------------------------------------------------

    async def start(self) -> None:
        """Create Kafka's ACL paths, follow the change notifications, then read every ACL."""
        await self.store.ensure_paths()
        await self.store.follow_changes(self._refresh)
        self.load(await self.store.read_all())

    def load(self, acls: Mapping[ResourcePattern, Entries]) -> None:
        for pattern, entries in acls.items():
            self.apply(pattern, entries)

    def apply(self, pattern: ResourcePattern, entries: Entries) -> None:
        """Make ``entries`` the cached ACLs of ``pattern`` (none: forget it)."""
        entries = frozenset(entries)
        current = self._acls.get(pattern, frozenset())
        if entries == current:
            return
        resources = dict(self._resources)
        for entry in entries - current:
            key = (entry, pattern.resource_type, pattern.pattern_type)
            resources[key] = resources.get(key, frozenset()) | {pattern.name}
        for entry in current - entries:
            key = (entry, pattern.resource_type, pattern.pattern_type)
            names = resources.get(key, frozenset()) - {pattern.name}
            if names:
                resources[key] = names
            else:
                resources.pop(key, None)
        acls = dict(self._acls)
        if entries:
            acls[pattern] = entries
        else:
            acls.pop(pattern, None)
        if pattern.pattern_type is PatternType.PREFIXED:
            self._prefix_lengths = {
                **self._prefix_lengths,
                pattern.resource_type: frozenset(
                    len(p.name)
                    for p in acls
                    if p.resource_type is pattern.resource_type
                    and p.pattern_type is PatternType.PREFIXED
                ),
            }
        self._acls, self._resources = acls, resources

    async def _refresh(self, pattern: ResourcePattern) -> None:
        entries, _ = await self.store.read(pattern)
        log.info("Processing Acl change notification for %s: %d ACLs", pattern, len(entries))
        self.apply(pattern, entries)

    # --- the port --------------------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching(resource_type, name)
        if not entries:
            allowed = self.allow_everyone_if_no_acl_found
        else:
            who = (str(principal), WILDCARD_PRINCIPAL)
            hosts = (host, WILDCARD_HOST)

            def exists(permission: AclPermissionType, operations: frozenset[AclOperation]):
                return any(
                    e.permission_type is permission
                    and e.principal in who
                    and e.host in hosts
                    and (e.operation in operations or e.operation is AclOperation.ALL)
                    for e in entries
                )

            allowed = not exists(AclPermissionType.DENY, frozenset({operation})) and exists(
                AclPermissionType.ALLOW, _IMPLIED_BY.get(operation, frozenset({operation}))
            )
        if not allowed:
            pattern = ResourcePattern(resource_type, name)
            self._denials.denied(principal, host, operation, str(pattern))
        return allowed

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        acls = self._acls
        found = [
            *acls.get(ResourcePattern(resource_type, WILDCARD), ()),
            *acls.get(ResourcePattern(resource_type, name), ()),
        ]
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                prefixed = ResourcePattern(resource_type, name[:length], PatternType.PREFIXED)
                found.extend(acls.get(prefixed, ()))
        return found

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Must specify a non-filter resource type, not {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"Must specify a non-filter operation type, not {operation.name}")
        if principal in self.super_users:
            return True
        allowed = self._any(str(principal), host, operation, resource_type)
        if not allowed:
            what = f"{kafka_name(resource_type)}:UNKNOWN:NONE"
            self._denials.denied(principal, host, operation, what)
        return allowed

    def _any(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            found: set[str] = set()
            for p in {principal, WILDCARD_PRINCIPAL}:
                for h in {host, WILDCARD_HOST}:
                    for o in {op, AclOperation.ALL}:
                        entry = AccessControlEntry(p, h, o, permission)
                        found |= self._resources.get((entry, rtype, pattern_type), frozenset())
            return found

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(len(name) + 1))

        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)
        if any(not denied_by_prefix(prefix) for prefix in allow_prefixes):
            return True
        return any(
            literal == WILDCARD or (literal not in deny_literals and not denied_by_prefix(literal))
            for literal in names(AclPermissionType.ALLOW, PatternType.LITERAL)
        )

    # --- CreateAcls, DeleteAcls, DescribeAcls ----------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The cached bindings ``binding_filter`` matches (DescribeAcls)."""
        return [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            for entry in entries
            if binding_filter.matches(AclBinding(pattern, entry))
        ]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclResult]:
        """Store ``bindings``; one result each (INVALID_REQUEST for one Kafka would refuse)."""
        slices = TimeSlices()
        results = [AclResult()] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        async for index, binding in sliced(enumerate(bindings), slices):
            reason = binding.invalid_reason()
            if reason is not None:
                message = f"Failed to create ACL: {reason}"
                results[index] = AclResult(ErrorCode.invalid_request, message)
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        async with self._updating:
            for pattern, indexes in by_pattern.items():
                # 1 MB holds 55,555 principals on one topic: each entry hashed in a time slice
                entries: set[AccessControlEntry] = set()
                async for i in sliced(indexes, slices):
                    entries.add(bindings[i].entry)
                added = frozenset(entries)  # the hashes kept: no entry hashed again
                try:
                    _, after = await self.store.update(pattern, lambda now, a=added: now | a)
                except AclNodeTooLargeError as e:  # no write can hold them: the request's fault
                    log.info("refusing to create ACLs for %s: %s", pattern, e)
                    failed = AclResult(ErrorCode.invalid_request, f"Failed to create ACL: {e}")
                except Exception as e:  # noqa: BLE001 - each binding reports what failed
                    log.warning("failed to create ACLs for %s: %s", pattern, e)
                    failed = AclResult(ErrorCode.unknown_server_error, str(e))
                else:
                    self.apply(pattern, after)
                    continue
                async for i in sliced(indexes, slices):  # one shared result for the pattern's
                    results[i] = failed
        return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        """Delete what each filter matches; a binding two filters match counts for the first.

        As Kafka: filters that name one pattern exactly reach it even if this broker's cache
        does not have it yet; the others match the cached patterns.
        """
        slices = TimeSlices()
        results: list[DeleteResult] = []  # 1 MB holds 90,909 filters: made in time slices too
        valid: list[tuple[int, AclBindingFilter]] = []
        async for index, binding_filter in sliced(enumerate(filters), slices):
            result = DeleteResult()
            reason = binding_filter.unknown_reason()
            if reason is not None:
                result.error = AclResult(ErrorCode.invalid_request, reason)
            else:
                valid.append((index, binding_filter))
            results.append(result)
        async with self._updating:
            cached = set(self._acls)
            stored: set[ResourcePattern] | None = None
            exact: dict[ResourcePattern, list[tuple[int, AclBindingFilter]]] = {}
            broad: list[tuple[int, AclBindingFilter]] = []  # may match many patterns
            async for index, binding_filter in sliced(valid, slices):
                pattern_filter = binding_filter.pattern
                if not (pattern_filter.matches_at_most_one() and pattern_filter.name is not None):
                    broad.append((index, binding_filter))
                    continue
                pattern = ResourcePattern(
                    pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type
                )
                if pattern not in cached:  # it may have a node this broker has not heard of
                    stored = await self.store.patterns() if stored is None else stored
                    if pattern not in stored:
                        continue  # no ACLs to delete
                exact.setdefault(pattern, []).append((index, binding_filter))
            resources = cached | set(exact) if broad else set(exact)
            async for pattern in sliced(sorted(resources, key=_pattern_order), slices):
                if pattern.name == "" or "/" in pattern.name:
                    continue  # named by a filter, but never stored
                matching = [(i, f) for i, f in exact.get(pattern, ()) if f.pattern.matches(pattern)]
                if broad:
                    async for i, f in sliced(broad, slices):
                        if f.pattern.matches(pattern):
                            matching.append((i, f))
                    matching.sort(key=lambda found: found[0])  # the first filter counts
                if matching:
                    await self._delete_from(pattern, matching, results)
        return results

    async def _delete_from(
        self,
        pattern: ResourcePattern,
        matching: list[tuple[int, AclBindingFilter]],
        results: list[DeleteResult],
    ) -> None:
        deleted: dict[AclBinding, int] = {}

        def change(current: Entries) -> Entries:
            deleted.clear()  # an update may be retried on a conflict
            for entry in current:
                for index, binding_filter in matching:
                    if binding_filter.entry.matches(entry):
                        deleted[AclBinding(pattern, entry)] = index
                        break
            return current - {binding.entry for binding in deleted}

        try:
            _, after = await self.store.update(pattern, change)
            outcome = AclResult()
        except Exception as e:  # noqa: BLE001 - each binding reports what failed
            log.warning("failed to delete ACLs of %s: %s", pattern, e)
            outcome = AclResult(ErrorCode.unknown_server_error, str(e))
        else:
            self.apply(pattern, after)
        for binding, index in sorted(deleted.items(), key=lambda item: _binding_order(item[0])):
            results[index].deleted.append((binding, outcome))


def _pattern_order(pattern: ResourcePattern) -> tuple[int, int, str]:
    return (pattern.resource_type, pattern.pattern_type, pattern.name)


def _binding_order(binding: AclBinding) -> tuple[Any, ...]:
    e = binding.entry
    return (*_pattern_order(binding.pattern), e.principal, e.host, e.operation, e.permission_type)


def from_config(config: Any, zk: Any) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, over ``zk`` (a ``ZkClient``); None
    when it is empty. ``config`` has ``authorizer_class_name``, ``super_users`` and
    ``allow_everyone_if_no_acl_found`` (a broker's or the controller's configuration). Not
    started: call ``start()``."""
    class_name = (config.authorizer_class_name or "").strip()
    if not class_name:
        return None
    if class_name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise InvalidConfigError(
            f"authorizer.class.name {class_name!r} is not supported: use "
            f"{' or '.join(ACL_AUTHORIZER_CLASS_NAMES)}, or leave it empty for no authorizer"
        )
    try:
        super_users = parse_super_users(config.super_users)
    except ValueError as e:
        raise InvalidConfigError(f"super.users: {e}") from e
    return AclAuthorizer(
        ZkAclStore(zk),
        super_users=super_users,
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
    )
