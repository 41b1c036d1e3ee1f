"""Request bodies and query parameters of the Connect REST API, checked before a herder sees them.

Pure: every function takes what the client sent (decoded JSON, query strings) and returns typed
values, or raises ``BadRequestError`` with a message that names the field at fault (``config value
of "tasks.max" must be a string``), so a bad body is always a 400 and never reaches a herder as a
``TypeError`` that would surface as a 500.

Shapes, as Kafka Connect's REST entities have them:

- ``POST /connectors``: ``{"name": str, "config": {str: str}, "initial_state": "RUNNING"|...}``
  (KIP-980's ``initial_state`` is optional);
- ``PUT /connectors/{name}/config`` and ``PUT /connector-plugins/{p}/config/validate``: the
  config map itself; ``PATCH /connectors/{name}/config`` (KIP-477): a map whose ``null`` values
  remove keys;
- ``PATCH /connectors/{name}/offsets`` (KIP-875): ``{"offsets": [{"partition": {...},
  "offset": {...}|null}, ...]}``.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from odradek.connect.herder import BadRequestError, TargetState

__all__ = [
    "CONNECTOR_NAME_MAX_CHARS",
    "OFFSETS_MAX",
    "check_connector_name",
    "decode_json",
    "parse_bool",
    "parse_config",
    "parse_config_patch",
    "parse_create",
    "parse_offsets",
    "parse_task_id",
    "with_name",
]

CONNECTOR_NAME_MAX_CHARS = 249  # a connector's name ends up in topic-style keys and group ids
OFFSETS_MAX = 100_000  # partitions in one KIP-875 PATCH body

# KIP-980: the initial states a new connector may be created in, and the target each means.
INITIAL_STATES = {
    "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED,
    "STOPPED": TargetState.STOPPED,
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def decode_json(body: bytes) -> Any:
    """The request body as JSON; an empty or malformed body is a 400 saying where it broke."""
    if not body.strip():
        raise BadRequestError("the request body is empty; a JSON document is expected")
    try:
        text = body.decode("utf-8")  # RFC 8259: JSON exchanged between systems is UTF-8
    except UnicodeDecodeError as exc:
        raise BadRequestError(
            f"the request body is not UTF-8: {exc.reason} at byte {exc.start}"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequestError(
            f"the request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    """A boolean query parameter (``?includeTasks=true``); anything but true/false is a 400."""
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise BadRequestError(f"query parameter {name} must be true or false, not {value!r}")


def check_connector_name(name: Any, *, where: str = "name") -> str:
    """A connector name as Kafka admits it: a non-empty string, no '/', no control characters."""
    if not isinstance(name, str):
        raise BadRequestError(f"{where} must be a string, got {_kind(name)}")
    name = name.strip()
    if not name:
        raise BadRequestError("connector name must not be empty")
    if len(name) > CONNECTOR_NAME_MAX_CHARS:
        raise BadRequestError(
            f"connector name is {len(name)} characters; at most {CONNECTOR_NAME_MAX_CHARS}"
        )
    if "/" in name:
        raise BadRequestError(f"connector name {name!r} must not contain '/'")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise BadRequestError(f"connector name {name!r} must not contain control characters")
    return name


def parse_config(value: Any, *, where: str = "the request body") -> dict[str, str]:
    """A connector config: a JSON object of string values (the message names a bad key)."""
    if not isinstance(value, dict):
        raise BadRequestError(f"{where} must be a JSON object of config keys, got {_kind(value)}")
    config: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str):
            raise BadRequestError(
                f'config value of "{key}" must be a string, got {_kind(item)}'
                + (f' (write "{item}")' if isinstance(item, int | float) else "")
            )
        config[key] = item
    return config


def parse_config_patch(value: Any) -> dict[str, str | None]:
    """KIP-477's PATCH body: like a config, but ``null`` removes the key."""
    if not isinstance(value, dict):
        raise BadRequestError(f"the request body must be a JSON object, got {_kind(value)}")
    patch: dict[str, str | None] = {}
    for key, item in value.items():
        if item is not None and not isinstance(item, str):
            raise BadRequestError(
                f'config value of "{key}" must be a string or null, got {_kind(item)}'
            )
        patch[key] = item
    return patch


def with_name(name: str, config: Mapping[str, str]) -> dict[str, str]:
    """``config`` with ``name`` set to ``name``; a different ``name`` in it is a 400 (as Kafka)."""
    included = config.get("name")
    if included is not None and included.strip() != name:
        raise BadRequestError(
            f"connector name in the config ({included!r}) does not match the connector name "
            f"({name!r})"
        )
    return {**config, "name": name}


def parse_create(value: Any) -> tuple[str, dict[str, str], TargetState]:
    """``POST /connectors``: (name, config with ``name`` set, initial target state)."""
    if not isinstance(value, dict):
        raise BadRequestError(f"the request body must be a JSON object, got {_kind(value)}")
    unknown = sorted(set(value) - {"name", "config", "initial_state"})
    if unknown:
        raise BadRequestError(f"unknown field(s) in the request body: {', '.join(unknown)}")
    if "config" not in value or value["config"] is None:
        raise BadRequestError('the request body must have a "config" object')
    config = parse_config(value["config"], where='"config"')
    raw_name = value.get("name")
    if raw_name is None:
        raw_name = config.get("name")
        if raw_name is None:
            raise BadRequestError('the request body must have a "name" (or "name" in "config")')
    name = check_connector_name(raw_name, where='"name"')
    state = value.get("initial_state")
    if state is None:
        target = TargetState.STARTED
    elif isinstance(state, str) and state.upper() in INITIAL_STATES:
        target = INITIAL_STATES[state.upper()]
    else:
        raise BadRequestError(
            f'"initial_state" must be one of {", ".join(INITIAL_STATES)}, not {state!r}'
        )
    return name, with_name(name, config), target


def parse_task_id(value: str) -> int:
    try:
        task = int(value)
    except ValueError:
        raise BadRequestError(f"task id must be an integer, not {value!r}") from None
    if task < 0:
        raise BadRequestError(f"task id must not be negative, not {task}")
    return task


def parse_offsets(value: Any) -> list[dict[str, Any]]:
    """KIP-875's PATCH body: the list under ``offsets``, each entry a partition and an offset."""
    if not isinstance(value, dict) or "offsets" not in value:
        raise BadRequestError('the request body must be a JSON object with an "offsets" array')
    offsets = value["offsets"]
    if not isinstance(offsets, list):
        raise BadRequestError(f'"offsets" must be an array, got {_kind(offsets)}')
    if not offsets:
        raise BadRequestError('"offsets" must not be empty')
    if len(offsets) > OFFSETS_MAX:
        raise BadRequestError(f'"offsets" has {len(offsets)} entries; at most {OFFSETS_MAX}')
    parsed: list[dict[str, Any]] = []
    for i, entry in enumerate(offsets):
        if not isinstance(entry, dict):
            raise BadRequestError(f"offsets[{i}] must be an object, got {_kind(entry)}")
        unknown = sorted(set(entry) - {"partition", "offset"})
        if unknown:
            raise BadRequestError(f"offsets[{i}] has unknown field(s): {', '.join(unknown)}")
        partition = entry.get("partition")
        if not isinstance(partition, dict):
            raise BadRequestError(
                f"offsets[{i}].partition must be an object, got {_kind(partition)}"
            )
        offset = entry.get("offset")
        if offset is not None and not isinstance(offset, dict):
            raise BadRequestError(
                f"offsets[{i}].offset must be an object or null, got {_kind(offset)}"
            )
        parsed.append({"partition": partition, "offset": offset})
    return parsed
