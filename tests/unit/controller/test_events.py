"""The controller's event queue never drops an event: watch events coalesce per key instead.

A full queue used to drop a ZooKeeper watch event, and its watch was then never armed again.
The flood below comes from another thread, as kazoo's watch callbacks do.
"""

from __future__ import annotations

import asyncio
import threading

from odradek.controller.channel import ControllerChannels
from odradek.controller.controller import Controller
from odradek.controller.store import ControllerStore
from odradek.zk.client import WatchEvent, WatchKind, ZkClient

TOPICS = 25_000  # distinct keys, more than any fixed bound the queue might have had
REPEATS = 20_000  # the same key again and again
GET_TIMEOUT_S = 1.0


async def _drain(queue) -> list[str]:
    """Names of every pending event, in order; stops when none comes within the timeout."""
    names = []
    while True:
        try:
            async with asyncio.timeout(GET_TIMEOUT_S):
                name, _ = await queue.get()
        except TimeoutError:
            return names
        names.append(name)


def test_a_flood_of_watch_events_from_another_thread_loses_none():
    loop = asyncio.new_event_loop()
    # Never started: no I/O here.
    controller = Controller(1000, ControllerStore(ZkClient("127.0.0.1:1")), ControllerChannels())
    controller.loop = loop
    changed = WatchEvent(WatchKind.CHANGED, "/brokers/topics")

    def flood() -> None:
        for i in range(TOPICS):
            controller._watch("topic", f"t{i}")(changed)
        for _ in range(REPEATS):
            controller._watch("brokers")(changed)
            controller._watch("deletions")(changed)

    thread = threading.Thread(target=flood)
    thread.start()
    try:
        names = loop.run_until_complete(_flood_then_drain(thread, controller.events))
    finally:
        thread.join(timeout=30)
        loop.close()
    assert names[:TOPICS] == [f"topic t{i}" for i in range(TOPICS)]
    assert names[TOPICS:] == ["brokers", "deletions"]


async def _flood_then_drain(thread: threading.Thread, queue) -> list[str]:
    await asyncio.to_thread(thread.join, 30)
    return await _drain(queue)


def test_a_pending_key_absorbs_repeats_and_a_taken_one_is_queued_again():
    from odradek.controller.events import EventQueue

    async def scenario() -> None:
        queue = EventQueue()
        ran: list[str] = []

        def action(name: str):
            async def run() -> None:
                ran.append(name)

            return run

        assert queue.put("brokers", action("brokers"))
        assert queue.put("topics", action("topics"))
        assert not queue.put("brokers", action("brokers again"))  # coalesced: pending already
        assert len(queue) == 2
        name, run = await queue.get()
        await run()
        # Taken (it may have read the state before this change): the same key queues again.
        assert queue.put("brokers", action("brokers after"))
        while len(queue):
            name, run = await queue.get()
            await run()
        assert ran == ["brokers", "topics", "brokers after"]

    asyncio.run(scenario())


def test_get_waits_for_an_event():
    from odradek.controller.events import EventQueue

    async def scenario() -> None:
        queue = EventQueue()

        async def nothing() -> None:
            pass

        getting = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0.01)
        assert not getting.done()
        asyncio.get_running_loop().call_soon(queue.put, "refresh", nothing)
        async with asyncio.timeout(GET_TIMEOUT_S):
            name, _ = await getting
        assert name == "refresh"

    asyncio.run(scenario())
