"""disk_errors records an OSError (unless it does not count), then raises it as
KafkaStorageError or swallows it; cleanup runs first; other errors pass through untouched."""

from __future__ import annotations

import pytest

from odradek.errors import KafkaStorageError
from odradek.storage.io_errors import disk_errors

FAILURE = OSError(5, "Input/output error")


def recorded_nothing(error: OSError) -> None:
    pass


def test_an_os_error_is_recorded_then_raised_as_a_storage_error_chained_to_it():
    events: list[object] = []
    block = disk_errors(events.append, raise_as="I/O error in d", cleanup=lambda: events.append(1))
    with pytest.raises(KafkaStorageError, match=r"^I/O error in d: \[Errno 5\]") as raised, block:
        raise FAILURE
    assert events == [1, FAILURE]  # cleanup first
    assert raised.value.__cause__ is FAILURE


def test_without_raise_as_the_error_is_recorded_and_the_code_after_the_block_runs():
    recorded: list[OSError] = []
    with disk_errors(recorded.append):
        raise FAILURE
    assert recorded == [FAILURE]


def test_an_error_that_does_not_count_is_not_recorded_but_still_raised():
    recorded: list[OSError] = []
    block = disk_errors(recorded.append, raise_as="x", counts=lambda e: e.errno != 5)
    with pytest.raises(KafkaStorageError), block:
        raise FAILURE
    assert recorded == []


def test_the_message_may_be_made_only_on_error():
    made: list[str] = []

    def message() -> str:
        made.append("made")
        return "late"

    with disk_errors(recorded_nothing, raise_as=message):
        pass
    assert made == []
    with (
        pytest.raises(KafkaStorageError, match="^late: "),
        disk_errors(recorded_nothing, raise_as=message),
    ):
        raise FAILURE


def test_other_errors_and_success_pass_through():
    recorded: list[OSError] = []
    with pytest.raises(ValueError), disk_errors(recorded.append, raise_as="x"):
        raise ValueError("not the disk")
    with disk_errors(recorded.append, raise_as="x"):
        pass
    assert recorded == []
