"""ACLs in ZooKeeper, in Kafka's layout, and the notifications that tell brokers they changed.

Layout (``zk.paths``)::

    /kafka-acl/<Topic|Group|Cluster|TransactionalId|...>/<name>     LITERAL patterns
    /kafka-acl-extended/prefixed/<type>/<prefix>                    PREFIXED patterns
    /kafka-acl-changes/acl_changes_<seq>            "TOPIC:orders"
    /kafka-acl-extended-changes/acl_changes_<seq>   {"version":1,"resourceType":"TOPIC",...}

A resource's node holds all its ACLs (``ResourceAcls``): at most ``ACL_NODE_BYTES_MAX``, so its
transaction stays under ZooKeeper's ``jute.maxbuffer`` (a larger one made ZooKeeper drop the
broker's connection, and its session with it, issue 23); ``update`` refuses more with
``AclNodeTooLargeError`` before writing, without encoding a set that cannot fit, and encodes a
large one on a codec thread (``large_messages``). ``update`` changes them by
read-modify-write, conditional on the node's version, retried on a conflict
(``UPDATE_RETRIES_MAX`` times, as Kafka's ``maxUpdateRetries``); the node and its change
notification are written in one ZooKeeper transaction (Kafka writes them one after the other:
a crash between them loses the notification). A node left without ACLs is deleted.

``follow_changes`` calls back with each resource a new notification names, in sequence order,
once each; kazoo drops watches when a connection drops, so the notifications are read again
after a reconnect. Notifications older than ``CHANGE_EXPIRATION_MS`` (Kafka's 15 minutes) are
deleted by whoever reads them, so the change nodes stay few.

Runs on one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable

from odradek.large_messages import off_loop
from odradek.security.acl import AccessControlEntry, PatternType, ResourcePattern
from odradek.zk.client import (
    CreateOp,
    DeleteOp,
    SessionEvent,
    SetDataOp,
    WatchEvent,
    ZkClient,
)
from odradek.zk.codec import ZNODE_DATA_BYTES_MAX
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError, ZkDataError
from odradek.zk.paths import (
    ACL_CHANGE_PREFIX,
    ACL_PATHS,
    ACL_PATTERN_TYPES,
    ACL_RESOURCE_TYPES,
    ResourceAcls,
    acl_change_path_prefix,
    acl_changes_path,
    acl_resource_path,
    acl_type_path,
    decode_acl_change,
    encode_acl_change,
    sequence_number,
)

__all__ = [
    "ACL_NODE_BYTES_MAX",
    "UPDATE_RETRIES_MAX",
    "AclNodeTooLargeError",
    "AclUpdateError",
    "ZkAclStore",
]

log = logging.getLogger(__name__)

UPDATE_RETRIES_MAX = 10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
NO_NODE = -1  # the version of a resource whose node does not exist

Entries = frozenset[AccessControlEntry]
ChangeCallback = Callable[[ResourcePattern], Awaitable[None]]


class AclUpdateError(Exception):
    """An update still conflicted after ``UPDATE_RETRIES_MAX`` retries."""


class AclNodeTooLargeError(AclUpdateError):
    """A resource's ACLs would not fit in its node (``ACL_NODE_BYTES_MAX``): nothing written."""


# A resource's node, and the rest of its transaction (paths, the change notification, headers)
# within ZooKeeper's jute.maxbuffer (1 MiB less a byte by default).
ACL_NODE_BYTES_MAX = ZNODE_DATA_BYTES_MAX - 16 * 1024
# The shortest entry of a node's JSON (empty principal and host, "Deny", "All"): a set with more
# entries than ACL_NODE_BYTES_MAX // ACL_ENTRY_BYTES_MIN cannot fit, and is not encoded.
ACL_ENTRY_BYTES_MIN = len('{"principal":"","permissionType":"Deny","operation":"All","host":""},')
ENCODE_OFF_LOOP_ENTRIES_MIN = 1_000  # a larger node is encoded on a codec thread


async def _encode(pattern: ResourcePattern, entries: Entries) -> bytes:
    """The node of ``pattern`` holding ``entries``; ``AclNodeTooLargeError`` if it cannot fit."""
    if len(entries) * ACL_ENTRY_BYTES_MIN <= ACL_NODE_BYTES_MAX:
        acls = ResourceAcls(entries)
        if len(entries) < ENCODE_OFF_LOOP_ENTRIES_MIN:
            data = acls.encode()
        else:
            data = await off_loop(acls.encode)
        if len(data) <= ACL_NODE_BYTES_MAX:
            return data
    raise AclNodeTooLargeError(
        f"{len(entries)} ACLs on {pattern} would not fit in its ZooKeeper node "
        f"(at most {ACL_NODE_BYTES_MAX} bytes)"
    )


