"""Error handling follows Kafka's RetryWithToleranceOperator: retriable failures are retried
within errors.retry.timeout with doubling backoff, then tolerated (reported) or fatal."""

from __future__ import annotations

import pytest

from odradek.common.clock import ManualClock
from odradek.connect.api import ConfigException, RetriableError
from odradek.connect.runtime import errors as e


class FakeEvent:
    """A stopping event whose wait advances the fake clock instead of sleeping."""

    def __init__(self, clock):
        self.clock = clock
        self.waits = []

    def is_set(self):
        return False

    def wait(self, s):
        self.waits.append(round(s * 1000))
        self.clock.advance(s)


class Collect:
    def __init__(self):
        self.contexts = []

    def report(self, context):
        self.contexts.append(context)

    def flush(self, timeout_s):
        pass

    def close(self):
        pass


def handler(config, reporters=()):
    clock = ManualClock(monotonic_s=0.0)
    event = FakeEvent(clock)
    h = e.ErrorHandler(config, list(reporters), stopping=event, clock=clock.monotonic)
    return h, event


def test_config_defaults_and_errors():
    c = e.ErrorConfig.from_connector_config({})
    assert (c.tolerance_all, c.retry_timeout_ms, c.retry_delay_max_ms) == (False, 0, 60_000)
    with pytest.raises(ConfigException) as x:
        e.ErrorConfig.from_connector_config({"errors.tolerance": "some"})
    assert x.value.name == "errors.tolerance"
    with pytest.raises(ConfigException) as x:
        e.ErrorConfig.from_connector_config({"errors.log.enable": "yes"})
    assert x.value.name == "errors.log.enable"


def test_tolerance_none_fails_on_the_first_error():
    h, _ = handler(e.ErrorConfig())
    with pytest.raises(e.ToleranceExceeded) as x:
        h.execute(
            e.Stage.VALUE_CONVERTER, "C", lambda: 1 / 0, e.ErrorContext(e.Stage.KAFKA_CONSUME, "")
        )
    assert "VALUE_CONVERTER" in str(x.value)


def test_tolerance_all_reports_and_skips():
    r = Collect()
    h, _ = handler(e.ErrorConfig(tolerance_all=True), [r])
    ok, value = h.execute(
        e.Stage.TRANSFORMATION, "T", lambda: 1 / 0, e.ErrorContext(e.Stage.TRANSFORMATION, "")
    )
    assert (ok, value) == (False, None)
    assert r.contexts[0].stage is e.Stage.TRANSFORMATION
    assert isinstance(r.contexts[0].error, ZeroDivisionError)
    assert h.execute(
        e.Stage.TRANSFORMATION, "T", lambda: 7, e.ErrorContext(e.Stage.TRANSFORMATION, "")
    ) == (True, 7)


def test_retriable_errors_are_retried_with_doubling_backoff_until_the_timeout():
    h, event = handler(
        e.ErrorConfig(tolerance_all=True, retry_timeout_ms=2_000, retry_delay_max_ms=1_000)
    )
    calls = []

    def flaky():
        calls.append(1)
        raise RetriableError("later")

    ok, _ = h.execute(e.Stage.KEY_CONVERTER, "C", flaky, e.ErrorContext(e.Stage.KEY_CONVERTER, ""))
    assert not ok
    assert event.waits == [300, 600, 1000, 100]  # capped at the max delay, then the deadline
    assert len(calls) == 5


def test_retriable_success_after_retries():
    h, event = handler(e.ErrorConfig(retry_timeout_ms=10_000))
    left = [2]

    def flaky():
        if left[0]:
            left[0] -= 1
            raise RetriableError("later")
        return "ok"

    assert h.execute(
        e.Stage.KEY_CONVERTER, "C", flaky, e.ErrorContext(e.Stage.KEY_CONVERTER, "")
    ) == (True, "ok")
    assert event.waits == [300, 600]


def test_dlq_context_headers_are_kafkas():
    ctx = e.ErrorContext(
        e.Stage.VALUE_CONVERTER,
        "org.apache.kafka.connect.json.JsonConverter",
        topic="t",
        partition=2,
        offset=17,
    )
    ctx.error = ValueError("bad json")
    headers = dict(e.dlq_headers(ctx, "conn", 0))
    assert headers["__connect.errors.topic"] == b"t"
    assert headers["__connect.errors.partition"] == b"2"
    assert headers["__connect.errors.offset"] == b"17"
    assert headers["__connect.errors.connector.name"] == b"conn"
    assert headers["__connect.errors.task.id"] == b"0"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == b"org.apache.kafka.connect.json.JsonConverter"
    assert headers["__connect.errors.exception.class.name"] == b"builtins.ValueError"
    assert headers["__connect.errors.exception.message"] == b"bad json"
    assert b"ValueError: bad json" in headers["__connect.errors.exception.stacktrace"]
