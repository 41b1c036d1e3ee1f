"""core/v1 resource values of a spec: ``Resources`` (limits and requests, quantities checked, with
each component's default requests) and ``Storage`` (a claim's size and StorageClass).

Every container gets requests (``DEFAULT_REQUESTS``, per component) for each of cpu and memory
the user sets neither a request nor a limit for: Kubernetes takes a limit without a request as
the request, so a default never exceeds the user's limit. The defaults are the operator's, not
the CRD's (a schema default would be written into every resource and hide the limit-only case).

Immutable, no I/O: any thread may call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek_operator.model.spec.readers import SpecError, _mapping, _only, _quantity

__all__ = [
    "DEFAULT_REQUESTS",
    "Resources",
    "Storage",
]

# Requests of each container when the spec sets neither a request nor a limit for a resource
# (docs/kubernetes.md, "Hardening"): what a small production pod needs to be scheduled fairly.
DEFAULT_REQUESTS: Mapping[str, Mapping[str, str]] = {
    "zookeeper": {"cpu": "100m", "memory": "512Mi"},
    "controller": {"cpu": "100m", "memory": "256Mi"},
    "broker": {"cpu": "250m", "memory": "1Gi"},
    "connect": {"cpu": "250m", "memory": "512Mi"},
}
NETWORK_POLICY_PEERS_MAX = 64


@dataclass(frozen=True, slots=True)
class Resources:
    """core/v1 ResourceRequirements (limits and requests), quantities checked."""

    limits: tuple[tuple[str, str], ...] = ()
    requests: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(
        cls, value: object, where: str, default_requests: Mapping[str, str] | None = None
    ) -> Resources:
        """``default_requests`` fill in the resources named neither in requests nor limits."""
        section = _mapping(value, where)
        _only(section, where, ("limits", "requests"))
        parts = {}
        for part in ("limits", "requests"):
            entries = _mapping(section.get(part), f"{where}.{part}")
            for name in entries:
                if not isinstance(name, str) or not name:
                    raise SpecError(f"{where}.{part}", f"{name!r} is not a resource name")
            parts[part] = tuple(
                sorted((name, _quantity(entries, name, f"{where}.{part}", "")) for name in entries)
            )
        named = {name for part in parts.values() for name, _ in part}
        extra = [(k, v) for k, v in (default_requests or {}).items() if k not in named]
        parts["requests"] = tuple(sorted((*parts["requests"], *extra)))
        return cls(**parts)

    @classmethod
    def defaults(cls, component: str) -> Resources:
        return cls(requests=tuple(sorted(DEFAULT_REQUESTS[component].items())))

    def to_dict(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.limits:
            out["limits"] = dict(self.limits)
        if self.requests:
            out["requests"] = dict(self.requests)
        return out


@dataclass(frozen=True, slots=True)
class Storage:
    size: str
    storage_class: str | None

    @classmethod
    def parse(cls, value: object, where: str, default_size: str) -> Storage:
        section = _mapping(value, where)
        _only(section, where, ("size", "storageClass"))
        storage_class = section.get("storageClass")
        if storage_class is not None and not isinstance(storage_class, str):
            raise SpecError(f"{where}.storageClass", "expected a string or null")
        return cls(_quantity(section, "size", where, default_size), storage_class)
