"""A broker is ready (``/readyz``) only once the controller has told it the cluster.

Registered in ZooKeeper but without the controller's UpdateMetadata, a broker knows no brokers
and no controller. A client whose first Metadata comes from it has nothing to go on: librdkafka's
admin requests then wait for a controller they never ask about again (CI saw a CreateTopics time
out that way, against a broker a readiness check had passed). So the broker says why it is not
ready until its own metadata lists it, and a client that waited for readiness gets its topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.listeners import read_listeners_file
from odradek.local.cluster import replication_defaults
from odradek.local.zookeeper import LOOPBACK
from support.waiting import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
STOP_WAIT_S = 15.0
NO_METADATA = "no cluster metadata from the controller yet"


def readiness(admin: str) -> tuple[int, list[str]]:
    """(HTTP status, reasons) of ``/readyz``; (0, [error]) while the port does not answer."""
    try:
        with urllib.request.urlopen(f"http://{admin}/readyz", timeout=2) as response:
            return response.status, json.loads(response.read())["reasons"]
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["reasons"]
    except (urllib.error.URLError, OSError) as e:
        return 0, [str(e)]


def start(role: str, overrides: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "odradek.cli", role]
    command += [f"--override={key}={value}" for key, value in overrides.items()]
    with log.open("wb") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(STOP_WAIT_S)


def test_a_broker_is_ready_once_the_controller_told_it_the_cluster(hosts, tmp_path):
    report = tmp_path / "broker.listeners.json"  # port 0 everywhere: the broker binds its own
    processes = [
        start(
            "broker",
            {
                "broker.id": "0",
                "zookeeper.connect": hosts,
                "listeners": f"PLAINTEXT://{LOOPBACK}:0,CONTROL_PLANE://{LOOPBACK}:0",
                "log.dirs": str(tmp_path / "data"),
                "odradek.admin.listener": f"{LOOPBACK}:0",
                "odradek.listeners.file": str(report),
                **replication_defaults(1),
            },
            tmp_path / "broker.log",
        )
    ]
    try:
        listeners, broker_admin = wait_until(
            lambda: processes[0].poll() is None and read_listeners_file(report),
            "the broker's bound ports",
            WAIT_S,
        )
        bootstrap = listeners["PLAINTEXT"]
        status, reasons = wait_until(
            lambda: (
                (answer := readiness(broker_admin))[0] == 503
                and NO_METADATA in answer[1]
                and answer
            ),
            "the registered broker to say it has no metadata yet",
            WAIT_S,
        )
        assert reasons == [NO_METADATA], reasons  # registered: only the controller's word misses

        processes.append(
            start(
                "controller",
                {
                    "controller.id": "1000",
                    "zookeeper.connect": hosts,
                    "listeners": f"CONTROLLER://{LOOPBACK}:0",
                    "odradek.admin.listener": "",
                },
                tmp_path / "controller.log",
            )
        )
        wait_until(lambda: readiness(broker_admin) == (200, []), "the broker to be ready", WAIT_S)

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("after-ready", 1, 1)])["after-ready"].result(timeout=WAIT_S)
        listed = wait_until(
            lambda: "after-ready" in (found := admin.list_topics(timeout=WAIT_S)).topics and found,
            "the new topic in Metadata",
            WAIT_S,
        )
        assert list(listed.brokers) == [0]
    finally:
        for process in reversed(processes):
            stop(process)
