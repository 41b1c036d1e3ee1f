"""The group coordinator's memory bounds (issue 23): what members may make a broker hold.

Kafka bounds a group's members (``group.max.size``) but neither their metadata nor the ids it
hands out with MEMBER_ID_REQUIRED (KIP-394), so one client could grow a coordinator past any
memory by joining with megabytes of protocol metadata, or by asking for member ids in a loop.
The bounds, each with its key (``config/broker.py``) and its answer (docs/security.md):

- one member's metadata: ``odradek.group.member.metadata.max.bytes`` (INVALID_REQUEST);
- one group's members: ``group.max.size``, ``group.consumer.max.size``; a classic group's
  pending member ids count as members (GROUP_MAX_SIZE_REACHED);
- one classic group's bytes, so also the leader's JoinGroup answer:
  ``odradek.group.metadata.max.bytes`` (GROUP_MAX_SIZE_REACHED at JoinGroup);
- one connection's pending member ids: ``odradek.group.max.pending.members.per.connection``
  (GROUP_MAX_SIZE_REACHED);
- the whole coordinator: ``odradek.group.coordinator.metadata.max.bytes`` over every group of every
  shard (COORDINATOR_NOT_AVAILABLE: retriable, the client backs off and comes back).

``GroupLimits`` is the broker-wide account. Each group's bytes are *set* (never added to), by
its manager after an operation changed it, so the account cannot drift: a missed update leaves
a stale figure that the group's next operation replaces. One per broker, shared by its shards;
every caller runs on the broker's event loop, so it has no lock.
"""

from __future__ import annotations

from odradek.groups.config import GroupCoordinatorConfig

__all__ = ["GroupLimits", "MEMBER_OVERHEAD_BYTES", "PENDING_MEMBER_BYTES"]

# What a member costs beyond its byte fields (its object, dict entries, timer), and what one
# pending member id costs (its id, set entry and timer): measured, about 1.2 kB (issue 23).
MEMBER_OVERHEAD_BYTES = 1024
PENDING_MEMBER_BYTES = 1200


class GroupLimits:
    def __init__(self, config: GroupCoordinatorConfig):
        self.config = config
        self._held: dict[str, int] = {}
        self.total_bytes = 0
        self._pending_by_connection: dict[str, int] = {}

    # -- bytes held by groups --------------------------------------------------------------

    def held_bytes(self, group_id: str) -> int:
        return self._held.get(group_id, 0)

    def fits(self, group_id: str, group_bytes: int) -> bool:
        """Whether the coordinator stays within its budget if ``group_id`` holds ``group_bytes``."""
        after = self.total_bytes - self.held_bytes(group_id) + group_bytes
        return after <= self.config.group_coordinator_metadata_max_bytes

    def set_held(self, group_id: str, group_bytes: int) -> None:
        self.total_bytes += group_bytes - self.held_bytes(group_id)
        if group_bytes:
            self._held[group_id] = group_bytes
        else:
            self._held.pop(group_id, None)

    # -- pending member ids per connection -------------------------------------------------

    def pending_of(self, connection_id: str) -> int:
        return self._pending_by_connection.get(connection_id, 0)

    def may_add_pending(self, connection_id: str) -> bool:
        limit = self.config.group_max_pending_members_per_connection
        return self.pending_of(connection_id) < limit

    def add_pending(self, connection_id: str) -> None:
        self._pending_by_connection[connection_id] = self.pending_of(connection_id) + 1

    def remove_pending(self, connection_id: str) -> None:
        left = self.pending_of(connection_id) - 1
        if left > 0:
            self._pending_by_connection[connection_id] = left
        else:
            self._pending_by_connection.pop(connection_id, None)
