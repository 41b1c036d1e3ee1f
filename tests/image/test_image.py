"""The container image, built by scripts/build_image.sh and run with buildah: every entry point
answers from the image's files as its non-root user, and a one-broker cluster whose controller and
broker run from the image serves a real client (confluent-kafka) that produces and consumes."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import replication_defaults
from odradek.local.zookeeper import LOOPBACK, ZooKeeperProcess, free_loopback_port
from support.buildah import (
    BUILD_TIMEOUT_S,
    Container,
    containers_named,
    image_or_skip,
)
from support.waiting import wait_until

# The first test includes the build: about 3 minutes cold (the debootstrap base, every wheel, the
# dependencies' layer), seconds warm; pytest's 300 s default is too tight for a cold build.
pytestmark = [pytest.mark.image, pytest.mark.timeout(BUILD_TIMEOUT_S + 120)]

IMAGE_UID = 10001
CONTAINER_PREFIX = f"odradek-image-test-{os.getpid()}-"
READY_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0
RECORDS = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(5)]


@pytest.fixture(scope="module")
def image() -> str:
    return image_or_skip()


@pytest.fixture(scope="module")
def containers(image: str) -> Iterator[list[Container]]:
    """Made on demand by the tests (``_container``); all removed at the end, and checked gone."""
    made: list[Container] = []
    yield made
    for container in made:
        container.remove()
    assert containers_named(CONTAINER_PREFIX) == []


def _container(containers: list[Container], image: str, role: str) -> Container:
    container = Container(image, f"{CONTAINER_PREFIX}{role}")
    containers.append(container)
    return container


def test_each_entry_point_answers_help_as_the_non_root_user(
    image: str, containers: list[Container]
) -> None:
    container = _container(containers, image, "help")
    expected = {
        ("odradek", "--help"): "usage: odradek ",
        ("odradek", "broker", "--help"): "usage: odradek broker",
        ("odradek", "controller", "--help"): "usage: odradek controller",
        ("odradek-operator", "--help"): "usage: odradek-operator",
    }
    for argv, usage in expected.items():
        result = container.run(*argv)
        assert result.returncode == 0, (argv, result.stderr)
        assert result.stdout.startswith(usage), (argv, result.stdout)
    # The image's own user, and the C extension compiled into the wheel loads in its Python.
    probe = container.run(
        "python",
        "-c",
        "import os, odradek.storage._recordwalk as w; print(os.getuid(), w.__file__)",
    )
    assert probe.returncode == 0, probe.stderr
    uid, extension = probe.stdout.split()
    assert int(uid) == IMAGE_UID
    assert extension.startswith("/opt/odradek/") and extension.endswith(".so")


def _ready(admin: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{admin}/readyz", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _produce_and_consume(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Create ``topic``, produce RECORDS with acks=all, read them back from offset 0. The
    clients are gone when this returns, before the servers stop."""
    admin_client = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin_client.create_topics([NewTopic(topic, 1, 1)])
    futures[topic].result(timeout=CLIENT_TIMEOUT_S)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in RECORDS:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "image-test", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumed: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(consumed) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            assert error is None or error.code() == KafkaError._PARTITION_EOF, error
            if error is None:
                consumed.append((message.key(), message.value()))
    finally:
        consumer.close()
    return consumed


def test_a_cluster_run_from_the_image_serves_a_real_client(
    image: str, containers: list[Container], tmp_path: Path
) -> None:
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper")
    processes = []
    try:
        zookeeper.start()
        zookeeper.wait_ready()
        connect = f"{zookeeper.connect_string}/odradek"

        controller_admin = f"{LOOPBACK}:{free_loopback_port()}"
        controller = _container(containers, image, "controller").start(
            [
                "odradek",
                "controller",
                "--override=controller.id=1001",
                f"--override=zookeeper.connect={connect}",
                f"--override=listeners=CONTROLLER://{LOOPBACK}:{free_loopback_port()}",
                f"--override=odradek.admin.listener={controller_admin}",
            ],
            tmp_path / "controller.log",
        )
        processes.append(controller)

        # The broker's log dir on a host directory, as a PersistentVolume would be: the image's
        # user must be able to write it (mounted where the chart mounts volume 0).
        data_dir = tmp_path / "data-0"
        data_dir.mkdir()
        os.chown(data_dir, IMAGE_UID, IMAGE_UID)
        broker_admin = f"{LOOPBACK}:{free_loopback_port()}"
        bootstrap = f"{LOOPBACK}:{free_loopback_port()}"
        broker = _container(containers, image, "broker").start(
            [
                "odradek",
                "broker",
                "--override=broker.id=0",
                f"--override=zookeeper.connect={connect}",
                f"--override=listeners=PLAINTEXT://{bootstrap},"
                f"CONTROL_PLANE://{LOOPBACK}:{free_loopback_port()}",
                "--override=log.dirs=/var/lib/odradek/data-0/log",
                f"--override=odradek.admin.listener={broker_admin}",
                *(f"--override={k}={v}" for k, v in replication_defaults(1).items()),
            ],
            tmp_path / "broker.log",
            volumes=[(data_dir, "/var/lib/odradek/data-0")],
        )
        processes.append(broker)

        for name, process, admin in (
            ("controller", controller, controller_admin),
            ("broker", broker, broker_admin),
        ):
            wait_until(
                lambda p=process, a=admin: _ready(a) or not p.running(),
                f"the {name} to be ready",
                READY_TIMEOUT_S,
            )
            assert process.running(), f"the {name} exited:\n{process.log_tail()}"

        topic = "from-the-image"
        assert _produce_and_consume(bootstrap, topic) == RECORDS

        # The records are on the mounted volume, written by the image's user.
        segments = list((data_dir / "log").glob(f"{topic}-0/*.log"))
        assert segments and all(s.stat().st_uid == IMAGE_UID for s in segments)
        assert segments[0].stat().st_size > 0
    finally:
        # Broker first, then the controller: each stops on SIGTERM, by its own PID.
        exit_codes = [process.stop() for process in reversed(processes)]
        zookeeper.stop()
    for process in processes:
        assert process.remaining() == [], f"left running: {process.remaining()}"
    assert exit_codes == [0, 0], "the broker and the controller should shut down cleanly"
