"""Fixtures for the controller's unit tests: a controller on an in-memory store and a recording
channel (``controller_doubles``), elected and driven one event batch at a time."""

from __future__ import annotations

import pytest
from controller_doubles import FakeElection, InMemoryStore, RecordingChannel

from odradek.controller.controller import Controller
from odradek.observability.metrics import controller_metrics, new_registry


class Harness:
    """One controller with its doubles; ``await h.settle()`` runs every pending event."""

    def __init__(self, *, unclean_leader_election_enable: bool = False):
        self.store = InMemoryStore()
        self.channel = RecordingChannel()
        self.metrics = controller_metrics(new_registry())
        self.controller = Controller(
            1000,
            self.store,
            self.channel,
            metrics=self.metrics,
            unclean_leader_election_enable=unclean_leader_election_enable,
        )
        self.election = FakeElection(self.controller, self.store)
        self.controller.election = self.election

    async def start(self, brokers=(1, 2, 3), epoch: int = 1) -> None:
        """Brokers registered, then this controller wins ``epoch``; everything processed."""
        import asyncio

        self.controller.loop = asyncio.get_running_loop()
        for broker_id in brokers:
            self.store.register_broker(broker_id)
        self.election.win(epoch)
        await self.settle()

    async def settle(self) -> int:
        return await self.controller.process_pending()

    @property
    def model(self):
        return self.controller.model

    def state(self, topic: str, partition: int):
        return self.store.states[(topic, partition)]


@pytest.fixture
def harness() -> Harness:
    return Harness()


@pytest.fixture
def make_harness():
    return Harness
