"""Kafka's ACL filters (``AclBindingFilter``): what DescribeAcls and DeleteAcls select.

As ``org.apache.kafka.common.acl``/``resource`` filters: ANY in a field (or None for a string)
matches every value; a pattern filter of type MATCH selects the patterns that would match the
resource it names (the LITERAL name, the LITERAL ``*`` and every PREFIXED prefix of the name),
ANY selects both pattern types by exact name. A filter with an UNKNOWN element is invalid
(``unknown_reason``). Values only.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.security.acl import (
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["AccessControlEntryFilter", "AclBindingFilter", "ResourcePatternFilter"]


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None  # None: any name
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that match the resource named
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    def matches_at_most_one(self) -> bool:
        """Kafka's ``matchesAtMostOne``: this filter names one pattern exactly."""
        return (
            self.resource_type is not ResourceType.ANY
            and self.name is not None
            and self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
        )

    def unknown_reason(self) -> str | None:
        if self.resource_type is ResourceType.UNKNOWN:
            return "Filter contain UNKNOWN resource type"
        if self.pattern_type is PatternType.UNKNOWN:
            return "Filter contain UNKNOWN pattern type"
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def unknown_reason(self) -> str | None:
        if self.operation is AclOperation.UNKNOWN:
            return "Filter contain UNKNOWN operation"
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "Filter contain UNKNOWN permission type"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    @classmethod
    def any(cls) -> AclBindingFilter:
        return cls(
            ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
            AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown_reason(self) -> str | None:
        return self.pattern.unknown_reason() or self.entry.unknown_reason()
