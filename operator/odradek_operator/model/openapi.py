"""A CRD's structural OpenAPI v3 schema as the API server applies it, without an API server.

- :func:`validator` turns a CRD into a ``jsonschema`` validator for whole custom resources, strict
  like ``kubectl apply --validate=strict``: unknown fields fail (a real server prunes them with a
  warning), ``nullable`` is honoured, and the list-map keys of ``x-kubernetes-list-type: map`` must
  be unique (the API server refuses duplicates; JSON Schema cannot say it, so it is a keyword of
  our own here). CEL rules (``x-kubernetes-validations``) are NOT evaluated: the operator checks
  them itself.
- :func:`apply_defaults` fills in ``default:`` values the way the API server does on write
  (recursively: a defaulted ``{}`` gets its own fields' defaults). kmock does not default, so code
  that reads a resource calls this first and behaves the same against both.

Pure functions over plain dicts; safe to call from any thread.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from typing import Any

import jsonschema

from odradek_operator.model import crds

Schema = dict[str, Any]


def to_json_schema(schema: Schema) -> Schema:
    """A JSON Schema (draft 2020-12) equivalent of a structural OpenAPI v3 schema node."""
    out: Schema = {}
    for key, value in schema.items():
        if key in ("properties",):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in ("nullable", "default", "x-kubernetes-validations"):
            continue
        else:
            out[key] = copy.deepcopy(value)
    if schema.get("nullable"):
        kind = out.pop("type", None)
        out = {"anyOf": [{"type": "null"}, {**out, **({"type": kind} if kind else {})}]}
        return out
    is_object = schema.get("type") == "object"
    if (
        is_object
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and "properties" in schema
    ):
        out["additionalProperties"] = False
    return out


def _unique_map_keys(
    validator: Any, keys: list[str], instance: Any, schema: Schema
) -> Iterator[Any]:
    if not validator.is_type(instance, "array") or schema.get("x-kubernetes-list-type") != "map":
        return
    seen: set[tuple[Any, ...]] = set()
    for item in instance:
        if not isinstance(item, dict):
            continue
        key = tuple(item.get(k) for k in keys)
        if key in seen:
            shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key, strict=True))
            yield jsonschema.ValidationError(f"duplicate entries for key [{shown}]")
        seen.add(key)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {"x-kubernetes-list-map-keys": _unique_map_keys},
)


def validator(crd: dict[str, Any], version: str = crds.VERSION) -> jsonschema.protocols.Validator:
    """A validator for whole custom resources of ``crd``'s kind (apiVersion and kind included)."""
    schema = to_json_schema(crds.open_api_schema(crd, version))
    group = crd["spec"]["group"]
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    # Only metadata.name may be restricted by a CRD; the rest of ObjectMeta is Kubernetes' own.
    metadata = schema["properties"].get("metadata", {})
    name = metadata.get("properties", {}).get("name", {"type": "string"})
    schema["properties"]["metadata"] = {
        "type": "object",
        "properties": {"name": {**name, "minLength": 1}},
        "required": ["name"],
    }
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    _Validator.check_schema(schema)
    return _Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@functools.cache
def _validator_for(kind: str) -> jsonschema.protocols.Validator:
    return validator(crds.crd_for(kind))


def errors(resource: dict[str, Any]) -> list[str]:
    """Why ``resource`` (any kind of group odradek.io) would be refused; [] when it is valid."""
    kind = resource.get("kind")
    try:
        check = _validator_for(str(kind))
    except KeyError:
        return [f"unknown kind {kind!r} (not one of group {crds.GROUP})"]
    found = check.iter_errors(resource)
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]


def apply_defaults(schema: Schema, value: Any) -> Any:
    """A copy of ``value`` with the schema's defaults filled in, as the API server does."""
    value = copy.deepcopy(value)
    _default_into(schema, value)
    return value


def _default_into(schema: Schema, value: Any) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default_into(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in value.keys() - schema.get("properties", {}).keys():
                _default_into(extra, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default_into(schema["items"], item)


def resource_with_defaults(resource: dict[str, Any]) -> dict[str, Any]:
    """A custom resource of group odradek.io with its CRD's defaults applied."""
    crd = crds.crd_for(resource["kind"])
    return apply_defaults(crds.open_api_schema(crd), resource)
