"""Build kio response dataclasses for any version from the same keyword arguments.

Fields differ between versions of a message (``log_start_offset`` appears in Produce v5,
``leader_epoch`` in Metadata v7, ...). Handlers pass every value they know; ``build`` keeps those
the version's class declares and leaves the others to their defaults, so one handler serves every
version in ``protocol.apis``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from odradek.protocol.fields import layout

NO_THROTTLE = timedelta(0)


def build(cls: type[Any], **values: Any) -> Any:
    fields = cls.__dataclass_fields__
    return cls(**{name: value for name, value in values.items() if name in fields})


def element_type(cls: type[Any], field_name: str) -> type[Any]:
    """The class of the elements of a ``tuple[X, ...]`` field, nullable (``... | None``) or not:
    the protocol layer's layout of ``cls`` already knows it."""
    schema = layout(cls)
    spec = next(s for s in (*schema.fields, *schema.tagged) if s.name == field_name)
    if spec.struct_type is None:
        raise TypeError(f"{cls.__name__}.{field_name} is not an array of structs")
    return spec.struct_type
