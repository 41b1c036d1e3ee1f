"""Debian's kcat (librdkafka 2.0.2) lists, produces to and consumes from a 3-broker cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FORMAT = "%p|%o|%k|%s|%h\\n"  # partition|offset|key|value|headers (n=v CSV)


@pytest.fixture(scope="module")
def kcat_path():
    path = shutil.which("kcat")
    assert path, "scripts/setup.sh installs kcat"
    return path


@pytest.fixture
def kcat(kcat_path, bootstrap):
    """``kcat(*args, input=None)`` -> stdout; fails the test on a non-zero exit or an ERROR."""

    def run(*args: str, input: str | None = None) -> str:
        done = subprocess.run(
            [kcat_path, "-b", bootstrap, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
        assert "ERROR" not in done.stderr, done.stderr
        return done.stdout

    return run


@pytest.fixture
def create_topic(bootstrap, wait_for_topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(name: str, partitions: int) -> None:
        [future] = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)],
            operation_timeout=10,
        ).values()
        future.result(TIMEOUT_S)
        wait_for_topic(name, partitions)

    return create


def parse(output: str) -> list[tuple[int, int, str, str, str]]:
    rows = []
    for line in output.splitlines():
        partition, offset, key, value, headers = line.split("|")
        rows.append((int(partition), int(offset), key, value, headers))
    return rows


def test_list_brokers_and_topics(kcat, cluster_state, create_topic, topic_name):
    topic = topic_name()
    create_topic(topic, 5)
    listing = kcat("-L")
    assert "3 brokers:" in listing
    for member in cluster_state.members:
        if member.role == "broker":
            assert f"broker {member.id} at {member.address}" in listing
    assert f'topic "{topic}" with 5 partitions:' in listing

    metadata = json.loads(kcat("-L", "-J", "-t", topic))
    assert sorted(b["id"] for b in metadata["brokers"]) == [1, 2, 3]
    [described] = metadata["topics"]
    assert described["topic"] == topic
    assert [p["partition"] for p in described["partitions"]] == list(range(5))
    assert {p["leader"] for p in described["partitions"]} <= {1, 2, 3}
    # Placement spreads leaders over the brokers.
    assert len({p["leader"] for p in described["partitions"]}) == 3


@pytest.mark.parametrize("codec", CODECS)
def test_produce_keys_headers_and_nulls_then_consume(kcat, create_topic, topic_name, codec):
    topic = topic_name()
    create_topic(topic, 3)
    lines = []
    for i in range(200):
        value = "" if i % 7 == 3 else f"value-{i}"  # -Z: an empty value is sent as NULL
        lines.append(f"key-{i:04d}:{value}\n")
    kcat("-P", "-t", topic, "-K:", "-Z", "-z", codec, "-H", "source=kcat", input="".join(lines))

    rows = parse(kcat("-C", "-t", topic, "-o", "beginning", "-e", "-Z", "-f", FORMAT))
    assert len(rows) == 200
    expected = {
        f"key-{i:04d}": "NULL" if i % 7 == 3 else f"value-{i}" for i in range(200)
    }  # -Z prints a NULL value as NULL
    assert {key: value for _, _, key, value, _ in rows} == expected
    assert {headers for *_, headers in rows} == {"source=kcat"}
    per_partition = {}
    for partition, offset, key, _, _ in rows:
        per_partition.setdefault(partition, []).append((offset, key))
    assert set(per_partition) == {0, 1, 2}
    for entries in per_partition.values():
        assert [o for o, _ in entries] == list(range(len(entries)))
        keys = [k for _, k in entries]
        assert keys == sorted(keys)  # stdin order kept within a partition


def test_many_partitions(kcat, create_topic, topic_name):
    topic = topic_name()
    create_topic(topic, 24)
    lines = "".join(f"k{i:05d}:v{i}\n" for i in range(24 * 20))
    kcat("-P", "-t", topic, "-K:", "-z", "lz4", input=lines)
    rows = parse(kcat("-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT))
    assert sorted((k, v) for _, _, k, v, _ in rows) == sorted(
        (f"k{i:05d}", f"v{i}") for i in range(24 * 20)
    )
    per_partition = {}
    for partition, offset, key, _, _ in rows:
        per_partition.setdefault(partition, []).append((offset, key))
    assert set(per_partition) == set(range(24))
    for entries in per_partition.values():
        assert [o for o, _ in entries] == list(range(len(entries)))
        assert [k for _, k in entries] == sorted(k for _, k in entries)

    # One partition on its own, from an offset in the middle.
    partition, entries = max(per_partition.items(), key=lambda item: len(item[1]))
    tail = parse(kcat("-C", "-t", topic, "-p", str(partition), "-o", "2", "-e", "-f", FORMAT))
    assert [(o, k) for _, o, k, _, _ in tail] == entries[2:]


def test_offsets_by_time(kcat, bootstrap, create_topic, topic_name):
    topic = topic_name()
    create_topic(topic, 1)
    base = int(time.time() * 1000) - 600_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=base + i * 1000)
    assert producer.flush(TIMEOUT_S) == 0

    # -Q: ListOffsets by timestamp.
    answer = kcat("-Q", "-t", f"{topic}:0:{base + 4500}")
    assert f"{topic} [0] offset 5" in answer, answer
    # -o s@<ms>: consume from the first record at or after a time, -o e@<ms>: stop before one.
    rows = parse(
        kcat(
            "-C",
            "-t",
            topic,
            "-o",
            f"s@{base + 2500}",
            "-o",
            f"e@{base + 6500}",
            "-f",
            FORMAT,
        )
    )
    assert [(o, v) for _, o, _, v, _ in rows] == [(o, f"v{o}") for o in range(3, 7)]
    # -o beginning / end / negative: earliest, latest, relative to latest.
    last = parse(kcat("-C", "-t", topic, "-o", "-2", "-e", "-f", FORMAT))
    assert [o for _, o, *_ in last] == [8, 9]
    assert kcat("-C", "-t", topic, "-o", "end", "-e", "-f", FORMAT) == ""
