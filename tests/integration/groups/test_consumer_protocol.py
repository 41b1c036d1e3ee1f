"""KIP-848 on the wire against a real broker process: ConsumerGroupHeartbeat and
ConsumerGroupDescribe as a client sends them (join, revoke before assign, leave, bad input),
librdkafka's ``group.protocol=consumer`` members, and a broker where the consumer protocol is
disabled (``group.coordinator.rebalance.protocols=classic``: UNSUPPORTED_VERSION)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.local import cluster as local
from odradek.protocol import schemas
from support.waiting import wait_until

pytestmark = [pytest.mark.integration]

HEARTBEAT, DESCRIBE, FIND_COORDINATOR = 68, 69, 10
TIMEOUT_S = 30.0
PARTITIONS = 4
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_cluster):
    with local_cluster(
        tmp_path_factory.mktemp("kip848"), brokers=1, broker_overrides=OVERRIDES
    ) as state:
        yield state


def address(state) -> tuple[str, int]:
    host, port = state.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


async def _send(where: tuple[str, int], request):
    connection = await BrokerConnection.open(*where)
    try:
        return await connection.send(request, timeout_s=TIMEOUT_S)
    finally:
        await connection.close()


def call(where: tuple[str, int], request):
    return asyncio.run(_send(where, request))


def coordinator_ready(where: tuple[str, int], group: str) -> None:
    def found() -> bool:
        request = schemas.request_schema(FIND_COORDINATOR, 3)(key=group, key_type=0)
        return call(where, request).error_code == ErrorCode.none

    wait_until(found, f"a coordinator for {group}", TIMEOUT_S, poll_s=0.2)


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=TIMEOUT_S)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        return (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    wait_until(led, f"{topic} led", TIMEOUT_S)


def heartbeat(group: str, member_id: str, epoch: int, version: int = 1, **fields):
    request_type = schemas.request_schema(HEARTBEAT, version)
    optional = request_type.__dataclass_fields__["topic_partitions"].type  # tuple[X, ...] | None
    partitions_type = optional.__args__[0].__args__[0]
    owned = fields.pop("owned", None)
    if owned is not None:
        fields["topic_partitions"] = tuple(
            partitions_type(topic_id=t, partitions=tuple(sorted(ps))) for t, ps in owned.items()
        )
    if epoch == 0:
        fields.setdefault("rebalance_timeout", timedelta(seconds=30))
        fields.setdefault("topic_partitions", ())
    fields.setdefault("topic_partitions", None)
    return request_type(group_id=group, member_id=member_id, member_epoch=epoch, **fields)


def assigned(response) -> dict[uuid.UUID, set[int]] | None:
    if response.assignment is None:
        return None
    return {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions}


def describe(where: tuple[str, int], *groups: str):
    request = schemas.request_schema(DESCRIBE, 1)(
        group_ids=groups, include_authorized_operations=False
    )
    return call(where, request).groups


def test_members_join_reconcile_and_leave_on_the_wire(cluster):
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    coordinator_ready(where, group)

    assert served_apis(where)[HEARTBEAT] == (0, 1) and served_apis(where)[DESCRIBE] == (0, 1)
    first = call(where, heartbeat(group, "m1", 0, subscribed_topic_names=(topic,)))
    assert first.error_code == ErrorCode.none, first.error_message
    assert first.member_epoch == 1 and first.heartbeat_interval == timedelta(seconds=1)
    ((topic_id, partitions),) = assigned(first).items()
    assert partitions == set(range(PARTITIONS))

    second = call(where, heartbeat(group, "m2", 0, subscribed_topic_names=(topic,)))
    assert second.error_code == ErrorCode.none and second.member_epoch == 2
    assert assigned(second) == {}  # m1 owns everything until it revokes

    told = call(where, heartbeat(group, "m1", 1))
    keep = assigned(told)[topic_id]
    assert told.member_epoch == 1 and len(keep) == PARTITIONS // 2
    revoked = call(where, heartbeat(group, "m1", 1, owned={topic_id: keep}))
    assert revoked.member_epoch == 2
    given = call(where, heartbeat(group, "m2", 2))
    assert assigned(given)[topic_id] == set(range(PARTITIONS)) - keep

    (described,) = describe(where, group)
    assert described.error_code == ErrorCode.none
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
        "Stable",
        2,
        2,
    )
    assert described.assignor_name == "uniform"
    members = {m.member_id: m for m in described.members}
    assert set(members) == {"m1", "m2"}
    assert members["m1"].client_host == "/127.0.0.1"
    assert members["m1"].assignment.topic_partitions[0].topic_name == topic
    assert set(members["m2"].target_assignment.topic_partitions[0].partitions) == (
        set(range(PARTITIONS)) - keep
    )

    left = call(where, heartbeat(group, "m1", -1))
    assert left.error_code == ErrorCode.none and left.member_epoch == -1
    after = call(where, heartbeat(group, "m2", 2))
    assert after.member_epoch == 3 and assigned(after)[topic_id] == set(range(PARTITIONS))


def test_bad_heartbeats_get_kafkas_error_codes(cluster):
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic, 1)
    coordinator_ready(where, group)

    def error(request) -> ErrorCode:
        return call(where, request).error_code

    join = {"subscribed_topic_names": (topic,)}
    assert error(heartbeat("", "m1", 0, **join)) == ErrorCode.invalid_request
    assert error(heartbeat(group, "", 0, **join)) == ErrorCode.invalid_request
    assert error(heartbeat(group, "m1", 0)) == ErrorCode.invalid_request  # no subscription
    no_timeout = heartbeat(group, "m1", 0, rebalance_timeout=timedelta(milliseconds=-1), **join)
    assert error(no_timeout) == ErrorCode.invalid_request
    assert error(heartbeat(group, "m1", 0, server_assignor="sticky", **join)) == (
        ErrorCode.unsupported_assignor
    )
    assert error(heartbeat(group, "m1", 0, subscribed_topic_regex="(")) == (
        ErrorCode.invalid_regular_expression
    )
    # odradek.group.member.metadata.max.bytes (1 MiB): a subscription beyond it, before any
    # regex is compiled (issue 23).
    many = tuple(f"{i:0100d}" for i in range(11_000))
    assert error(heartbeat(group, "m1", 0, subscribed_topic_names=many)) == (
        ErrorCode.invalid_request
    )
    huge_regex = "a" * (1024 * 1024 + 1)
    assert error(heartbeat(group, "m1", 0, subscribed_topic_regex=huge_regex)) == (
        ErrorCode.invalid_request
    )
    assert error(heartbeat(group, "m1", 3)) == ErrorCode.group_id_not_found
    assert call(where, heartbeat(group, "m1", 0, **join)).member_epoch == 1
    assert error(heartbeat(group, "m1", 7)) == ErrorCode.fenced_member_epoch
    assert error(heartbeat(group, "nobody", 1)) == ErrorCode.unknown_member_id
    (missing, empty) = describe(where, f"nope-{uuid.uuid4().hex[:6]}", "")
    assert missing.error_code == ErrorCode.group_id_not_found
    assert empty.error_code == ErrorCode.invalid_group_id
    assert call(where, heartbeat(group, "m1", 1)).error_code == ErrorCode.none  # still served


def test_version_0_lets_the_coordinator_name_the_member(cluster):
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic, 1)
    coordinator_ready(where, group)
    joined = call(where, heartbeat(group, "", 0, version=0, subscribed_topic_names=(topic,)))
    assert joined.error_code == ErrorCode.none and joined.member_id
    again = call(where, heartbeat(group, joined.member_id, 1, version=0))
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 1)
    request = schemas.request_schema(DESCRIBE, 0)(
        group_ids=(group,), include_authorized_operations=False
    )
    (described,) = call(where, request).groups
    assert [m.member_id for m in described.members] == [joined.member_id]


def served_apis(where: tuple[str, int]) -> dict[int, tuple[int, int]]:
    async def versions():
        connection = await BrokerConnection.open(*where)
        try:
            await connection.negotiate_versions()
            return connection.api_versions
        finally:
            await connection.close()

    return dict(asyncio.run(versions()) or {})


# A KIP-848 member in a process of its own (librdkafka's crash must not take pytest along):
# it journals its rebalance callbacks and the records it consumes as JSON lines.
MEMBER = """
import json, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, out, seconds = sys.argv[1:6]
journal = open(out, "a", buffering=1)
def write(**event):
    journal.write(json.dumps(event) + "\\n")
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
    "group.protocol": "consumer", "enable.auto.commit": False,
    "auto.offset.reset": "earliest"})
