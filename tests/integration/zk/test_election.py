"""Proves controller election: one controller at a time, epochs that only grow, prompt step-down."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from kazoo.protocol.connection import _CONNECTION_DROP

from odradek.zk.client import ZkClient
from odradek.zk.election import ControllerElection, read_controller
from odradek.zk.paths import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    ControllerEpoch,
    ControllerInfo,
)

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 2.0
CALL_TIMEOUT_S = 10.0
TAKEOVER_S_MAX = 5.0  # a closed or resigned controller is replaced well within this
SETTLE_S = 0.3  # after a winner emerges, nobody else may win during this long


class Journal:
    """Every on_elect/on_resign of every candidate, in the order they happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[tuple[int, str, object]] = []

    def add(self, controller_id: int, kind: str, value: object) -> None:
        with self._lock:
            self.entries.append((controller_id, kind, value))

    def of(self, controller_id: int) -> list[tuple[str, object]]:
        with self._lock:
            return [(kind, value) for cid, kind, value in self.entries if cid == controller_id]

    def elected_epochs(self) -> list[int]:
        with self._lock:
            return [value for _, kind, value in self.entries if kind == "elect"]


class Candidate:
    """A controller candidate with its own thread, event loop and ZooKeeper session."""

    def __init__(self, hosts: str, controller_id: int, journal: Journal) -> None:
        self.controller_id = controller_id
        self.zk = ZkClient(hosts, session_timeout_s=SESSION_TIMEOUT_S)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.election = ControllerElection(
            self.zk,
            controller_id,
            on_elect=lambda epoch: journal.add(controller_id, "elect", epoch),
            on_resign=lambda reason: journal.add(controller_id, "resign", reason),
        )

    def _run(self, coroutine) -> object:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_TIMEOUT_S)

    def start(self) -> Candidate:
        self._thread.start()
        self.zk.start()

        async def start_election() -> None:
            self.election.start()

        self._run(start_election())
        return self

    def resign(self) -> None:
        self._run(self.election.resign())

    def close(self) -> None:
        """Stop campaigning, end the session, stop the loop and join the thread."""
        if self._thread.is_alive():
            self.resign()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CALL_TIMEOUT_S)
        self.zk.close()
        if not self.loop.is_running():
            self.loop.close()

    @property
    def is_controller(self) -> bool:
        return self.election.is_controller


@pytest.fixture
def candidates(hosts: str) -> Callable[[int], tuple[list[Candidate], Journal]]:
    """``candidates(n)`` -> n started candidates (ids 1000+) and their shared journal."""
    started: list[Candidate] = []
    journal = Journal()

    def make(count: int) -> tuple[list[Candidate], Journal]:
        group = [Candidate(hosts, 1000 + i, journal) for i in range(count)]
        barrier = threading.Barrier(count)

        def start(candidate: Candidate) -> None:
            barrier.wait(CALL_TIMEOUT_S)  # all campaign at the same moment
            candidate.start()

        threads = [threading.Thread(target=start, args=(c,)) for c in group]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(CALL_TIMEOUT_S)
        started.extend(group)
        return group, journal

    yield make
    for candidate in started:
        candidate.close()


def _controllers(group: list[Candidate]) -> list[Candidate]:
    return [c for c in group if c.is_controller]


def _one_controller(group: list[Candidate], wait_until) -> Candidate:
    """Wait for exactly one controller, check it stays alone for a moment, and return it."""
    wait_until(lambda: len(_controllers(group)) == 1, "one controller", TAKEOVER_S_MAX)
    time.sleep(SETTLE_S)
    winners = _controllers(group)
    assert len(winners) == 1, [c.controller_id for c in winners]
    return winners[0]


def _znodes(zk: ZkClient) -> tuple[int, int]:
    """(/controller's id, /controller_epoch) as an observer reads them."""
    controller = ControllerInfo.decode(zk.get(CONTROLLER_PATH)[0])
    return controller.controller_id, ControllerEpoch.decode(zk.get(CONTROLLER_EPOCH_PATH)[0]).epoch


