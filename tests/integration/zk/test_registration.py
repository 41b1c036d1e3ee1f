"""Proves broker registration: an ephemeral /brokers/ids/<id> that follows sessions, one per id."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.protocol.connection import _SESSION_EXPIRED

from odradek.zk.errors import BrokerIdInUseError
from odradek.zk.paths import BROKER_IDS_PATH, BrokerInfo, Endpoint, broker_path
from odradek.zk.registration import BrokerRegistrar
from support.waiting import wait_until_async

pytestmark = pytest.mark.integration

INFO = BrokerInfo(
    endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("INTERNAL", "127.0.0.1", 9093)),
    rack="rack-a",
)
NOW_MS = 1_700_000_000_000
HOLDER = Path(__file__).with_name("hold_registration.py")
HOLDER_READY_S = 20.0
POLL_S = 0.02


def _registered_in_a_new_session(registrar: BrokerRegistrar, old_session: int | None):
    return lambda: registrar.zk.session_id not in (None, old_session) and registrar.registered


def test_registration_creates_the_ephemeral_node_with_kafkas_json(make_client) -> None:
    """The node is ephemeral, owned by the broker's session, and holds Kafka's v5 JSON."""
    zk = make_client()
    zk.ensure_paths()

    async def scenario() -> None:
        registrar = BrokerRegistrar(zk, 7, INFO, wall_clock_ms=lambda: NOW_MS)
        await registrar.register()
        assert registrar.registered

    asyncio.run(scenario())
    data, stat = zk.get(broker_path(7))
    assert stat.ephemeralOwner == zk.session_id
    assert json.loads(data) == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://127.0.0.1:9093"],
        "rack": "rack-a",
        "jmx_port": -1,
        "features": {},
        "host": "127.0.0.1",
        "port": 9092,
        "timestamp": str(NOW_MS),
        "version": 5,
    }
    assert zk.children(BROKER_IDS_PATH) == ["7"]


def test_the_node_disappears_when_the_client_closes(make_client) -> None:
    """Closing the broker's client ends its session, and its registration with it."""
    broker, observer = make_client(), make_client()
    asyncio.run(BrokerRegistrar(broker, 1, INFO).register())
    assert observer.exists(broker_path(1)) is not None
    broker.close()
    assert observer.exists(broker_path(1)) is None


def test_the_node_is_created_again_after_a_forced_session_expiry(
    make_client, expire_session
) -> None:
    """After the server expires the session, the registrar registers in the NEW session."""
    zk = make_client()

    async def scenario() -> None:
        registrar = BrokerRegistrar(zk, 2, INFO)
        await registrar.register()
        old_session = zk.session_id
        await asyncio.to_thread(expire_session, zk)
        await wait_until_async(
            _registered_in_a_new_session(registrar, old_session),
            "registered in a new session",
            5.0,
            poll_s=POLL_S,
        )
        stat = await zk.aexists(broker_path(2))
        assert stat is not None and stat.ephemeralOwner == zk.session_id
        await registrar.deregister()
        assert await zk.aexists(broker_path(2)) is None
        # Deregistered means no longer following sessions either.
        second_old_session = zk.session_id
        await asyncio.to_thread(expire_session, zk)
        await wait_until_async(
            lambda: zk.session_id not in (None, second_old_session),
            "new session",
            5.0,
            poll_s=POLL_S,
        )
        await asyncio.sleep(0.3)
        assert await zk.aexists(broker_path(2)) is None

    asyncio.run(scenario())


def test_the_broker_epoch_is_the_nodes_czxid_and_grows_with_each_registration(
    make_client, expire_session
) -> None:
    """Kafka's broker epoch: the registration's czxid, learned again after a new session."""
    zk = make_client()
    heard: list[int] = []

    async def scenario() -> None:
        registrar = BrokerRegistrar(zk, 6, INFO, on_registered=heard.append)
        await registrar.register()
        first = (await zk.aexists(broker_path(6))).czxid
        assert registrar.broker_epoch == first and heard == [first]
        old_session = zk.session_id
        await asyncio.to_thread(expire_session, zk)
        await wait_until_async(
            _registered_in_a_new_session(registrar, old_session),
            "registered in a new session",
            5.0,
            poll_s=POLL_S,
        )
        second = (await zk.aexists(broker_path(6))).czxid
        assert second > first
        assert registrar.broker_epoch == second and heard == [first, second]
        await registrar.deregister()

    asyncio.run(scenario())


def test_reregistration_waits_for_the_old_sessions_node_to_expire(make_client) -> None:
    """When kazoo gives up a session the server still holds, the registrar waits it out."""
    zk = make_client()

    async def scenario() -> None:
        registrar = BrokerRegistrar(zk, 3, INFO)
        await registrar.register()
        old_session = zk.session_id
        # kazoo's own test hook: the client believes its session expired and starts a new one,
        # while the server keeps the old session (and its node) until the session timeout.
        zk._kazoo._call(_SESSION_EXPIRED, None)
        await wait_until_async(
            _registered_in_a_new_session(registrar, old_session),
            "registered in a new session",
            zk.session_timeout_s * 3,
            poll_s=POLL_S,
        )
        stat = await zk.aexists(broker_path(3))
        assert stat is not None and stat.ephemeralOwner == zk.session_id

    asyncio.run(scenario())


def test_a_second_broker_with_the_same_id_is_refused(make_client) -> None:
    """NODE_EXISTS from another live session, still there after the wait, is BrokerIdInUseError."""
    first, second = make_client(), make_client()

    async def scenario() -> None:
        await BrokerRegistrar(first, 4, INFO).register()
        duplicate = BrokerRegistrar(second, 4, INFO, conflict_wait_s=0.5)
        started = time.monotonic()
        with pytest.raises(BrokerIdInUseError) as refused:
            await duplicate.register()
        assert 0.5 <= time.monotonic() - started < 3.0
        assert refused.value.path == broker_path(4)
        assert not duplicate.registered

    asyncio.run(scenario())
    stat = first.exists(broker_path(4))
    assert stat is not None and stat.ephemeralOwner == first.session_id


def test_a_restarted_broker_takes_its_id_back_from_its_killed_predecessor(
    make_client, hosts: str
) -> None:
    """A broker killed with SIGKILL keeps its node for one session timeout; its successor waits."""
    zk = make_client()
    holder = subprocess.Popen(
        [sys.executable, str(HOLDER), hosts, "5", str(zk.session_timeout_s)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        readable, _, _ = select.select([holder.stdout], [], [], HOLDER_READY_S)
        assert readable, "the holder did not register in time"
        assert holder.stdout.readline().strip() == "registered"
        old_owner = zk.exists(broker_path(5)).ephemeralOwner
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=HOLDER_READY_S)

        async def scenario() -> None:
            started = time.monotonic()
            await BrokerRegistrar(zk, 5, INFO).register()
            assert time.monotonic() - started < zk.session_timeout_s * 2

        asyncio.run(scenario())
        stat = zk.exists(broker_path(5))
        assert stat.ephemeralOwner == zk.session_id != old_owner
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=HOLDER_READY_S)
