"""The broker's authorizer keys, Kafka's: ``authorizer.class.name``, ``super.users``,
``allow.everyone.if.no.acl.found``.

``authorizer.class.name`` empty means no authorizer (everything is allowed, and the ACL APIs
answer SECURITY_DISABLED); Kafka's ``kafka.security.authorizer.AclAuthorizer`` (or its pre-2.4
name ``kafka.security.auth.SimpleAclAuthorizer``) is ``security.acl_authorizer``; any other class
is refused by name at start. ``super.users`` is a ``;``-separated list of principals
(``User:admin;User:CN=broker0,O=example``), each checked. Pure: any thread.
"""

from __future__ import annotations

from odradek.config.keys import ConfigKey, ConfigType, invalid_value
from odradek.security.acl import parse_principal

__all__ = ["ACL_AUTHORIZER_CLASS_NAMES", "AUTHORIZER_KEYS", "super_user_principals"]

ACL_AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)


def super_user_principals(text: str) -> list[str]:
    """The principals of a ``super.users`` value; ``ValueError`` names a bad one."""
    principals = [p.strip() for p in (text or "").split(";") if p.strip()]
    for principal in principals:
        parse_principal(principal)
    return principals


def _class_name(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    value = raw.strip()
    if value and value not in ACL_AUTHORIZER_CLASS_NAMES:
        supported = " or ".join(ACL_AUTHORIZER_CLASS_NAMES)
        raise invalid_value(
            name, raw, f"the supported authorizer is {supported} (empty: no authorizer)"
        )
    return value


def _super_users(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise invalid_value(name, raw, "Expected a value of type STRING")
    try:
        return ";".join(super_user_principals(raw))
    except ValueError as e:
        raise invalid_value(name, raw, str(e)) from e


AUTHORIZER_KEYS = (
    ConfigKey(
        "authorizer.class.name",
        ConfigType.STRING,
        "",
        "The authorizer: kafka.security.authorizer.AclAuthorizer (ACLs in ZooKeeper, as "
        "Kafka's); empty: none, every request is allowed.",
        convert=_class_name,
    ),
    ConfigKey(
        "super.users",
        ConfigType.STRING,
        "",
        "Principals allowed everything whatever the ACLs, separated by ';' "
        "(User:admin;User:CN=broker0).",
        convert=_super_users,
    ),
    ConfigKey(
        "allow.everyone.if.no.acl.found",
        ConfigType.BOOLEAN,
        False,
        "Allow every principal to use a resource that has no ACL at all.",
    ),
)
