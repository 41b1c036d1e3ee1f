"""Leader balance on real three-broker clusters: a restarted broker's leaderships stay away until
confluent-kafka's ``elect_leaders`` (ElectLeaders, forwarded to the controller), ``odradek
leaders elect``, or the controller's automatic rebalance brings them back; the answers carry
Kafka's per-partition errors, and the controller's imbalance gauge follows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek.client.connection import BrokerConnection
from odradek.cluster.elect_leaders import outcomes_of, request_of
from odradek.cluster.election import ElectionType as WireElectionType
from odradek.errors import ErrorCode
from odradek.local import cluster
from support.waiting import wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 45.0  # restarts, catch-up and elections on a loaded machine
POLL_S = 0.2
COMMAND_TIMEOUT_S = 60
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
}
NO_AUTO_REBALANCE = {"auto.leader.rebalance.enable": "false"}
QUICK_AUTO_REBALANCE = {
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "1",
}


@pytest.fixture(scope="module")
def manual(tmp_path_factory, local_cluster):
    """(data dir, state) of a cluster whose controller never rebalances by itself."""
    data_dir = tmp_path_factory.mktemp("leaders-manual")
    with local_cluster(
        data_dir, brokers=3, broker_overrides=REPLICATED, controller_overrides=NO_AUTO_REBALANCE
    ) as state:
        yield data_dir, state


def _admin(state) -> AdminClient:
    return AdminClient({"bootstrap.servers": state.bootstrap_servers})


def _create(state, topic: str) -> dict[int, tuple[int, ...]]:
    """The topic, created with some acks=all records in each partition; partition -> replicas."""
    admin = _admin(state)
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=WAIT_S)

    def replicas():
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or len(found.partitions) < PARTITIONS:
            return None
        if any(p.leader < 0 or len(p.isrs) < 3 for p in found.partitions.values()):
            return None
        return {p.id: tuple(p.replicas) for p in found.partitions.values()}

    assignment = wait_until(replicas, f"{topic} led, with full ISRs", WAIT_S, poll_s=POLL_S)
    producer = Producer({"bootstrap.servers": state.bootstrap_servers, "acks": "all"})
    for n in range(PARTITIONS * 10):
        producer.produce(topic, f"record {n}".encode(), partition=n % PARTITIONS)
    assert producer.flush(WAIT_S) == 0
    return assignment


def _states(state, topic: str) -> dict[int, cluster.PartitionState]:
    return {p: cluster.partition_state(state, topic, p) for p in range(PARTITIONS)}


def _bounce(data_dir: Path, state, topic: str, broker_id: int) -> None:
    """Stop ``broker_id`` until it leads nothing, start it again, wait until it is back in every
    ISR: its preferred partitions are then led by others, and could move back."""
    cluster.stop_broker(data_dir, broker_id)
    wait_until(
        lambda: all(s.leader not in (-1, broker_id) for s in _states(state, topic).values()),
        f"leadership moved off broker {broker_id}",
        WAIT_S,
        poll_s=POLL_S,
    )
    cluster.restart_broker(data_dir, broker_id)
    wait_until(
        lambda: all(broker_id in s.isr for s in _states(state, topic).values()),
        f"broker {broker_id} back in every ISR",
        WAIT_S,
        poll_s=POLL_S,
    )


def _led_elsewhere(state, topic: str, assignment, broker_id: int) -> list[int]:
    states = _states(state, topic)
    return [p for p, r in assignment.items() if r[0] == broker_id and states[p].leader != r[0]]


def _all_preferred(state, topic: str, assignment) -> bool:
    return all(s.leader == assignment[p][0] for p, s in _states(state, topic).items())


def test_confluent_kafka_elect_leaders_brings_preferred_leaders_back(manual):
    data_dir, state = manual
    topic = "elect-preferred"
    assignment = _create(state, topic)
    preferred_by_1 = sorted(p for p, r in assignment.items() if r[0] == 1)
    assert preferred_by_1, assignment
    _bounce(data_dir, state, topic, 1)
    assert _led_elsewhere(state, topic, assignment, 1) == preferred_by_1
    admin = _admin(state)

    results = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=WAIT_S)

    # Every partition: only those that needed an election are listed, each elected.
    assert {(tp.topic, tp.partition): error for tp, error in results.items()} == {
        (topic, p): None for p in preferred_by_1
    }
    assert _all_preferred(state, topic, assignment)
    # The broker answered once its metadata showed the new leaders.
    described = admin.list_topics(topic, timeout=10).topics[topic].partitions
    assert {p: m.leader for p, m in described.items()} == {p: r[0] for p, r in assignment.items()}

    asked = [TopicPartition(topic, p) for p in (0, 1)] + [TopicPartition(topic, 99)]
    again = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=WAIT_S)
    codes = {tp.partition: error.code() for tp, error in again.items()}
    assert codes == {
        0: KafkaError.ELECTION_NOT_NEEDED,
        1: KafkaError.ELECTION_NOT_NEEDED,
        99: KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


def test_a_preferred_replica_out_of_the_isr_is_not_available_and_unclean_is_not_needed(manual):
    data_dir, state = manual
    topic = "elect-unavailable"
    assignment = _create(state, topic)
    victim = assignment[0][0]
    cluster.stop_broker(data_dir, victim)
    try:
        wait_until(
            lambda: all(s.leader not in (-1, victim) for s in _states(state, topic).values()),
            f"leadership moved off broker {victim}",
            WAIT_S,
            poll_s=POLL_S,
        )
        admin = _admin(state)
        results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(
            timeout=WAIT_S
        )
        [error] = results.values()
        assert error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
        results = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)]).result(
            timeout=WAIT_S
        )
        [error] = results.values()
        assert error.code() == KafkaError.ELECTION_NOT_NEEDED  # a live leader has it
    finally:
        cluster.restart_broker(data_dir, victim)
        wait_until(
            lambda: all(victim in s.isr for s in _states(state, topic).values()),
            f"broker {victim} back in every ISR",
            WAIT_S,
            poll_s=POLL_S,
        )


def test_elect_leaders_v0_sent_to_any_broker_is_forwarded_and_answered_in_v0(manual):
    data_dir, state = manual
    topic = "elect-v0"
    assignment = _create(state, topic)
    _bounce(data_dir, state, topic, 2)
    preferred_by_2 = _led_elsewhere(state, topic, assignment, 2)
    assert preferred_by_2
    broker_3 = state.member("broker", 3)  # not the one Metadata names as controller
    host, port = broker_3.address.rsplit(":", 1)

    async def ask():
        request = request_of(
            0, WireElectionType.PREFERRED, [(topic, p) for p in preferred_by_2], 30_000
        )
        async with await BrokerConnection.open(host, int(port)) as connection:
            return await connection.send(request, timeout_s=WAIT_S)

    response = asyncio.run(ask())
    assert not hasattr(response, "error_code")
    assert {tp: o.error for tp, o in outcomes_of(response).items()} == {
        (topic, p): ErrorCode.none for p in preferred_by_2
    }
    assert _all_preferred(state, topic, assignment)


def _odradek(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_odradek_leaders_elect_prints_each_partition_and_fails_on_errors(manual, tmp_path):
    data_dir, state = manual
    topic = "elect-cli"
    assignment = _create(state, topic)
    _bounce(data_dir, state, topic, 3)
    moved = _led_elsewhere(state, topic, assignment, 3)
    assert moved
    bootstrap = ("--bootstrap-server", state.bootstrap_servers)

    done = _odradek(
        tmp_path, "leaders", "elect", *bootstrap, "--election-type", "preferred", "--topic", topic
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = ", ".join(f"{topic}-{p}" for p in moved)
    assert f"Successfully completed leader election (PREFERRED) for partitions {names}" in (
        done.stdout
    )
    assert "Valid replica already elected for partitions" in done.stdout
    assert _all_preferred(state, topic, assignment)

    plan = tmp_path / "election.json"
    plan.write_text(
        json.dumps(
            {"partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 42}]}
        )
    )
    failed = _odradek(
        tmp_path,
        "leaders",
        "elect",
        *bootstrap,
        "--election-type",
        "PREFERRED",
        "--path-to-json-file",
        str(plan),
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"Valid replica already elected for partitions {topic}-0" in failed.stdout
    assert f"for partition: {topic}-42:" in failed.stdout
    assert "UNKNOWN_TOPIC_OR_PART" in failed.stdout
    assert "1 replica(s) could not be elected" in failed.stderr
    assert "Traceback" not in failed.stderr

    usage = _odradek(
        tmp_path, "leaders", "elect", *bootstrap, "--election-type", "unclean", "--partition", "0"
    )
    assert usage.returncode != 0 and "Traceback" not in usage.stderr


def _imbalance_gauge(state) -> float:
    controller = next(m for m in state.members if m.role == "controller")
    with urllib.request.urlopen(f"http://{controller.admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_controller_preferred_replica_imbalance":
            return family.samples[0].value
    raise AssertionError("no odradek_controller_preferred_replica_imbalance gauge")


def test_the_controller_moves_leadership_back_by_itself(tmp_path_factory, local_cluster):
    data_dir = tmp_path_factory.mktemp("leaders-auto")
    with local_cluster(
        data_dir, brokers=3, broker_overrides=REPLICATED, controller_overrides=QUICK_AUTO_REBALANCE
    ) as state:
        topic = "auto-rebalance"
        assignment = _create(state, topic)
        preferred_by_1 = [p for p, r in assignment.items() if r[0] == 1]
        assert _imbalance_gauge(state) == 0
        cluster.stop_broker(data_dir, 1)
        wait_until(
            lambda: _led_elsewhere(state, topic, assignment, 1) == preferred_by_1,
            "leadership moved off broker 1",
            WAIT_S,
            poll_s=POLL_S,
        )
        # Down, its partitions cannot come back: the imbalance is counted and stays.
        wait_until(
            lambda: _imbalance_gauge(state) == len(preferred_by_1),
            "the imbalance gauge",
            WAIT_S,
            poll_s=POLL_S,
        )
        time.sleep(3)  # three checks
        assert _led_elsewhere(state, topic, assignment, 1) == preferred_by_1
        cluster.restart_broker(data_dir, 1)
        wait_until(
            lambda: _all_preferred(state, topic, assignment),
            "preferred leaders back",
            WAIT_S,
            poll_s=POLL_S,
        )
        wait_until(
            lambda: _imbalance_gauge(state) == 0,
            "the imbalance gauge back to 0",
            WAIT_S,
            poll_s=POLL_S,
        )