@pytest.mark.parametrize("count", [2, 3])
def test_racing_candidates_elect_exactly_one_controller(
    candidates, make_client, wait_until, count: int
) -> None:
    """Candidates that start together produce one controller, at epoch 1, named in /controller."""
    group, journal = candidates(count)
    winner = _one_controller(group, wait_until)
    assert winner.election.epoch == 1
    assert _znodes(make_client()) == (winner.controller_id, 1)
    assert journal.elected_epochs() == [1]


def test_epochs_strictly_increase_across_takeovers(candidates, make_client, wait_until) -> None:
    """Closing each winner in turn hands over within seconds, each time at a larger epoch."""
    group, journal = candidates(3)
    observer = make_client()
    previous_epoch = 0
    remaining = list(group)
    while remaining:
        winner = _one_controller(remaining, wait_until)
        epoch = winner.election.epoch
        assert epoch is not None and epoch > previous_epoch
        assert _znodes(observer) == (winner.controller_id, epoch)
        previous_epoch = epoch
        remaining.remove(winner)
        closed_at = time.monotonic()
        winner.close()
        assert journal.of(winner.controller_id) == [("elect", epoch), ("resign", "resigned")]
        if remaining:
            wait_until(lambda: _controllers(remaining), "a takeover", TAKEOVER_S_MAX)
            assert time.monotonic() - closed_at < TAKEOVER_S_MAX
    assert journal.elected_epochs() == sorted(set(journal.elected_epochs()))
    assert len(journal.elected_epochs()) == 3


def test_a_controller_whose_session_expires_resigns_and_is_superseded(
    candidates, make_client, wait_until, expire_session
) -> None:
    """On session expiry the controller steps down at once; the next win has a larger epoch."""
    group, journal = candidates(2)
    winner = _one_controller(group, wait_until)
    old_epoch = winner.election.epoch
    expire_session(winner.zk)
    wait_until(lambda: not winner.is_controller, "the expired controller stepped down", 1.0)
    successor = _one_controller(group, wait_until)
    assert successor.election.epoch > old_epoch
    assert _znodes(make_client()) == (successor.controller_id, successor.election.epoch)
    history = journal.of(winner.controller_id)
    assert history[0] == ("elect", old_epoch)
    assert history[1][0] == "resign" and "ZooKeeper" in str(history[1][1])
    assert journal.elected_epochs() == sorted(set(journal.elected_epochs()))


def test_a_dropped_connection_suspends_then_resumes_the_same_epoch(candidates, wait_until) -> None:
    """SUSPENDED resigns at once; back with the same session, the controller resumes its epoch."""
    group, journal = candidates(2)
    winner = _one_controller(group, wait_until)
    epoch = winner.election.epoch
    session_id = winner.zk.session_id
    winner.zk._kazoo._call(_CONNECTION_DROP, None)  # kazoo's own test hook
    wait_until(
        lambda: len(journal.of(winner.controller_id)) >= 3, "suspend and resume", TAKEOVER_S_MAX
    )
    assert winner.zk.session_id == session_id
    assert journal.of(winner.controller_id) == [
        ("elect", epoch),
        ("resign", "ZooKeeper connection suspended"),
        ("elect", epoch),
    ]
    assert _one_controller(group, wait_until) is winner


def test_resign_and_deleting_controller_hand_over(candidates, make_client, wait_until) -> None:
    """resign() deletes /controller; deleting it from outside makes the holder step down too."""
    group, journal = candidates(2)
    admin = make_client()
    first = _one_controller(group, wait_until)
    first.resign()
    assert journal.of(first.controller_id) == [("elect", 1), ("resign", "resigned")]
    second = _one_controller(group, wait_until)
    assert second is not first and second.election.epoch == 2

    admin.delete(CONTROLLER_PATH)  # what `zkCli delete /controller` does to force an election
    wait_until(lambda: len(journal.of(second.controller_id)) >= 3, "re-election", TAKEOVER_S_MAX)
    assert journal.of(second.controller_id) == [
        ("elect", 2),
        ("resign", "the controller node was deleted"),
        ("elect", 3),
    ]

    async def read() -> tuple[ControllerInfo, int] | None:
        return await read_controller(admin)

    controller = asyncio.run(read())
    assert controller is not None
    assert (controller[0].controller_id, controller[1]) == (second.controller_id, 3)
