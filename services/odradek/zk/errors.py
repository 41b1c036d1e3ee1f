"""Errors raised by the ZooKeeper layer, one small tree under ``ZkError``.

kazoo's exceptions never escape ``odradek.zk``: ``client`` translates each into one of these and
chains the original with ``raise ... from``. Every error carries the znode ``path`` it concerns
(``None`` when it concerns the session rather than a node).
"""

from __future__ import annotations

from odradek.errors import ErrorCode, OdradekError

__all__ = [
    "BadVersionError",
    "BrokerIdInUseError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "ZkConnectionError",
    "ZkDataError",
    "ZkError",
    "ZkTimeoutError",
]


class ZkError(OdradekError):
    """Base of every ZooKeeper failure; ``path`` names the znode, when there is one."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message if path is None else f"{path}: {message}")
        self.path = path


class ZkDataError(ZkError):
    """A znode holds bytes that do not decode to the format its path defines."""


class ZkTimeoutError(ZkError):
    """ZooKeeper did not answer within the bound (typically: it is unreachable).

    A write that timed out may still be applied later, when the connection comes back with the
    same session: read before retrying it.
    """

    error_code = ErrorCode.request_timed_out


class ZkConnectionError(ZkError):
    """The connection dropped, the session expired, or the client is closed."""

    error_code = ErrorCode.network_exception


class NodeExistsError(ZkError):
    """A create found the node already there."""


class NoNodeError(ZkError):
    """The node (or, for a create, its parent) does not exist."""


class BadVersionError(ZkError):
    """A compare-and-set found another znode version than the one expected."""


class NotEmptyError(ZkError):
    """A delete found children under the node."""


class BrokerIdInUseError(NodeExistsError):
    """Another live session holds ``/brokers/ids/<id>``: two brokers were given the same id."""

    error_code = ErrorCode.duplicate_broker_registration
