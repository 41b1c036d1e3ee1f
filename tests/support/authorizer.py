"""An in-memory ``Authorizer`` for handler tests, and request contexts that use it.

``MemoryAuthorizer`` allows exactly the (principal, operation, resource type, name) grants it
holds, and everything to its super users; ``authorize_any`` is true if some grant of that
operation and type exists (KIP-679, no DENY here). It records every question, so a test can say
what a handler asked, and in which order. Not Kafka's implied operations: tests grant what they
mean. ``handler_context`` builds a real ``RequestContext`` around any broker-like object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from odradek.broker.context import RequestContext
from odradek.protocol.header import RequestHeader
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal.user("alice")
BROKER = KafkaPrincipal.user("broker")

__all__ = ["ALICE", "BROKER", "MemoryAuthorizer", "handler_context"]

Grant = tuple[str, AclOperation, ResourceType, str]


@dataclass
class MemoryAuthorizer:
    grants: set[Grant] = field(default_factory=set)
    super_users: set[str] = field(default_factory=lambda: {str(BROKER)})
    asked: list[tuple[str, AclOperation, ResourceType, str | None]] = field(default_factory=list)

    def allow(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
        principal: KafkaPrincipal = ALICE,
    ) -> MemoryAuthorizer:
        self.grants.add((str(principal), operation, resource_type, name))
        return self

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        self.asked.append((str(principal), operation, resource_type, name))
        who = str(principal)
        return who in self.super_users or (who, operation, resource_type, name) in self.grants

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        self.asked.append((str(principal), operation, resource_type, None))
        who = str(principal)
        return who in self.super_users or any(
            g[0] == who and g[1] == operation and g[2] == resource_type for g in self.grants
        )


def handler_context(
    broker: Any,
    version: int,
    *,
    authorizer: MemoryAuthorizer | None = None,
    principal: KafkaPrincipal = ALICE,
    api_key: int = 0,
    listener: Any = None,
) -> RequestContext:
    """A ``RequestContext`` for calling a handler directly: ``broker`` may be a test double
    (a namespace); its ``authorizer`` is set to ``authorizer``."""
    broker.authorizer = authorizer
    header = RequestHeader(
        api_key=api_key,
        api_version=version,
        correlation_id=1,
        client_id="test",
        header_version=2,
        size=0,
    )
    return RequestContext(
        header=header,
        broker=broker,
        listener=listener or SimpleNamespace(name="PLAINTEXT"),  # type: ignore[arg-type]
        served_versions={},
        client_host="/127.0.0.1",
        principal=principal,
    )