consumer.subscribe([topic],
    on_assign=lambda c, ps: write(e="assigned", tp=[[p.topic, p.partition] for p in ps]),
    on_revoke=lambda c, ps: write(e="revoked", tp=[[p.topic, p.partition] for p in ps]),
    on_lost=lambda c, ps: write(e="revoked", tp=[[p.topic, p.partition] for p in ps]))
deadline = time.monotonic() + float(seconds)
while time.monotonic() < deadline:
    for message in consumer.consume(num_messages=100, timeout=0.2):
        if message.error() is None:
            consumer.commit(message=message, asynchronous=False)
            write(e="record", v=message.value().decode())
consumer.close()
write(e="closed")
"""


class Member:
    def __init__(self, state, group: str, topic: str, out: Path, seconds: float = 60):
        self.out = out
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                MEMBER,
                state.bootstrap_servers,
                group,
                topic,
                str(out),
                str(seconds),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def events(self) -> list[dict]:
        if not self.out.exists():
            return []
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def held_pairs(self) -> set[tuple[str, int]]:
        held: set[tuple[str, int]] = set()
        for event in self.events():
            if event["e"] == "assigned":
                held |= {(t, p) for t, p in event["tp"]}
            elif event["e"] == "revoked":
                held -= {(t, p) for t, p in event["tp"]}
        return held

    def held(self) -> set[int]:
        return {p for _, p in self.held_pairs()}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=TIMEOUT_S)


def test_a_librdkafka_member_gets_its_assignment(cluster, tmp_path):
    """librdkafka 2.x's KIP-848 consumer joins and is assigned every partition; once it is
    gone (it leaves, or, without OffsetFetch, dies and its session expires) the group empties."""
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    coordinator_ready(where, group)
    member = Member(cluster, group, topic, tmp_path / "member.jsonl")
    try:
        wait_until(lambda: member.held() == set(range(PARTITIONS)), "its assignment", TIMEOUT_S)
        (described,) = describe(where, group)
        (described_member,) = described.members
        assert described_member.member_epoch >= 1 and described_member.member_type == 1
        assert described_member.subscribed_topic_names == (topic,)
    finally:
        member.stop()
    wait_until(
        lambda: describe(where, group)[0].group_state == "Empty", "the member gone", TIMEOUT_S
    )


def test_a_librdkafka_member_subscribes_by_regex(cluster, tmp_path):
    """A regex subscription (librdkafka sends it to the coordinator, which resolves it): the
    matching topics' partitions, none of the others; a topic created later joins in."""
    where = address(cluster)
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    group = f"g-{prefix}"
    create_topic(cluster.bootstrap_servers, f"{prefix}-1", 2)
    create_topic(cluster.bootstrap_servers, f"other-{prefix}", 1)
    coordinator_ready(where, group)
    member = Member(cluster, group, f"^{prefix}-.*", tmp_path / "member.jsonl")
    try:
        wanted = {(f"{prefix}-1", 0), (f"{prefix}-1", 1)}
        wait_until(lambda: member.held_pairs() == wanted, "the matching topic", TIMEOUT_S)
        create_topic(cluster.bootstrap_servers, f"{prefix}-2", 1)
        wanted.add((f"{prefix}-2", 0))
        wait_until(lambda: member.held_pairs() == wanted, "the new topic", TIMEOUT_S)
    finally:
        member.stop()


