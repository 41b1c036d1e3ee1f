"""The ACLs a znode is created with: Kafka's ``ZkData.defaultAcls(isSecure, path)``.

Without ``zookeeper.set.acl`` every znode is open (``OPEN_ACL_UNSAFE``: anyone may do anything),
as Kafka's. With it, a znode gets ``CREATOR_ALL`` (every permission for the identities the
creating session authenticated as: here its TLS client certificate, ``x509:<DN>``) plus world
READ, except on sensitive paths, under ``/config/users`` (user quotas; SCRAM credentials in
Kafka), ``/config/brokers`` (broker configs, passwords among them) and
``/delegation_token/tokens``: no world READ, so others can neither read nor list them. (Kafka
3.x's list; Kafka 2.x also left ``/consumers`` open for its old consumers, gone since.)

Paths are those inside the chroot (what ``ZkClient`` is given); the chroot itself is created
with the secure, world-readable ACLs. Pure: any thread.
"""

from __future__ import annotations

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

__all__ = ["SENSITIVE_ROOT_PATHS", "default_acls", "sensitive_path"]

SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")


def sensitive_path(path: str) -> bool:
    """Kafka's ``ZkData.sensitivePath`` (a prefix test, as Kafka's)."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    if not secure:
        return list(OPEN_ACL_UNSAFE)
    if sensitive_path(path):
        return list(CREATOR_ALL_ACL)
    return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
