"""failures_written: a pass's Retry and Refused become the resource's conditions, then go up."""

from __future__ import annotations

import asyncio

import pytest

from odradek_operator.reconcile.status import (
    Refused,
    Retry,
    condition,
    failures_written,
)

BEFORE = [condition("Ready", True, "InSync", "matches its spec")]


def written_by(error: Exception) -> list[dict]:
    written: list[list[dict]] = []

    async def write(conditions: list[dict]) -> None:
        written.append(conditions)

    async def fail() -> None:
        async with failures_written(write, BEFORE):
            raise error

    with pytest.raises(type(error)):
        asyncio.run(fail())
    [conditions] = written
    return conditions


def by_type(conditions: list[dict]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in conditions}


def test_a_retry_is_ready_false_with_its_reason():
    conditions = written_by(Retry("no broker answers", reason="ClusterUnreachable"))
    assert by_type(conditions) == {"Ready": ("False", "ClusterUnreachable", "no broker answers")}


def test_a_refusal_is_an_error_and_not_ready():
    conditions = written_by(Refused("InvalidSpec", "spec.partitions: must be positive"))
    assert by_type(conditions) == {
        "Error": ("True", "InvalidSpec", "spec.partitions: must be positive"),
        "Ready": ("False", "InvalidSpec", "spec.partitions: must be positive"),
    }


def test_nothing_is_written_when_the_pass_succeeds():
    written = []

    async def write(conditions):
        written.append(conditions)

    async def succeed():
        async with failures_written(write, BEFORE):
            pass

    asyncio.run(succeed())
    assert written == []
