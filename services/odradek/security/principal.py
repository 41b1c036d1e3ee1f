"""Kafka's ``KafkaPrincipal``: a type and a name, printed ``User:alice``.

As Kafka's ``DefaultKafkaPrincipalBuilder``: a PLAINTEXT connection, and an SSL one without a
client certificate, is ``User:ANONYMOUS``; an SSL connection with a verified client certificate
is ``User:<its distinguished name, mapped by ssl.principal.mapping.rules>``. Values only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "USER_TYPE", "KafkaPrincipal"]

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
