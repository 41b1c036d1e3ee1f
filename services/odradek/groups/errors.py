"""The group coordinator's own errors: each one is an answer, a Kafka error code with a message.

``GroupError`` is raised by an operation on a group (unknown member, stale generation, fenced
instance id, ...) before it changed anything; the handler answers with its code. What the
runtime raises when the shard of ``__consumer_offsets`` that owns a group is not here, not
loaded yet, or could not write (``NotCoordinatorError`` & co.) is shared with the transaction
coordinator: ``odradek.coordinator.errors``. Pure values; any thread.
"""

from __future__ import annotations

from odradek.coordinator.errors import CoordinatorError

__all__ = ["GroupError"]


class GroupError(CoordinatorError):
    """An answer with ``code`` (one of Kafka's group or offset error codes)."""
