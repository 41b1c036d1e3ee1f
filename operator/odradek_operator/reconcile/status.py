"""Status conditions and the operation in progress, written where a user reads them.

A condition is Kubernetes' shape (type, status "True"/"False", reason in CamelCase, message,
lastTransitionTime); ``set_condition`` keeps lastTransitionTime when the status did not change.
The reconcilers raise ``Retry`` (come back after ``delay_s``: the world is not there yet) or
``Refused`` (the spec asks for something the operator will not do; a condition says why until
the spec changes); the kopf handlers turn them into TemporaryError / PermanentError.
``failures_written`` is where a resource's pass (topics, users) writes either as its conditions
before it goes up.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["Refused", "Retry", "condition", "failures_written", "now", "set_condition", "IDLE"]

IDLE = {"type": "Idle"}


class Retry(Exception):
    def __init__(
        self,
        message: str,
        delay_s: float = 5.0,
        reason: str = "Waiting",
        status: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.delay_s = delay_s
        self.reason = reason
        self.status = status or {}  # status fields to write while waiting (operation, ...)


class Refused(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str, true: bool, reason: str, message: str, observed_generation: int | None = None
) -> dict:
    """``observed_generation``: the generation the condition speaks of (metav1.Condition's
    field; ``kubectl wait --for=condition=...`` ignores a condition of an older generation)."""
    result = {
        "type": type_,
        "status": "True" if true else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }
    if observed_generation is not None:
        result["observedGeneration"] = observed_generation
    return result


def set_condition(conditions: list[dict] | None, new: dict) -> list[dict]:
    """``conditions`` with ``new`` replacing the one of its type (same status: time kept)."""
    result = []
    for c in conditions or []:
        if c.get("type") == new["type"]:
            if c.get("status") == new["status"]:
                new = {
                    **new,
                    "lastTransitionTime": c.get("lastTransitionTime", new["lastTransitionTime"]),
                }
            continue
        result.append(c)
    result.append(new)
    return sorted(result, key=lambda c: c["type"])


@contextlib.asynccontextmanager
async def failures_written(
    write: Callable[[list[dict]], Awaitable[None]], conditions: list[dict] | None
) -> AsyncIterator[None]:
    """A ``Retry`` or ``Refused`` raised inside is written, then raised on: a Retry as Ready
    False (its reason), a Refused as Error True and Ready False. ``conditions``: the resource's
    conditions before the pass; ``write`` patches the status with the new ones."""
    try:
        yield
    except Retry as retry:
        await write(set_condition(conditions, condition("Ready", False, retry.reason, str(retry))))
        raise
    except Refused as refused:
        refusal = set_condition(conditions, condition("Error", True, refused.reason, str(refused)))
        await write(set_condition(refusal, condition("Ready", False, refused.reason, str(refused))))
        raise
