"""Kafka's ACL vocabulary and the authorizer port every request handler asks.

The values are Kafka's, with Kafka's wire codes (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``), so that CreateAcls, DescribeAcls and DeleteAcls carry them
as they are and ``/kafka-acl`` holds what Kafka's ``AclAuthorizer`` writes:

- ``AclOperation``: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
  DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ... (ANY only in filters, ALL in bindings);
- ``ResourceType``: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER;
- ``PatternType``: LITERAL (a name, or ``*`` for every name), PREFIXED; ANY and MATCH only in
  filters;
- ``AclPermissionType``: ALLOW, DENY.

``Authorizer`` is the port: a handler asks ``RequestContext.authorize`` (one resource) or
``RequestContext.authorize_any`` (KIP-679: may the principal do this to some resource of the
type), and a broker without ``authorizer.class.name`` allows everything. Values only here (with
Kafka's names for them, ``kafka_name``/``parse_kafka_name``, the principal parser and the rules
a stored binding obeys, ``AclBinding.invalid_reason``); filters are in ``acl_filter``, the ACL
authorizer itself in ``acl_authorizer``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from odradek.security.principal import KafkaPrincipal

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AclBinding",
    "AclOperation",
    "AclPermissionType",
    "Authorizer",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "SUPPORTED_OPERATIONS",
    "kafka_name",
    "parse_kafka_name",
    "parse_principal",
]

CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name, as Kafka's
WILDCARD = "*"  # a LITERAL pattern of this name matches every resource of its type
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"  # an entry for every user (Kafka's AclEntry.WildcardPrincipal)

E = TypeVar("E", bound=enum.Enum)


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# Kafka's AclEntry.supportedOperations: what an ACL of each resource type may name (ALL aside;
# kafka-acls.sh checks it) and what an authorized-operations bitfield may hold.
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def kafka_name(value: enum.Enum) -> str:
    """Kafka's ``SecurityUtils`` name of a value: ``ClusterAction``, ``TransactionalId``,
    ``Allow`` (what ``/kafka-acl`` JSON, node names and kafka-acls.sh use)."""
    return "".join(word.capitalize() for word in value.name.split("_"))


def parse_kafka_name(kind: type[E], text: str) -> E:
    """The value named ``text``, as Kafka's ``SecurityUtils`` reads it: ``ClusterAction``,
    ``CLUSTER_ACTION`` and ``clusteraction`` alike. Raises ``ValueError``."""
    wanted = text.replace("_", "").lower()
    for value in kind:
        if value.name.replace("_", "").lower() == wanted and value.name not in ("UNKNOWN", "ANY"):
            return value
    raise ValueError(f"unknown {kind.__name__} {text!r}")


def parse_principal(text: str) -> KafkaPrincipal:
    """``User:alice`` -> KafkaPrincipal("User", "alice"), as Kafka's ``parseKafkaPrincipal``;
    ``ValueError`` for anything not ``type:name`` with both parts non-empty."""
    principal_type, sep, name = (text or "").partition(":")
    if not sep or not principal_type or not name:
        raise ValueError(
            f"expected a string in format principalType:principalName but got {text!r}"
        )
    return KafkaPrincipal(principal_type, name)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        # Kafka's authorizer log form: Topic:LITERAL:orders
        return f"{kafka_name(self.resource_type)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def invalid_reason(self) -> str | None:
        """Why Kafka would refuse to store this binding (None: it may be stored): an UNKNOWN or
        ANY element, a MATCH pattern, a principal that is not ``type:name``, a name that is empty,
        holds ``/`` or is not ``kafka-cluster`` for the Cluster."""
        pattern, entry = self.pattern, self.entry
        for value, banned in (
            (pattern.resource_type, (ResourceType.UNKNOWN, ResourceType.ANY)),
            (pattern.pattern_type, (PatternType.UNKNOWN, PatternType.ANY, PatternType.MATCH)),
            (entry.operation, (AclOperation.UNKNOWN, AclOperation.ANY)),
            (entry.permission_type, (AclPermissionType.UNKNOWN, AclPermissionType.ANY)),
        ):
            if value in banned:
                return f"{type(value).__name__} {value.name} is not allowed in an ACL binding"
        try:
            parse_principal(entry.principal)
        except ValueError as e:
            return str(e)
        if not pattern.name:
            return "Invalid empty resource name"
        if "/" in pattern.name or pattern.name in (".", ".."):
            return f"ACL binding contains invalid resource name: {pattern.name}"
        if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        return None


class Authorizer(Protocol):
    """What a request handler asks; implemented by ``acl_authorizer.AclAuthorizer``."""

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May ``principal``, connected from ``host`` (an address, no slash), do ``operation``
        to the resource ``name`` of ``resource_type``?"""
        ...

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's ``authorizeByResourceType`` (KIP-679): may ``principal`` do ``operation`` to
        at least one resource of ``resource_type`` (an ALLOW that no DENY cancels)?"""
        ...
