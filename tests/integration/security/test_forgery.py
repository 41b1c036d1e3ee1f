"""The forgery of issue 22, against a secured cluster: nobody but a broker (or the controller) can
send the cluster's own requests, whatever epochs it read, and no acknowledged record is lost.

The attack that truncated 9,878 acknowledged records on an open cluster was made of requests
alone: AlterPartition as a partition's leader, ControlledShutdown as two brokers, and so on, with
the epochs read off ZooKeeper or the controller's answers. Here the cluster runs as a secured
Kafka cluster does: the inter-broker, control-plane and controller listeners are mutual TLS with
the cluster's certificates (CN=broker, CN=controller), the ACL authorizer is on with those two as
super users, clients produce on a PLAINTEXT listener as ``User:ANONYMOUS`` (allowed their topics
by ACLs, not ClusterAction), and ``mallory`` holds a certificate of the same authority, so she
gets through every TLS handshake as an authenticated principal. While acks=all producers write,
she sends each request with the real epochs (read from ZooKeeper, as an attacker could on an
open ZooKeeper); each is refused with CLUSTER_AUTHORIZATION_FAILED (a follower fetch with
TOPIC_AUTHORIZATION_FAILED, as Kafka) and changes nothing; without a certificate she gets no
handshake at all. Then every acknowledged record is read back.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient
from proof.checker import History, analyze
from proof.workload import Producers, WorkloadConfig, read_all

from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.errors import ErrorCode
from odradek.protocol import interbroker, schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.interbroker import (
    ControlledShutdownRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from odradek.zk.paths import partition_state_path
from support.listener_ports import listener_ports
from support.requests import entry_type, fill
from support.tls_cluster import cluster_overrides, write_pki
from support.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "forged"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return write_pki(tmp_path_factory.mktemp("pki"), ("broker", "controller", "admin", "mallory"))


@pytest.fixture(scope="module")
def cluster(pki, local_cluster, tmp_path_factory):
    broker_overrides, controller_overrides = cluster_overrides(
        pki, client_listeners={"MTLS": "SSL"}, acls=True
    )
    data_dir = tmp_path_factory.mktemp("forgery-cluster")
    with local_cluster(
        data_dir,
        brokers=3,
        broker_overrides=broker_overrides,
        controller_overrides=controller_overrides,
    ) as state:
        yield state


def _context(pki, name: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    if name is not None:
        context.load_cert_chain(pki[name])
    return context


def _send(port: int, request, tls: ssl.SSLContext | None):
    async def run():
        async with await BrokerConnection.open(
            "127.0.0.1", port, tls=tls, connect_timeout_s=5, request_timeout_s=10
        ) as connection:
            return await connection.send(request, timeout_s=10)

    return asyncio.run(asyncio.wait_for(run(), 20))


def _zk_facts(state, topic: str) -> dict:
    """What an attacker reads off an open ZooKeeper: epochs, the topic id, partition 0's state."""
    client = KazooClient(state.zookeeper_connect, timeout=10)
    client.start(timeout=10)
    try:
        epochs = {
            int(b): client.get(f"/brokers/ids/{b}")[1].czxid
            for b in client.get_children("/brokers/ids")
        }
        topic_id = json.loads(client.get(f"/brokers/topics/{topic}")[0])["topic_id"]
        data, stat = client.get(partition_state_path(topic, 0))
        return {
            "epochs": epochs,
            "topic_id": topic_id,
            "state": json.loads(data),
            "partition_epoch": stat.version,
            "controller_epoch": int(client.get("/controller_epoch")[0]),
        }
    finally:
        client.stop()
        client.close()


def _topic_uuid(topic_id: str) -> uuid.UUID:
    import base64

    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def _grant_clients(admin: AdminClient) -> None:
    """User:ANONYMOUS (the PLAINTEXT clients) may use every topic and group, nothing more."""
    bindings = [
        AclBinding(
            resource,
            "*",
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )  # fmt: skip
        for resource, operation in (
            (ResourceType.TOPIC, AclOperation.ALL),
            (ResourceType.GROUP, AclOperation.ALL),
        )
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=WAIT_S)


