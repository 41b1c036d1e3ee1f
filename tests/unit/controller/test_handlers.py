"""The controller's listener is its handlers package: each API served at its versions, and the
``Controller`` it calls takes and returns domain values only (no ``Any``: wire types stay in
``controller.handlers``)."""

from __future__ import annotations

import inspect
import typing

from odradek.controller.controller import Controller
from odradek.controller.handlers import served
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey

DECISIONS = (
    "alter_partition",
    "elect_leaders",
    "controlled_shutdown",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "leader_and_isr_answered",
)


def test_the_listener_serves_each_controller_api_at_its_versions(harness):
    assert {key: api.versions for key, api in served(harness.controller).items()} == {
        ApiKey.ALTER_PARTITION: (2, 3),
        ApiKey.ELECT_LEADERS: SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS],
        ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    }


def test_the_controller_decisions_take_and_return_domain_values():
    for name in DECISIONS:
        signature = inspect.signature(getattr(Controller, name))
        hints = typing.get_type_hints(getattr(Controller, name))
        assert set(hints) == set(signature.parameters) - {"self"} | {"return"}, name
        for what, hint in hints.items():
            assert "Any" not in repr(hint), f"Controller.{name}: {what} is {hint!r}"
