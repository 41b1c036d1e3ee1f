"""What CreateAcls, DescribeAcls and DeleteAcls share: wire codes to ACL values, and the checks
KafkaApis makes before any of them reaches the authorizer.

Codes Kafka does not know read as UNKNOWN (Kafka's ``fromCode``), so a filter or binding that
carries one is refused as INVALID_REQUEST by the rules of ``security.acl``/``acl_filter``.
``checked_authorizer`` gives the authorizer, or the error for the whole request, in KafkaApis'
order: CLUSTER_AUTHORIZATION_FAILED without the Cluster permission the API needs (ALTER to change
ACLs, DESCRIBE to list them), then SECURITY_DISABLED when the broker has no ACL authorizer.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from odradek.broker.context import RequestContext
from odradek.errors import ErrorCode
from odradek.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.acl_filter import (
    AccessControlEntryFilter,
    AclBindingFilter,
    ResourcePatternFilter,
)

__all__ = ["authorizer", "binding_filter", "checked_authorizer", "code"]

E = TypeVar("E", bound=enum.IntEnum)

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."


def code(kind: type[E], value: int) -> E:
    """The value of wire code ``value``, UNKNOWN for a code Kafka does not define."""
    try:
        return kind(int(value))
    except ValueError:
        return kind(0)  # every ACL enum's 0 is UNKNOWN


def authorizer(ctx: RequestContext) -> AclAuthorizer | None:
    found = ctx.broker.authorizer
    return found if isinstance(found, AclAuthorizer) else None


def checked_authorizer(
    ctx: RequestContext, operation: AclOperation
) -> AclAuthorizer | tuple[ErrorCode, str]:
    """The ACL authorizer the request goes to, or the error and message of the whole request."""
    if not ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, CLUSTER_DENIED_MESSAGE
    found = authorizer(ctx)
    if found is None:
        return ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE
    return found


def binding_filter(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter, as a filter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            code(ResourceType, item.resource_type_filter),
            item.resource_name_filter,
            code(PatternType, getattr(item, "pattern_type_filter", PatternType.LITERAL)),
        ),
        AccessControlEntryFilter(
            item.principal_filter,
            item.host_filter,
            code(AclOperation, item.operation),
            code(AclPermissionType, item.permission_type),
        ),
    )