def _attacks(cluster, pki) -> list[tuple[str, object]]:
    """Each forged request, sent; (what, the answer's error(s)) for each."""
    interbroker.register_all()
    brokers = [m for m in cluster.members if m.role == "broker"]
    controller = next(m for m in cluster.members if m.role == "controller")
    controller_port = int(controller.address.rsplit(":", 1)[1])
    facts = _zk_facts(cluster, TOPIC)
    state = facts["state"]
    leader, isr = state["leader"], state["isr"]
    mallory = _context(pki, "mallory")
    results: list[tuple[str, object]] = []

    # AlterPartition as the leader, with its real broker epoch and the partition's epochs.
    alter_type = schemas.request_schema(ApiKey.ALTER_PARTITION, 2)
    alter = fill(
        alter_type,
        broker_id=leader,
        broker_epoch=facts["epochs"][leader],
        topics=(
            fill(
                entry_type(alter_type, "topics"),
                topic_id=_topic_uuid(facts["topic_id"]),
                partitions=(
                    fill(
                        entry_type(entry_type(alter_type, "topics"), "partitions"),
                        partition_index=0,
                        leader_epoch=state["leader_epoch"],
                        new_isr=(leader,),
                        partition_epoch=facts["partition_epoch"],
                    ),
                ),
            ),
        ),
    )
    results.append(("AlterPartition", _send(controller_port, alter, mallory).error_code))
    # ControlledShutdown as every broker, with their real epochs.
    for broker_id, epoch in sorted(facts["epochs"].items()):
        answer = _send(
            controller_port,
            ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch),
            mallory,
        )
        results.append((f"ControlledShutdown of {broker_id}", answer.error_code))
    # LeaderAndIsr to a follower on its control-plane listener: lead, alone in the ISR.
    follower = next(b for b in brokers if b.id != leader)
    lead = LeaderAndIsrRequest(
        controller_id=100,
        controller_epoch=facts["controller_epoch"],
        broker_epoch=facts["epochs"][follower.id],
        type_=0,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name=TOPIC,
                topic_id=_topic_uuid(facts["topic_id"]),
                partition_states=(
                    LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=facts["controller_epoch"],
                        leader=follower.id,
                        leader_epoch=state["leader_epoch"] + 1,
                        isr=(follower.id,),
                        partition_epoch=facts["partition_epoch"] + 1,
                        replicas=tuple(isr),
                    ),
                ),
            ),
        ),
        live_leaders=(),
    )
    answer = _send(listener_ports(follower)["CONTROL_PLANE"], lead, mallory)
    results.append(("LeaderAndIsr", answer.error_code))
    # WriteTxnMarkers to the leader's inter-broker listener: commit a transaction of nobody's.
    markers_type = schemas.request_schema(ApiKey.WRITE_TXN_MARKERS, 1)
    marker_type = entry_type(markers_type, "markers")
    markers = fill(
        markers_type,
        markers=(
            fill(
                marker_type,
                producer_id=1,
                producer_epoch=0,
                transaction_result=True,
                coordinator_epoch=0,
                topics=(
                    fill(entry_type(marker_type, "topics"), name=TOPIC, partition_indexes=(0,)),
                ),
            ),
        ),
    )
    leader_member = next(b for b in brokers if b.id == leader)
    answer = _send(listener_ports(leader_member)["INTERNAL"], markers, mallory)
    results.append(
        (
            "WriteTxnMarkers",
            {p.error_code for m in answer.markers for t in m.topics for p in t.partitions},
        )
    )
    # A follower's fetch at the log end, as a replica: the HW would move on its word.
    fetch_type = schemas.request_schema(ApiKey.FETCH, 12)
    topic_type = entry_type(fetch_type, "topics")
    fetch = fill(
        fetch_type,
        replica_id=follower.id,
        max_wait=timedelta(0),
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(
            fill(
                topic_type,
                topic=TOPIC,
                partitions=(
                    fill(
                        entry_type(topic_type, "partitions"),
                        partition=0,
                        fetch_offset=1 << 40,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 16,
                    ),
                ),
            ),
        ),
    )
    for listener, tls in (("PLAINTEXT", None), ("INTERNAL", mallory)):
        answer = _send(listener_ports(leader_member)[listener], fetch, tls)
        results.append(
            (
                f"follower Fetch on {listener}",
                {p.error_code for t in answer.responses for p in t.partitions},
            )
        )
    return results


def test_forged_cluster_requests_are_refused_and_no_acknowledged_record_is_lost(cluster, pki):
    brokers = [m for m in cluster.members if m.role == "broker"]
    mtls = ",".join(f"127.0.0.1:{listener_ports(b)['MTLS']}" for b in brokers)
    admin = AdminClient(
        {
            "bootstrap.servers": mtls,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"]),
            "ssl.certificate.location": str(pki["admin_cert"]),
            "ssl.key.location": str(pki["admin_key"]),
        }
    )
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(
        timeout=WAIT_S
    )
    _grant_clients(admin)
    wait_until(
        lambda: len(admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs) >= 3,
        "the ISR filled",
        WAIT_S,
    )
    before = _zk_facts(cluster, TOPIC)

    config = WorkloadConfig(topic=TOPIC, partitions=1, producers=2, records_per_s=200)
    history = History(seed=22)
    producers = Producers(cluster.bootstrap_servers, history, config, time.monotonic())
    producers.start()
    try:
        time.sleep(1.0)
        results = _attacks(cluster, pki)
        time.sleep(1.0)
    finally:
        producers.stop()

    refused = ErrorCode.cluster_authorization_failed
    assert dict(results) == {
        "AlterPartition": refused,
        **{f"ControlledShutdown of {b.id}": refused for b in brokers},
        "LeaderAndIsr": refused,
        "WriteTxnMarkers": {refused},
        "follower Fetch on PLAINTEXT": {ErrorCode.topic_authorization_failed},
        "follower Fetch on INTERNAL": {ErrorCode.topic_authorization_failed},
    }
    after = _zk_facts(cluster, TOPIC)
    assert after["state"]["leader"] == before["state"]["leader"]
    assert sorted(after["state"]["isr"]) == sorted(before["state"]["isr"])

    read_all(cluster.bootstrap_servers, history, config, timeout_s=60)
    analysis = analyze(history)
    assert analysis.valid and analysis.lost == 0, analysis.report()
    assert sum(producers.sent) > 200


def test_without_a_certificate_there_is_no_handshake_on_the_cluster_listeners(cluster, pki):
    broker = next(m for m in cluster.members if m.role == "broker")
    controller = next(m for m in cluster.members if m.role == "controller")
    ports = [
        listener_ports(broker)["CONTROL_PLANE"],
        listener_ports(broker)["INTERNAL"],
        int(controller.address.rsplit(":", 1)[1]),
    ]
    request = ControlledShutdownRequest(broker_id=1, broker_epoch=-1)
    interbroker.register_all()
    for port in ports:
        with pytest.raises(ClientError):
            _send(port, request, _context(pki, None))
