"""An ACL store in a dict, for the authorizer's unit tests (the ZooKeeper one is zk.acl_store)."""

from __future__ import annotations

from odradek.security.acl import AccessControlEntry, ResourcePattern

__all__ = ["MemoryAclStore"]


class MemoryAclStore:
    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    async def ensure_paths(self) -> None:
        pass

    async def read(self, pattern):
        return self.acls.get(pattern, frozenset()), 0

    async def read_all(self):
        return dict(self.acls)

    async def patterns(self):
        return set(self.acls)

    async def update(self, pattern, change):
        before = self.acls.get(pattern, frozenset())
        after = frozenset(change(before))
        if after:
            self.acls[pattern] = after
        else:
            self.acls.pop(pattern, None)
        return before, after

    async def follow_changes(self, on_change) -> None:
        pass