class ZkAclStore:
    def __init__(self, zk: ZkClient, clock_ms: Callable[[], int] | None = None):
        self.zk = zk
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._last_change = {p: -1 for p in ACL_PATTERN_TYPES}
        self._checking = asyncio.Lock()
        self._on_change: ChangeCallback | None = None

    async def ensure_paths(self) -> None:
        await self.zk.aensure_paths(ACL_PATHS)

    async def read(self, pattern: ResourcePattern) -> tuple[Entries, int]:
        """The ACLs of ``pattern`` and its node's version (``NO_NODE`` if there is none)."""
        path = acl_resource_path(pattern)
        try:
            data, stat = await self.zk.aget(path)
        except NoNodeError:
            return frozenset(), NO_NODE
        return ResourceAcls.decode(data, path).entries, stat.version

    async def patterns(self) -> set[ResourcePattern]:
        """Every resource with an ACL node, listed (its ACLs not read): one listing per type."""
        return set(await self._listed())

    async def read_all(self) -> dict[ResourcePattern, Entries]:
        """Every resource's ACLs (unknown type nodes, written by a newer Kafka, are skipped)."""
        acls: dict[ResourcePattern, Entries] = {}
        for pattern in await self._listed():
            try:
                entries, _ = await self.read(pattern)
            except ZkDataError as e:
                log.error("ignoring the ACLs of %s: %s", pattern, e)
                continue
            if entries:
                acls[pattern] = entries
        return acls

    async def _listed(self) -> list[ResourcePattern]:
        """Every resource with an ACL node, pattern type by pattern type, resource type by
        resource type (the types Kafka's ZooKeeper layout has; a missing type node: none)."""
        found: list[ResourcePattern] = []
        for pattern_type in ACL_PATTERN_TYPES:
            for resource_type in ACL_RESOURCE_TYPES:
                try:
                    names = await self.zk.achildren(acl_type_path(pattern_type, resource_type))
                except NoNodeError:
                    continue
                found.extend(ResourcePattern(resource_type, n, pattern_type) for n in names)
        return found

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> tuple[Entries, Entries]:
        """Apply ``change`` to the ACLs of ``pattern``; returns (before, after). Announces the
        change to every broker when something changed."""
        path = acl_resource_path(pattern)
        for attempt in range(UPDATE_RETRIES_MAX + 1):
            current, version = await self.read(pattern)
            new = frozenset(change(current))
            if new == current:
                return current, new
            notify = CreateOp(
                acl_change_path_prefix(pattern.pattern_type),
                encode_acl_change(pattern),
                sequence=True,
            )
            if not new:
                op = DeleteOp(path, version=version)
            elif version == NO_NODE:
                op = CreateOp(path, await _encode(pattern, new))
            else:
                op = SetDataOp(path, await _encode(pattern, new), version=version)
            try:
                await self.zk.atransaction([op, notify])
            except (BadVersionError, NodeExistsError, NoNodeError):
                if attempt == UPDATE_RETRIES_MAX:
                    break
                backoff_ms = RETRY_BACKOFF_MS + random.randrange(RETRY_BACKOFF_JITTER_MS)
                await asyncio.sleep(backoff_ms / 1000)
                continue
            return current, new
        raise AclUpdateError(
            f"Failed to update ACLs for {pattern} after trying a maximum of "
            f"{UPDATE_RETRIES_MAX} times"
        )

    # --- change notifications ------------------------------------------------------------------

    async def follow_changes(self, on_change: ChangeCallback) -> None:
        """Skip the notifications present now, then call ``on_change`` for each new one. Call
        before reading the ACLs (``read_all``), so no change falls between the two."""
        self._on_change = on_change
        self.zk.add_session_listener(self._on_session, loop=asyncio.get_running_loop())
        for pattern_type in ACL_PATTERN_TYPES:
            await self._check(pattern_type, first=True)

    async def _check(self, pattern_type: PatternType, first: bool = False) -> None:
        path = acl_changes_path(pattern_type)
        async with self._checking:
            try:
                names = await self.zk.achildren(
                    path, watch=lambda event: self._on_watch(pattern_type, event)
                )
            except NoNodeError:
                return
            for name in sorted(n for n in names if n.startswith(ACL_CHANGE_PREFIX)):
                node = f"{path}/{name}"
                try:
                    sequence = sequence_number(name, ACL_CHANGE_PREFIX)
                    if sequence <= self._last_change[pattern_type]:
                        continue
                    self._last_change[pattern_type] = sequence
                    data, stat = await self.zk.aget(node)
                    await self._purge_if_expired(node, stat.ctime)
                    if first:
                        continue
                    pattern = decode_acl_change(data, pattern_type, node)
                except (NoNodeError, ZkDataError) as e:
                    log.warning("skipping ACL change %s: %s", node, e)
                    continue
                if self._on_change is not None:
                    await self._on_change(pattern)

    async def _purge_if_expired(self, node: str, ctime_ms: int) -> None:
        if self._clock_ms() - ctime_ms > CHANGE_EXPIRATION_MS:
            with contextlib.suppress(NoNodeError):  # another broker purged it
                await self.zk.adelete(node)

    def _on_watch(self, pattern_type: PatternType, event: WatchEvent) -> None:
        asyncio.ensure_future(self._check(pattern_type))

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        if event in (SessionEvent.NEW_SESSION, SessionEvent.RECONNECTED):
            for pattern_type in ACL_PATTERN_TYPES:
                asyncio.ensure_future(self._check(pattern_type))
