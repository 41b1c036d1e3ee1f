"""Fixtures for the ZooKeeper layer: one real ZooKeeper per test module, a chroot per test.

ZooKeeper runs with a 200 ms tick so sessions may be as short as 0.4 s; the clients here ask for
``SESSION_TIMEOUT_S``. ``expire_session`` expires a client's session on the server the way
ZooKeeper's own tests do: a second client attaches to the same session id and password, then
closes it. The first client is disconnected, finds its session gone, and kazoo connects again
with a NEW session (LOST, then CONNECTED).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from odradek.zk.client import ZkClient
from support import waiting

SESSION_TIMEOUT_S = 2.0
CONNECT_TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.02


@pytest.fixture
def make_client(hosts: str) -> Iterator[Callable[..., ZkClient]]:
    """``make_client(**kwargs)`` -> a started ``ZkClient`` on this test's chroot, closed after."""
    clients: list[ZkClient] = []

    def make(**kwargs) -> ZkClient:
        kwargs.setdefault("session_timeout_s", SESSION_TIMEOUT_S)
        kwargs.setdefault("connect_timeout_s", CONNECT_TIMEOUT_S)
        client = ZkClient(kwargs.pop("hosts", hosts), **kwargs)
        clients.append(client)
        client.start()
        return client

    yield make
    for client in clients:
        client.close()


def expire_session(client: ZkClient, timeout_s: float = CONNECT_TIMEOUT_S) -> int:
    """Expire ``client``'s session on the server; return the expired session id."""
    client_id = client.client_id()
    if client_id is None:
        raise AssertionError("the client is not connected")
    intruder = KazooClient(hosts=client.hosts, client_id=client_id, timeout=SESSION_TIMEOUT_S)
    intruder.start(timeout=timeout_s)
    intruder.stop()  # closes the session on the server: its ephemerals go now
    intruder.close()
    return client_id[0]


@pytest.fixture(name="expire_session")
def expire_session_fixture() -> Callable[..., int]:
    return expire_session


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., object]:
    """``support.waiting.wait_until(condition, what, timeout_s)``, polling every
    ``POLL_INTERVAL_S``: these tests time sessions and takeovers of a second or less."""
    return functools.partial(waiting.wait_until, poll_s=POLL_INTERVAL_S)
