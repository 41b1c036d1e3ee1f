"""What both herders (standalone and distributed) check of a connector's config before they
store it and of its state before its offsets change (KIP-875), and the type they report for
it: one home, so the two answer the REST API alike.

Pure functions over the config map and the herder's error classes (HTTP 400 for what the user
got wrong); safe to call from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.api import SinkConnector
from odradek.connect.herder import BadRequestError, ConnectorType, TargetState

__all__ = [
    "TASKS_MAX_LIMIT",
    "check_connector_config",
    "config_errors_message",
    "connector_type",
    "raise_on_config_errors",
    "require_stopped",
    "tasks_max",
]

TASKS_MAX_LIMIT = 1024  # tasks one connector may ask for


def tasks_max(config: Mapping[str, str]) -> int:
    """``tasks.max`` (default 1); a ``BadRequestError`` naming it when it is not an integer in
    1..``TASKS_MAX_LIMIT``."""
    raw = config.get("tasks.max", "1")
    try:
        count = int(raw)
    except ValueError:
        raise BadRequestError(f'"tasks.max" must be an integer, not {raw!r}') from None
    if not 1 <= count <= TASKS_MAX_LIMIT:
        raise BadRequestError(f'"tasks.max" must be between 1 and {TASKS_MAX_LIMIT}')
    return count


def check_connector_config(name: str, config: Mapping[str, str]) -> dict[str, str]:
    """The config as it is stored (``name`` set to the connector's), after the checks that need
    no plugin: ``tasks.max`` and a ``connector.class`` given."""
    checked = {**config, "name": name}
    tasks_max(checked)
    if not checked.get("connector.class"):
        raise BadRequestError('Missing required configuration "connector.class"')
    return checked


def config_errors_message(infos: Mapping[str, Any]) -> str:
    """Kafka's message for a config that does not validate, from its ConfigInfos JSON."""
    errors = [
        f'"{c["value"]["name"]}": {e}'
        for c in infos.get("configs", [])
        for e in c.get("value", {}).get("errors", [])
    ]
    count = infos.get("error_count", len(errors))
    return (
        f"Connector configuration is invalid and contains the following {count} error(s):\n"
        + "\n".join(errors)
        + "\nYou can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )


def raise_on_config_errors(infos: Mapping[str, Any]) -> None:
    """A ``BadRequestError`` with Kafka's message when the validation found errors."""
    if infos.get("error_count", 0):
        raise BadRequestError(config_errors_message(infos))


def connector_type(
    connector_class: Callable[[Mapping[str, str]], type], config: Mapping[str, str]
) -> ConnectorType:
    """SOURCE or SINK by the connector's class; UNKNOWN when the class cannot be loaded."""
    try:
        cls = connector_class(config)
    except Exception:  # noqa: BLE001 - a class that cannot be loaded has no known type
        return ConnectorType.UNKNOWN
    return ConnectorType.SINK if issubclass(cls, SinkConnector) else ConnectorType.SOURCE


def require_stopped(name: str, target: TargetState | None) -> None:
    """KIP-875: offsets change only while the connector is STOPPED; Kafka's 400 otherwise."""
    if target is not TargetState.STOPPED:
        raise BadRequestError(
            "Connectors must be in the STOPPED state before their offsets can be modified. "
            f"This can be done for the specified connector by issuing a 'PUT' request to the "
            f"'/connectors/{name}/stop' endpoint"
        )
