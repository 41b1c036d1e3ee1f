"""The leader's AlterPartition sender: a refused request never leaves a proposal pending (that
would block the partition's ISR changes for good); a retriable refusal is sent again."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from kio.schema.alter_partition.v2 import response as alter_response

from odradek.broker.alter_partition import AlterPartitionManager
from odradek.broker.partition import IsrProposal, Partition, PartitionState
from odradek.config.endpoints import HostPort
from odradek.config.topic import TopicConfig
from odradek.errors import ErrorCode
from odradek.storage.manager import LogManager

TOPIC_ID = uuid.uuid4()


class ScriptedController:
    """Answers each AlterPartition with the next top-level error of ``errors``."""

    def __init__(self, errors: list[ErrorCode]):
        self.errors = errors
        self.requests: list[object] = []
        self.closed = False

    async def send(self, request):
        self.requests.append(request)
        return alter_response.AlterPartitionResponse(
            throttle_time=timedelta(0), error_code=self.errors.pop(0), topics=()
        )

    async def close(self) -> None:
        self.closed = True


def scenario(tmp_path, errors: list[ErrorCode]) -> tuple[Partition, ScriptedController]:
    log_manager = LogManager([tmp_path / "disk-0"])
    log_manager.load()
    controller = ScriptedController(errors)

    async def run() -> Partition:
        async def connect(host: str, port: int):
            return controller

        async def find_controller():
            return HostPort("127.0.0.1", 9093)

        manager = AlterPartitionManager(
            1,
            broker_epoch=lambda: 7,
            topic_id=lambda topic: TOPIC_ID,
            find_controller=find_controller,
            connect=connect,
        )
        partition = Partition(
            "t", 0, 1, log_manager.get_or_create_log("t", 0, TopicConfig()), isr_changes=manager
        )
        partition.make_leader(PartitionState(1, 1, (1, 2), (1, 2)))
        partition.pending_isr = proposal = IsrProposal((1,), 1, 0, expanding=False)
        manager.start()
        manager.submit(partition, proposal)
        for _ in range(200):  # bounded: until the sender is done with it
            if not manager.queued and partition.pending_isr is None:
                break
            await asyncio.sleep(0.01)
        await manager.close()
        return partition

    try:
        return asyncio.run(run()), controller
    finally:
        log_manager.shutdown()


def test_a_request_refused_whole_fails_its_proposals(tmp_path):
    partition, controller = scenario(tmp_path, [ErrorCode.unsupported_version])
    assert len(controller.requests) == 1
    assert partition.pending_isr is None  # free to propose again
    assert partition.state.isr == (1, 2)  # nothing was committed


def test_a_retriable_refusal_is_sent_again(tmp_path):
    partition, controller = scenario(
        tmp_path, [ErrorCode.not_controller, ErrorCode.unsupported_version]
    )
    assert len(controller.requests) == 2
    assert partition.pending_isr is None
