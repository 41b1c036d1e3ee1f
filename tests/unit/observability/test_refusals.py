"""RefusalLog: a request's refusals take at most LOGGED_REFUSALS_MAX lines, each message cut at
LOGGED_MESSAGE_CHARS_MAX, plus one line counting the rest by error code."""

from __future__ import annotations

import logging

from odradek.errors import ErrorCode
from odradek.observability.refusals import (
    LOGGED_MESSAGE_CHARS_MAX,
    LOGGED_REFUSALS_MAX,
    RefusalLog,
)


def test_a_hundred_thousand_refusals_take_eleven_lines(caplog):
    logger = logging.getLogger("test.refusals")
    refusals = RefusalLog(logger, "CreateTopics")
    with caplog.at_level(logging.INFO, logger="test.refusals"):
        for n in range(100_000):
            error = ErrorCode.policy_violation if n % 2 else ErrorCode.invalid_request
            refusals.refused(f"topic-{n}", error, "x" * 10_000 if n == 0 else "why")
        refusals.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == LOGGED_REFUSALS_MAX + 1
    assert lines[0].startswith("CreateTopics topic-0: invalid_request xxx")
    assert len(lines[0]) < LOGGED_MESSAGE_CHARS_MAX + 100 and "(10000 characters)" in lines[0]
    assert lines[-1] == (
        "CreateTopics: 99990 more entries of the same request refused "
        "(invalid_request x49995, policy_violation x49995)"
    )


def test_nothing_is_logged_at_close_when_every_refusal_was():
    logger = logging.getLogger("test.refusals.few")
    refusals = RefusalLog(logger, "AlterConfigs")
    refusals.refused("r", ErrorCode.invalid_request, None)
    refusals.close()
    assert not refusals.unlogged
