"""LeaderAndIsr naming an illegal topic or a negative partition creates no directory, inside the
log dirs or out of them, and answers INVALID_TOPIC_EXCEPTION / UNKNOWN_TOPIC_OR_PARTITION (the
fuzz found a client making a broker process create ``/tmp/<name>-0`` through ``../``). Sent on
the control-plane listener, with the broker's epoch, as only a controller now can.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import interbroker
from odradek.protocol.interbroker import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)

pytestmark = pytest.mark.integration

BROKER_EPOCH = 4242  # what the registration's czxid would be


def leader_and_isr(broker, topic: str, partitions: tuple[int, ...]):
    broker_id = broker.context.broker_id
    states = tuple(
        LeaderAndIsrPartitionState(
            partition_index=p,
            controller_epoch=1,
            leader=broker_id,
            leader_epoch=0,
            isr=(broker_id,),
            partition_epoch=0,
            replicas=(broker_id,),
            is_new=True,
        )
        for p in partitions
    )
    broker.context.broker_epoch = BROKER_EPOCH  # as the registrar sets it
    request = LeaderAndIsrRequest(
        controller_id=100,
        controller_epoch=1,
        broker_epoch=BROKER_EPOCH,
        type_=0,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name=topic, topic_id=uuid.uuid4(), partition_states=states
            ),
        ),
        live_leaders=(LeaderAndIsrLiveLeader(broker_id=broker_id, host_name="127.0.0.1", port=1),),
    )

    async def send():
        async with await BrokerConnection.open("127.0.0.1", broker.control_port) as connection:
            return await connection.send(request, timeout_s=10)

    [answer] = asyncio.run(send()).topics
    return {p.partition_index: p.error_code for p in answer.partition_errors}


@pytest.mark.parametrize("topic", ["../escaped-by-test", "a/b", "..", "", "x" * 250, "tøpic"])
def test_an_illegal_topic_name_creates_nothing(broker, tmp_path, topic):
    interbroker.register_all()

    def directories() -> list[str]:
        # Directories only: a log is a directory, and the broker's own partitions write files
        # (checkpoints) in the background meanwhile.
        return sorted(str(p) for p in tmp_path.parent.rglob("*") if p.is_dir())

    before = directories()
    assert leader_and_isr(broker, topic, (0, 1)) == {
        0: ErrorCode.invalid_topic_exception,
        1: ErrorCode.invalid_topic_exception,
    }
    assert directories() == before


def test_a_negative_partition_is_refused_and_the_others_are_hosted(broker, tmp_path):
    interbroker.register_all()
    errors = leader_and_isr(broker, "legal", (-1, 0))
    assert errors == {-1: ErrorCode.unknown_topic_or_partition, 0: ErrorCode.none}
    hosted = {p.name for p in tmp_path.glob("disk-*/legal-*")}
    assert hosted == {"legal-0"}
