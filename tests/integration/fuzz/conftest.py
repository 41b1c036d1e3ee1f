"""The fuzz's targets: real clusters (ZooKeeper, a controller, two brokers) with topics to hurt,
one plaintext (``fuzz_cluster``) and one secured (``secured_fuzz_cluster``, below).

``odradek local up`` starts the processes once for this directory; the teardown stops them by
pid (``odradek local down``) and checks that none survived. Topics are created through the admin
API (confluent-kafka's AdminClient): a plain one with three partitions, a compacted one with
small segments (so the cleaner really runs), one that recompresses to lz4, one with
LogAppendTime, three scratch topics that CreateTopics and DeleteTopics may name, and the control
topic that no case names (the real client's). Retention is checked every few seconds, so a
retention setting a case changes takes effect during the run.

Each broker's client listener and its control-plane listener are ``Target``s, each serving what
its own ApiVersions advertises (the control plane: LeaderAndIsr, StopReplica, UpdateMetadata).
The secured cluster's listeners are reached in several ways each (``Role``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from fuzzing.login import Login
from fuzzing.strategies import Pools
from fuzzing.traffic import Role, Target

from odradek.client.connection import BrokerConnection
from odradek.local import cluster
from odradek.local.cluster import ClusterState, Member, pid_alive
from odradek.local.pki import LocalPki
from odradek.local.security import HOSTS
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from support.waiting import wait_until

BROKERS = 2
MAX_FRAME_BYTES = 16 * 1024 * 1024  # socket.request.max.bytes: the fuzz's frames are smaller
POOL_BYTES = 2 * MAX_FRAME_BYTES  # queued.max.request.bytes
BROKER_OVERRIDES = {
    "socket.request.max.bytes": str(MAX_FRAME_BYTES),
    "queued.max.request.bytes": str(POOL_BYTES),
    "log.retention.check.interval.ms": "5000",
    # The scratch topics that cases create take the broker's default: one replica, as the
    # watched topics have (replication is not what the fuzz tests).
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}
# Watched topics: name -> (partitions, configs). No name contains another, nor "compact".
TOPICS = {
    "fuzz-plain": (3, {}),
    "fuzz-keyed": (
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01",
        },
    ),
    "fuzz-lz4": (2, {"compression.type": "lz4"}),
    "fuzz-logtime": (1, {"message.timestamp.type": "LogAppendTime"}),
}
COMPACTED = ("fuzz-keyed",)
SCRATCH_TOPICS = ("fuzz-scratch-0", "fuzz-scratch-1", "fuzz-scratch-2")
CONTROL_TOPIC = "odradek-control"
WAIT_S = 60.0


@dataclass(frozen=True)
class FuzzCluster:
    state: ClusterState
    brokers: tuple[Member, ...]
    targets: tuple[Target, ...]
    bootstrap: str
    watched_topics: tuple[str, ...] = tuple(TOPICS)
    compacted: tuple[str, ...] = COMPACTED
    control_topic: str = CONTROL_TOPIC
    pool_bytes: int = POOL_BYTES
    client_security: Mapping[str, str] = field(default_factory=dict)  # librdkafka's keys


async def _advertised(
    host: str, port: int, tls: ssl.SSLContext | None = None
) -> dict[int, tuple[int, int]]:
    """What a listener's ApiVersions (v3) says it serves (served before SASL, as Kafka)."""
    request = schemas.request_schema(18, 3)(
        client_software_name="odradek-fuzz", client_software_version="1.0.0"
    )
    async with await BrokerConnection.open(host, port, connect_timeout_s=5, tls=tls) as connection:
        response = await connection.send(request, timeout_s=10)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def _create_topics(
    bootstrap: str, security: Mapping[str, str], broker_ids: Sequence[int]
) -> dict[tuple[str, int], int]:
    """Create every topic; returns the leader of each partition once all have one.

    Each partition's replica is named (round robin over ``broker_ids``, in topic order), not left
    to the controller's placement, which starts at a random broker: which partitions a target's
    broker leads is part of what its cases are drawn from (``Pools.led``), so a seed replays the
    same cases only on a cluster led alike."""
    admin = AdminClient({**security, "bootstrap.servers": bootstrap})
    wanted = {
        **{name: spec for name, spec in TOPICS.items()},
        **{name: (1, {}) for name in (*SCRATCH_TOPICS, CONTROL_TOPIC)},
    }
    placed = 0
    new_topics = []
    for name, (count, configs) in wanted.items():
        replicas = [[broker_ids[(placed + p) % len(broker_ids)]] for p in range(count)]
        placed += count
        new_topics.append(NewTopic(name, count, -1, replica_assignment=replicas, config=configs))
    futures = admin.create_topics(new_topics)
    for future in futures.values():
        future.result(timeout=WAIT_S)

    def led():  # the metadata once every partition has a leader, as a client sees it
        metadata = admin.list_topics(timeout=10)
        return (
            metadata
            if all(
                name in metadata.topics
                and len(metadata.topics[name].partitions) == count
                and all(p.leader >= 0 for p in metadata.topics[name].partitions.values())
                for name, (count, _) in wanted.items()
            )
            else None
        )

    metadata = wait_until(led, "every partition of the topics led", WAIT_S)
    return {
        (name, p.id): p.leader for name in wanted for p in metadata.topics[name].partitions.values()
    }


