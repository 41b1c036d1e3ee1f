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
type), and a broker without ``authorizer.class.name`` allows everything. Values only here; the
ACL authorizer itself lives in ``acl_authorizer``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from odradek.security.principal import KafkaPrincipal

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_HOST",
    "AccessControlEntry",
    "AclBinding",
    "AclOperation",
    "AclPermissionType",
    "Authorizer",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
]

CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name, as Kafka's
WILDCARD = "*"  # a LITERAL pattern of this name matches every resource of its type
WILDCARD_HOST = "*"


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


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


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
