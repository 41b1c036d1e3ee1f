"""Proves ZkClient on a real ZooKeeper: typed errors, session events, watches, bounded waits."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from kazoo import exceptions as kazoo_errors

from odradek.local.zookeeper import ZooKeeperProcess, free_loopback_port
from odradek.zk.client import (
    CheckOp,
    CreateOp,
    SessionEvent,
    SetDataOp,
    WatchKind,
    ZkClient,
    ZkState,
)
from odradek.zk.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZkConnectionError,
    ZkTimeoutError,
)
from odradek.zk.paths import PERSISTENT_PATHS

pytestmark = pytest.mark.integration

# A call against a stopped ZooKeeper must fail within its timeout plus this much scheduling slack.
TIMEOUT_SLACK_S = 1.0


def test_start_creates_the_chroot_and_ensure_paths_creates_kafkas_layout(make_client) -> None:
    """start() creates the chroot; ensure_paths() creates every persistent top-level path."""
    zk = make_client()
    assert zk.state is ZkState.CONNECTED and zk.session_id is not None
    zk.ensure_paths()
    zk.ensure_paths()  # idempotent
    for path in PERSISTENT_PATHS:
        assert zk.exists(path) is not None, path
    assert sorted(zk.children("/brokers")) == ["ids", "seqid", "topics"]


def test_errors_are_typed_and_chain_kazoos(make_client) -> None:
    """Each kazoo failure surfaces as its ZkError subclass, with the path and the cause."""
    zk = make_client()
    zk.create("/a/b", b"1", make_parents=True)
    with pytest.raises(NodeExistsError) as exists:
        zk.create("/a/b", b"2")
    assert exists.value.path == "/a/b"
    assert isinstance(exists.value.__cause__, kazoo_errors.NodeExistsError)
    with pytest.raises(NoNodeError):
        zk.get("/missing")
    with pytest.raises(NoNodeError):
        zk.create("/no/parent", b"")
    with pytest.raises(BadVersionError):
        zk.set("/a/b", b"3", version=7)
    with pytest.raises(NotEmptyError):
        zk.delete("/a")
    assert zk.set("/a/b", b"3", version=0).version == 1
    assert zk.get("/a/b")[0] == b"3"


def test_transaction_applies_all_or_nothing(make_client) -> None:
    """A multi whose second op fails leaves no trace of the first, and names the failing path."""
    zk = make_client()
    zk.create("/epoch", b"1")
    with pytest.raises(BadVersionError) as failed:
        zk.transaction([CreateOp("/leader", b"x"), SetDataOp("/epoch", b"2", version=5)])
    assert failed.value.path == "/epoch"
    assert zk.exists("/leader") is None
    results = zk.transaction(
        [CreateOp("/leader", b"x"), CheckOp("/epoch", 0), SetDataOp("/epoch", b"2", version=0)]
    )
    assert results[0] == "/leader" and results[2].version == 1
    created = zk.create("/seq-", b"", sequence=True)
    assert created.startswith("/seq-") and len(created) == len("/seq-") + 10


def test_session_listener_sees_lost_then_a_new_session(make_client, expire_session) -> None:
    """A forced expiry is reported as LOST then NEW_SESSION with another session id."""
    zk = make_client()
    events: list[tuple[SessionEvent, int | None]] = []
    new_session = threading.Event()

    def listener(event: SessionEvent, session_id: int | None) -> None:
        events.append((event, session_id))
        if event is SessionEvent.NEW_SESSION:
            new_session.set()

    zk.add_session_listener(listener)
    zk.create("/eph", b"", ephemeral=True)
    old_session = expire_session(zk)
    assert new_session.wait(5.0), events
    kinds = [event for event, _ in events]
    assert SessionEvent.LOST in kinds
    assert kinds.index(SessionEvent.LOST) < kinds.index(SessionEvent.NEW_SESSION)
    assert events[-1][1] == zk.session_id != old_session
    assert zk.exists("/eph") is None  # the old session's ephemeral went with it


def test_async_calls_and_watches_run_on_the_event_loop(make_client) -> None:
    """aget/acreate complete on the loop and a watch callback is delivered on the loop's thread."""
    zk = make_client()

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        seen: list[tuple[WatchKind, str, int]] = []
        fired = asyncio.Event()

        def on_watch(event) -> None:
            seen.append((event.kind, event.path, threading.get_ident()))
            fired.set()

        assert await zk.aexists("/node", watch=on_watch) is None
        assert await zk.acreate("/node", b"v1") == "/node"
        await asyncio.wait_for(fired.wait(), 5.0)
        assert seen == [(WatchKind.CREATED, "/node", loop_thread)]
        data, stat = await zk.aget("/node")
        assert (data, stat.version) == (b"v1", 0)
        await zk.aset("/node", b"v2", version=0)
        assert await zk.achildren("/") == ["node"]
        await zk.adelete("/node", version=1)
        with pytest.raises(NoNodeError):
            await zk.aget("/node")

    asyncio.run(scenario())


def test_start_times_out_when_nothing_listens() -> None:
    """start() against a closed port raises ZkTimeoutError after connect_timeout_s, not later."""
    zk = ZkClient(f"127.0.0.1:{free_loopback_port()}", connect_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ZkTimeoutError):
        zk.start()
    assert time.monotonic() - started < 1.0 + TIMEOUT_SLACK_S
    zk.close()


def test_calls_time_out_when_zookeeper_is_stopped(tmp_path: Path, wait_until) -> None:
    """With its server stopped, sync and async calls fail within their bound; close() returns."""
    server = ZooKeeperProcess(tmp_path, tick_time_ms=200)
    server.start()
    zk = ZkClient(server.connect_string, session_timeout_s=2.0, request_timeout_s=0.5)
    try:
        server.wait_ready()
        zk.start()
        zk.create("/x", b"1")
        server.stop()

        # Right after the stop, kazoo may not have noticed yet: either error, but quickly.
        started = time.monotonic()
        with pytest.raises((ZkTimeoutError, ZkConnectionError)):
            zk.get("/x")
        assert time.monotonic() - started < 0.5 + TIMEOUT_SLACK_S
        wait_until(lambda: zk.state is ZkState.SUSPENDED, "kazoo sees the server gone", 5.0)

        started = time.monotonic()
        with pytest.raises(ZkTimeoutError):
            zk.get("/x")
        assert time.monotonic() - started < 0.5 + TIMEOUT_SLACK_S

        async def scenario() -> None:
            for call in (zk.aget("/x"), zk.acreate("/y", b""), zk.achildren("/")):
                started = time.monotonic()
                with pytest.raises(ZkTimeoutError):
                    await call
                assert time.monotonic() - started < 0.5 + TIMEOUT_SLACK_S
            started = time.monotonic()
            with pytest.raises(ZkTimeoutError):
                await zk.aexists("/x", timeout_s=0.2)
            assert time.monotonic() - started < 0.2 + TIMEOUT_SLACK_S

        asyncio.run(scenario())
        started = time.monotonic()
        zk.close()
        assert time.monotonic() - started < 5.0
        assert zk.state is ZkState.CLOSED
        with pytest.raises(ZkConnectionError):
            zk.get("/x")
    finally:
        zk.close()
        server.stop()
