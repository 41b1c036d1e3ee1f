"""No port is chosen for a local cluster's member to bind later: a squatter that takes every port
named on a member's command line just before it starts changes nothing (controllers and brokers
bind port 0 themselves and report it), every broker's Metadata advertises the ports its process
reported, a restarted broker keeps them, and ZooKeeper, which must be given a port, starts again
on a fresh one when its first was taken."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket

import pytest

from odradek.client.connection import BrokerConnection
from odradek.listeners import read_listeners_file
from odradek.local import cluster, zookeeper
from odradek.local.cluster import LISTENERS_FILE, ClusterState
from odradek.local.zookeeper import ZooKeeperProcess, four_letter_word, listens
from odradek.protocol import schemas
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
SQUATTED_MAX = 64  # sockets the squatter may hold
PORT_IN_ARG = re.compile(r"(?:^|[=,/])(?:[A-Z_]+://)?[\w.-]*:(\d{2,5})(?=$|,)")


def _metadata_brokers(address: str) -> dict[int, str]:
    async def ask() -> dict[int, str]:
        host, port = address.rsplit(":", 1)
        async with await BrokerConnection.open(host, int(port), connect_timeout_s=2) as conn:
            response = await conn.send(schemas.request_schema(3, 1)(topics=()), timeout_s=5)
        return {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}

    return asyncio.run(ask())


class Squatter:
    """Another program on the machine: it listens on each port a member's command line names,
    at the moment between the launcher writing that command line and the member binding."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.ports: list[int] = []
        self.active = True

    def take(self, argv: list[str]) -> None:
        for arg in argv if self.active else ():
            for match in PORT_IN_ARG.finditer(arg):
                port = int(match[1])
                if port == 0 or port in self.ports or len(self.sockets) >= SQUATTED_MAX:
                    continue
                sock = socket.socket()
                try:
                    sock.bind(("127.0.0.1", port))
                    sock.listen()
                except OSError:  # ZooKeeper's, already bound by it
                    sock.close()
                    continue
                self.sockets.append(sock)
                self.ports.append(port)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def test_members_bind_their_own_ports_and_advertise_them(tmp_path, monkeypatch, local_cluster):
    squatter = Squatter()
    spawn = cluster._spawn

    def squat_then_spawn(args, log_path, netns=None):
        squatter.take(args)
        return spawn(args, log_path, netns)

    monkeypatch.setattr(cluster, "_spawn", squat_then_spawn)
    data_dir = tmp_path / "cluster"
    try:
        with local_cluster(data_dir, brokers=2) as state:
            # what a launcher choosing ports would have given, and lost to the squatter
            assert squatter.ports == [], squatter.ports
            recorded = ClusterState.read(data_dir)
            assert recorded is not None
            brokers = {m.id: m for m in recorded.members if m.role == "broker"}
            for member in brokers.values():
                listeners, admin = read_listeners_file(f"{member.data_dir}/{LISTENERS_FILE}")
                assert (member.address, member.control_plane, member.admin) == (
                    listeners["PLAINTEXT"],
                    listeners["CONTROL_PLANE"],
                    admin,
                )
                assert not member.address.endswith(":0")
            expected = {b: m.address for b, m in brokers.items()}
            for member in brokers.values():
                assert _metadata_brokers(member.address) == expected
            assert state.bootstrap_servers == ",".join(expected.values())

            # a broker keeps its ports across a restart (clients know its address): a squatter
            # taking them while it is down would stop it, as it would stop a Kafka broker
            squatter.active = False
            cluster.kill(brokers[2])
            wait_until(lambda: not brokers[2].is_ours(), "broker 2 gone", WAIT_S)
            restarted = cluster.restart_broker(data_dir, 2)
            assert restarted.address == brokers[2].address  # the same address after a restart
            assert _metadata_brokers(brokers[1].address) == expected
    finally:
        squatter.close()


def test_zookeeper_starts_again_on_a_fresh_port_when_its_port_was_taken(tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    choices = iter([taken_port])
    pick = zookeeper.free_loopback_port
    monkeypatch.setattr(zookeeper, "free_loopback_port", lambda: next(choices, None) or pick())
    server = ZooKeeperProcess(tmp_path / "zk")
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(taken.close)
            stack.enter_context(server)
            assert server.port != taken_port
            assert listens(server.pid, server.port)
            assert "Zookeeper version" in four_letter_word(server.port)
    finally:
        server.stop()