def test_librdkafka_members_share_the_partitions(cluster, tmp_path):
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    coordinator_ready(where, group)
    members = [Member(cluster, group, topic, tmp_path / f"m{n}.jsonl") for n in range(2)]
    try:

        def shared() -> bool:
            held = [m.held() for m in members]
            owned = sorted(p for h in held for p in h)
            return owned == list(range(PARTITIONS)) and all(held)

        wait_until(shared, "two librdkafka members sharing the partitions", 60)
        (described,) = describe(where, group)
        assert len(described.members) == 2
    finally:
        for member in members:
            member.stop()


def test_a_dead_members_partitions_go_to_the_survivor(cluster, tmp_path):
    """kill -9 of a member: no leave; once its session times out (6 s here), the other member
    gets every partition."""
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    coordinator_ready(where, group)
    members = [Member(cluster, group, topic, tmp_path / f"m{n}.jsonl") for n in range(2)]
    try:
        wait_until(lambda: all(m.held() for m in members), "both members assigned", 60)
        started = time.monotonic()
        members[0].process.kill()
        members[0].process.wait(timeout=TIMEOUT_S)
        wait_until(lambda: members[1].held() == set(range(PARTITIONS)), "the survivor has all", 60)
        assert time.monotonic() - started >= 3  # not before the session could have expired
        (described,) = describe(where, group)
        assert len(described.members) == 1
    finally:
        for member in members:
            member.stop()