def _client_pools(member: Member, brokers: tuple[Member, ...], leaders, **extra) -> Pools:
    """What cases to a broker's client listener aim at: mostly the partitions it leads."""
    return Pools(
        topics=tuple(TOPICS),
        led=tuple(
            sorted(tp for tp, leader in leaders.items() if leader == member.id and tp[0] in TOPICS)
        ),
        scratch_topics=SCRATCH_TOPICS,
        partitions=max(count for count, _ in TOPICS.values()),
        broker_ids=tuple(m.id for m in brokers),
        max_frame_bytes=MAX_FRAME_BYTES,
        base_time_ms=0,  # the test sets the run's clock
        **extra,
    )


def _control_pools(brokers: tuple[Member, ...], topics: tuple[str, ...]) -> Pools:
    return Pools(
        topics=topics,
        led=(),
        scratch_topics=SCRATCH_TOPICS,
        partitions=1,
        broker_ids=tuple(m.id for m in brokers),
        max_frame_bytes=MAX_FRAME_BYTES,
        base_time_ms=0,
    )


@contextlib.contextmanager
def _cluster(data_dir: Path, security: str) -> Iterator[ClusterState]:
    try:
        state, started = cluster.up(
            data_dir,
            brokers=BROKERS,
            controllers=1,
            broker_overrides=BROKER_OVERRIDES,
            security=security,
        )
    except BaseException:
        cluster.down(data_dir)  # what started before the failure
        raise
    try:
        assert started
        yield state
    finally:
        cluster.down(data_dir)
        alive = [f"{m.role} {m.id} (pid {m.pid})" for m in state.members if pid_alive(m.pid)]
        assert not alive, f"still running after down: {alive}"


@pytest.fixture(scope="package")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzCluster]:
    with _cluster(tmp_path_factory.mktemp("fuzz-cluster"), "plaintext") as state:
        brokers = tuple(m for m in state.members if m.role == "broker")
        leaders = _create_topics(state.bootstrap_servers, {}, [m.id for m in brokers])
        targets = []
        for member in brokers:
            host, port = member.address.rsplit(":", 1)
            served = asyncio.run(_advertised(host, int(port)))
            # most cases go to clients' listeners, where the data is
            pools = _client_pools(member, brokers, leaders, share=3, work_shapes=True)
            targets.append(Target(f"broker {member.id} client", host, int(port), served, pools))
        for member in brokers:
            # The control plane trusts its sender here (a plaintext cluster): its cases may
            # rightly stop or delete partitions, so they name only the scratch topics. Their
            # broker epochs are drawn at random: almost all are refused as stale, which still
            # runs every byte through the decoder and the epoch and name checks.
            host, port = member.control_plane.rsplit(":", 1)
            served = asyncio.run(_advertised(host, int(port)))
            pools = _control_pools(brokers, SCRATCH_TOPICS)
            name = f"broker {member.id} control plane"
            targets.append(Target(name, host, int(port), served, pools))
        yield FuzzCluster(state, brokers, tuple(targets), state.bootstrap_servers)


