"""Each listener's Metadata names that listener's addresses; brokers register every listener.

Real processes on 127.0.0.1: ZooKeeper (the module's), a controller and two brokers, each broker
with three listeners (PLAINTEXT and EXTERNAL for clients, CONTROL_PLANE for the controller), all
on port 0: each process binds its own ports and reports them (``odradek.listeners.file``), and
what it registers and what Metadata names are the ports it reported. A broker whose listeners
lack the control plane refuses to start and says what to set.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.listeners import read_listeners_file
from odradek.protocol import schemas
from support.consuming import poll_records
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
STOP_S = 20.0
LISTENERS = ("PLAINTEXT", "EXTERNAL", "CONTROL_PLANE")
PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROL_PLANE:PLAINTEXT"


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "odradek.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after a grace period; by this process's own PID."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_S)


def _metadata(port: int) -> list[tuple[int, str, int]] | None:
    async def ask():
        async with await BrokerConnection.open("127.0.0.1", port, connect_timeout_s=2) as conn:
            response = await conn.send(schemas.request_schema(3, 1)(topics=()), timeout_s=5)
            return sorted((b.node_id, b.host, b.port) for b in response.brokers)

    try:
        return asyncio.run(ask())
    except (ClientError, OSError):
        return None


@pytest.fixture
def cluster(hosts: str, tmp_path: Path) -> Iterator[dict[int, dict[str, int]]]:
    """Broker id -> listener name -> port (as each broker reported it), once both brokers know
    each other."""
    processes = []
    reports = {b: tmp_path / f"broker-{b}.listeners.json" for b in (1, 2)}
    try:
        processes.append(
            _spawn(
                [
                    "controller",
                    "--override",
                    "controller.id=1000",
                    "--override",
                    f"zookeeper.connect={hosts}",
                    "--override",
                    "odradek.admin.listener=",
                    "--override",
                    "listeners=CONTROLLER://127.0.0.1:0",
                ],
                tmp_path / "controller.log",
            )
        )
        for broker_id, report in reports.items():
            listeners = ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS)
            processes.append(
                _spawn(
                    [
                        "broker",
                        "--override",
                        f"broker.id={broker_id}",
                        "--override",
                        f"zookeeper.connect={hosts}",
                        "--override",
                        f"listeners={listeners}",
                        "--override",
                        f"listener.security.protocol.map={PROTOCOL_MAP}",
                        "--override",
                        f"log.dirs={tmp_path / f'broker-{broker_id}'}",
                        "--override",
                        "odradek.admin.listener=",
                        "--override",
                        f"odradek.listeners.file={report}",
                    ],
                    tmp_path / f"broker-{broker_id}.log",
                )
            )

        def reported(report: Path):
            alive = all(p.poll() is None for p in processes)
            return alive and read_listeners_file(report)

        bound = {
            b: wait_until(lambda r=r: reported(r), f"broker {b}'s ports", WAIT_S)
            for b, r in reports.items()
        }
        ports = {
            b: {name: int(address.rsplit(":", 1)[1]) for name, address in listeners.items()}
            for b, (listeners, _admin) in bound.items()
        }
        assert all(0 not in mine.values() for mine in ports.values()), ports
        wait_until(
            lambda: (
                all(p.poll() is None for p in processes)
                and len(_metadata(ports[1]["PLAINTEXT"]) or ()) == 2
                and len(_metadata(ports[2]["PLAINTEXT"]) or ()) == 2
            ),
            "both brokers in both brokers' metadata",
            WAIT_S,
        )
        yield ports
    finally:
        for process in reversed(processes):
            _stop(process)


def test_metadata_lists_each_brokers_address_on_the_listener_asked(cluster, hosts):
    ports = cluster
    for listener in ("PLAINTEXT", "EXTERNAL"):
        expected = [(b, "127.0.0.1", ports[b][listener]) for b in (1, 2)]
        for asked in (1, 2):
            assert _metadata(ports[asked][listener]) == expected, (listener, asked)


def test_the_registration_lists_every_advertised_listener(cluster, hosts):
    ports = cluster
    zk = KazooClient(hosts)
    zk.start(timeout=10)
    try:
        registration = json.loads(zk.get("/brokers/ids/1")[0])
    finally:
        zk.stop()
        zk.close()
    assert registration["endpoints"] == [
        f"{name}://127.0.0.1:{ports[1][name]}" for name in LISTENERS
    ]
    assert registration["listener_security_protocol_map"] == dict.fromkeys(LISTENERS, "PLAINTEXT")
    assert (registration["host"], registration["port"]) == ("127.0.0.1", ports[1]["PLAINTEXT"])


def test_a_client_bootstrapped_on_a_listener_stays_on_it(cluster):
    ports = cluster
    external = ",".join(f"127.0.0.1:{ports[b]['EXTERNAL']}" for b in (1, 2))
    admin = KafkaAdminClient(bootstrap_servers=external, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("outside", 4, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=external, acks="all", enable_idempotence=False)
    sent = [b"v%d" % i for i in range(40)]
    for value in sent:
        producer.send("outside", value=value)
    producer.flush(timeout=30)
    producer.close(timeout=5)
    # Every broker the client learnt of is an EXTERNAL address.
    assert {f"127.0.0.1:{ports[b]['EXTERNAL']}" for b in (1, 2)} >= {
        f"{node.host}:{node.port}" for node in producer._metadata.brokers()
    }
    consumer = KafkaConsumer(bootstrap_servers=external, enable_auto_commit=False)
    consumer.assign([TopicPartition("outside", p) for p in range(4)])
    consumer.seek_to_beginning()
    received = [r.value for r in poll_records(consumer, len(sent), WAIT_S)]
    consumer.close()
    assert sorted(received) == sorted(sent)


def test_a_broker_without_a_control_plane_listener_refuses_to_start(tmp_path):
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek.cli",
            "broker",
            "--override",
            "broker.id=1",
            "--override",
            "zookeeper.connect=127.0.0.1:1",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "control.plane.listener.name is CONTROL_PLANE, but listeners has no" in finished.stdout
    assert "listeners=PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:9091" in finished.stdout