def test_librdkafka_members_consume_every_record_and_commit(cluster, tmp_path):
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for n in range(200):
        producer.produce(topic, value=str(n).encode(), partition=n % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    members = [Member(cluster, group, topic, tmp_path / f"m{n}.jsonl") for n in range(2)]
    try:

        def consumed() -> set[str]:
            return {e["v"] for m in members for e in m.events() if e["e"] == "record"}

        wait_until(lambda: len(consumed()) == 200, "every record consumed by the group", 60)
    finally:
        for member in members:
            member.stop()


def test_a_group_survives_a_broker_crash(cluster):
    """The group is its records: kill -9 and restart the broker, and the reloaded coordinator
    knows the same members, epochs and assignments; the members carry on at their epochs."""
    where = address(cluster)
    group, topic = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap_servers, topic)
    coordinator_ready(where, group)
    first = call(where, heartbeat(group, "m1", 0, subscribed_topic_names=(topic,)))
    ((topic_id, _),) = assigned(first).items()
    call(where, heartbeat(group, "m2", 0, subscribed_topic_names=(topic,)))
    keep = assigned(call(where, heartbeat(group, "m1", 1)))[topic_id]
    call(where, heartbeat(group, "m1", 1, owned={topic_id: keep}))
    call(where, heartbeat(group, "m2", 2))
    (before,) = describe(where, group)
    assert before.group_state == "Stable"

    data_dir = Path(cluster.data_dir)
    broker = next(m for m in cluster.members if m.role == "broker")
    local.kill(broker)
    wait_until(lambda: not broker.is_ours(), "the broker gone", TIMEOUT_S)
    local.restart_broker(data_dir, broker.id)

    def reloaded():
        try:
            (after,) = describe(where, group)
        except Exception:
            return None
        return after if after.error_code == ErrorCode.none else None

    after = wait_until(reloaded, "the group reloaded", TIMEOUT_S, poll_s=0.2)
    assert (after.group_state, after.group_epoch, after.assignment_epoch) == ("Stable", 2, 2)
    assert after.members == before.members
    again = call(where, heartbeat(group, "m1", 2))
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 2)


def test_the_consumer_protocol_can_be_disabled(tmp_path_factory, local_cluster):
    overrides = {**OVERRIDES, "group.coordinator.rebalance.protocols": "classic"}
    with local_cluster(
        tmp_path_factory.mktemp("classic-only"), brokers=1, broker_overrides=overrides
    ) as state:
        where = address(state)
        served = served_apis(where)
        assert HEARTBEAT not in served and DESCRIBE not in served  # not advertised either
        response = call(where, heartbeat("g", "m1", 0, subscribed_topic_names=("t",)))
        assert response.error_code == ErrorCode.unsupported_version
        (described,) = describe(where, "g")
        assert described.error_code == ErrorCode.unsupported_version
