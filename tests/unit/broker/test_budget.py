"""A budget grants up to its capacity, never more, and wakes its waiters oldest first."""

from __future__ import annotations

import pytest

from odradek.broker.budget import UNBOUNDED, Budget


def test_grants_up_to_the_capacity_and_refuses_whole():
    budget = Budget(100)
    assert budget.try_reserve(60)
    assert not budget.try_reserve(41)  # refused whole: nothing taken
    assert budget.used == 60 and budget.available == 40
    assert budget.try_reserve(40)
    assert not budget.try_reserve(1)


def test_unbounded_always_grants():
    budget = Budget(UNBOUNDED)
    assert budget.try_reserve(1 << 40) and budget.try_reserve(1 << 40)
    assert not budget.bounded


def test_release_wakes_waiters_oldest_first_while_something_is_left():
    budget = Budget(10)
    budget.try_reserve(10)
    woken = []

    def waiter(name, amount):
        def retry():
            if budget.try_reserve(amount):
                woken.append(name)
            else:
                budget.wait(retry)

        return retry

    first, second, third = waiter("first", 4), waiter("second", 4), waiter("third", 4)
    for callback in (first, second, third):
        budget.wait(callback)
    budget.release(8)
    assert woken == ["first", "second"]  # the third could not get its 4 and waits again
    assert budget.waiting == 1
    budget.release(4)
    assert woken == ["first", "second", "third"] and budget.waiting == 0


class Connection:
    def retry(self) -> None:
        pass


def test_waiting_twice_is_once_and_cancel_forgets():
    budget = Budget(1)
    budget.try_reserve(1)
    connection = Connection()
    budget.wait(lambda: None)
    budget.wait(connection.retry)
    budget.wait(connection.retry)  # a new bound method each time, equal to the first
    assert budget.waiting == 2
    budget.cancel(connection.retry)
    budget.cancel(connection.retry)  # not waiting any more: nothing happens
    assert budget.waiting == 1


def test_releasing_more_than_is_used_is_a_bug():
    budget = Budget(10)
    budget.try_reserve(3)
    with pytest.raises(RuntimeError, match="only 3"):
        budget.release(4)
    with pytest.raises(ValueError):
        budget.try_reserve(-1)
    with pytest.raises(ValueError):
        Budget(0)