def _client_properties(path: Path) -> dict[str, str]:
    """librdkafka's keys of ``odradek local up --security sasl_ssl``'s client.properties."""
    config = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            break  # the Java client's names follow
        key, _, value = line.partition("=")
        config[key] = value
    config.pop("bootstrap.servers")
    return config


def _tls_hello(tls: ssl.SSLContext, host: str) -> bytes:
    """The ClientHello ``tls`` sends to ``host`` (a handshake in memory, no socket)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_object = tls.wrap_bio(incoming, outgoing, server_hostname=host)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls_object.do_handshake()
    return outgoing.read()


# What an unauthenticated connection to a SASL listener is drawn from, and how often: the APIs
# Kafka serves then, and two it must not (Metadata names the topics; Produce would append).
UNAUTHENTICATED_API_WEIGHTS = {
    ApiKey.API_VERSIONS: 1,
    ApiKey.SASL_HANDSHAKE: 3,
    ApiKey.SASL_AUTHENTICATE: 3,
    ApiKey.METADATA: 3,
    ApiKey.PRODUCE: 1,
}


@pytest.fixture(scope="package")
def secured_fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzCluster]:
    """The cluster of ``odradek local up --security sasl_ssl`` (SCRAM-SHA-512 over TLS for
    clients, mutual TLS for the control plane, ACLs), reached four ways per broker: logged in
    as the admin over TLS (every API, as the plaintext run), over TLS without logging in (the
    SASL exchange itself, and what must be refused before it), in the clear on the TLS port
    (TLS ClientHellos mutated, Kafka frames), and on the control plane with a certificate the
    CA issued to ``mallory``, who is not the cluster (the watched topics named: every request
    must be refused, and the ledger proves none took effect)."""
    data_dir = tmp_path_factory.mktemp("secured-fuzz-cluster")
    with _cluster(data_dir, "sasl_ssl") as state:
        security = _client_properties(data_dir / "client.properties")
        brokers = tuple(m for m in state.members if m.role == "broker")
        leaders = _create_topics(state.bootstrap_servers, security, [m.id for m in brokers])
        pki = LocalPki.create(data_dir / "pki", HOSTS)
        tls = ssl.create_default_context(cafile=str(pki.ca_path))
        mallory = ssl.create_default_context(cafile=str(pki.ca_path))
        mallory.load_cert_chain(str(pki.issue("mallory")))
        login = Login(
            security["sasl.mechanism"], security["sasl.username"], security["sasl.password"]
        )
        targets = []
        for member in brokers:
            host, port = member.address.rsplit(":", 1)
            served = asyncio.run(_advertised(host, int(port), tls))
            pools = _client_pools(member, brokers, leaders, share=3, work_shapes=True)
            name = f"broker {member.id} SASL_SSL as {login.username}"
            targets.append(Target(name, host, int(port), served, pools, tls, login))
            unauthenticated = {k: served[k] for k in UNAUTHENTICATED_API_WEIGHTS}
            pools = _client_pools(
                member,
                brokers,
                leaders,
                share=3,
                sasl_mechanism=security["sasl.mechanism"],
                api_weights=tuple(UNAUTHENTICATED_API_WEIGHTS.items()),
            )
            name = f"broker {member.id} SASL_SSL unauthenticated"
            targets.append(
                Target(
                    name, host, int(port), unauthenticated, pools, tls, role=Role.UNAUTHENTICATED
                )
            )
            pools = _client_pools(member, brokers, leaders, tls_hello=_tls_hello(tls, host))
            name = f"broker {member.id} SASL_SSL in the clear"
            targets.append(Target(name, host, int(port), served, pools, role=Role.RAW))
        for member in brokers:
            host, port = member.control_plane.rsplit(":", 1)
            served = asyncio.run(_advertised(host, int(port), mallory))
            pools = _control_pools(brokers, tuple(TOPICS))
            name = f"broker {member.id} control plane as mallory"
            targets.append(Target(name, host, int(port), served, pools, mallory, role=Role.REFUSED))
        yield FuzzCluster(
            state, brokers, tuple(targets), state.bootstrap_servers, client_security=security
        )
