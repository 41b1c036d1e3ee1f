"""The leader's side of KIP-497: ISR changes sent to the controller with AlterPartition.

A partition leader never writes its ISR anywhere itself: it proposes a change
(``Partition._propose``), this manager sends it to the active controller, and the controller, the
only writer of partition state in ZooKeeper, commits it with a conditional write or refuses it.
The answer goes back to the partition (``isr_change_committed`` / ``isr_change_failed``).

- Proposals queue here, at most one per partition (a partition has one in flight); one request
  is in flight at a time and carries everything queued when it was built (Kafka's
  AlterPartitionManager).
- A request that gets no answer (no controller known, connection lost, NOT_CONTROLLER, the
  controller's election in progress) is sent again after ``RETRY_BACKOFF_S``, to the controller
  ``find_controller`` names then. A proposal whose partition has moved on meanwhile (a
  LeaderAndIsr replaced it) is dropped instead of sent.
- A partition-level error of any kind (FENCED_LEADER_EPOCH: a newer leader exists;
  INVALID_UPDATE_VERSION; INELIGIBLE_REPLICA; ...) fails that proposal: the partition proposes
  again at its next check, with whatever state it has then. A zombie leader therefore never gets
  its shrink committed.
- A refusal of the whole request other than these (an unsupported version, ...) fails every
  proposal it carried, as a partition-level error does.
- STALE_BROKER_EPOCH: the request carried an epoch from before this broker registered again; it
  is retried with the current one.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.alter_partition.v2 import request as alter_request

from odradek.broker.controller_link import Connect, ControllerConnection, FindController
from odradek.broker.partition import IsrProposal, Partition
from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_S_MAX = 2.0
REQUEST_TIMEOUT_S = 30.0
LEADER_RECOVERY_RECOVERED = 0
# Top-level or per-partition errors after which the same proposal is simply sent again.
RETRIABLE = frozenset(
    {
        ErrorCode.not_controller,
        ErrorCode.stale_broker_epoch,
        ErrorCode.request_timed_out,
        ErrorCode.operation_not_attempted,
    }
)


async def open_connection(
    host: str, port: int, *, tls: ssl.SSLContext | None = None
) -> BrokerConnection:
    return await BrokerConnection.open(
        host,
        port,
        client_id="odradek-alter-partition",
        request_timeout_s=REQUEST_TIMEOUT_S,
        tls=tls,
    )


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        *,
        broker_epoch: Callable[[], int | None],
        topic_id: Callable[[str], uuid.UUID | None],
        find_controller: FindController,
        connect: Connect = open_connection,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.topic_id = topic_id
        self.controller = ControllerConnection(find_controller, connect)
        self.on_change = on_change
        self.queued: dict[TopicPartition, tuple[Partition, IsrProposal]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"alter-partition-{self.broker_id}"
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.controller.close()

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self.queued[(partition.topic, partition.index)] = (partition, proposal)
        self._wake.set()

    # -- sending -------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff_s = RETRY_BACKOFF_S
        while True:
            if not self.queued:
                self._wake.clear()
                await self._wake.wait()
            batch = self._take_batch()
            if not batch:
                continue
            try:
                answered = await self._send(batch)
            except ClientError as e:
                log.info("AlterPartition not answered (%s); retrying in %.1f s", e, backoff_s)
                await self.controller.close()
                answered = False
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AlterPartition failed")
                answered = False
            if answered:
                backoff_s = RETRY_BACKOFF_S
                continue
            for key, entry in batch.items():
                self.queued.setdefault(key, entry)  # a newer proposal queued meanwhile wins
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RETRY_BACKOFF_S_MAX)

    def _take_batch(self) -> dict[TopicPartition, tuple[Partition, IsrProposal]]:
        """What is queued and still current (its partition still waits on it)."""
        queued, self.queued = self.queued, {}
        return {
            key: (partition, proposal)
            for key, (partition, proposal) in queued.items()
            if partition.pending_isr is proposal
        }

    async def _send(self, batch: dict[TopicPartition, tuple[Partition, IsrProposal]]) -> bool:
        """Send one request; False if it must be sent again (nothing was decided)."""
        epoch = self.broker_epoch()
        connection = await self.controller.get()
        if epoch is None or connection is None:
            log.info(
                "AlterPartition waits: no %s", "broker epoch" if epoch is None else "controller"
            )
            return False
        request, by_id = self._build(batch, epoch)
        for key, (partition, proposal) in list(batch.items()):
            if key[0] not in by_id.values():
                del batch[key]
                partition.isr_change_failed(proposal, f"the id of topic {key[0]} is not known yet")
        if request is None:
            return True
        response = await connection.send(request)
        error = response.error_code
        if error != ErrorCode.none:
            log.info("AlterPartition answered %s", error.name)
            if error == ErrorCode.not_controller:
                await self.controller.close()
            if error in RETRIABLE:
                return False
            # Refused whole: every proposal fails, so that its partition proposes again later
            # (a proposal left pending would block that partition's ISR changes for good).
            for partition, proposal in batch.values():
                partition.isr_change_failed(proposal, error.name)
            return True
        self._apply(response, batch, by_id)
        return True

    def _build(
        self, batch: dict[TopicPartition, tuple[Partition, IsrProposal]], broker_epoch: int
    ) -> tuple[Any | None, dict[uuid.UUID, str]]:
        topics: dict[str, list[Any]] = {}
        by_id: dict[uuid.UUID, str] = {}
        for (topic, index), (_, proposal) in batch.items():
            topic_id = self.topic_id(topic)
            if topic_id is None:
                continue  # not in the metadata yet: failed below, proposed again later
            by_id[topic_id] = topic
            topics.setdefault(topic, []).append(
                alter_request.PartitionData(
                    partition_index=index,
                    leader_epoch=proposal.leader_epoch,
                    new_isr=tuple(proposal.isr),
                    leader_recovery_state=LEADER_RECOVERY_RECOVERED,
                    partition_epoch=proposal.partition_epoch,
                )
            )
        if not topics:
            return None, by_id
        id_of = {name: topic_id for topic_id, name in by_id.items()}
        request = alter_request.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=broker_epoch,
            topics=tuple(
                alter_request.TopicData(topic_id=id_of[name], partitions=tuple(partitions))
                for name, partitions in topics.items()
            ),
        )
        return request, by_id

    def _apply(
        self,
        response: Any,
        batch: dict[TopicPartition, tuple[Partition, IsrProposal]],
        by_id: dict[uuid.UUID, str],
    ) -> None:
        answered: set[TopicPartition] = set()
        for topic in response.topics:
            name = by_id.get(topic.topic_id)
            if name is None:
                continue
            for data in topic.partitions:
                key = (name, data.partition_index)
                entry = batch.get(key)
                if entry is None:
                    continue
                answered.add(key)
                partition, proposal = entry
                if data.error_code == ErrorCode.none:
                    partition.isr_change_committed(
                        proposal, tuple(data.isr), data.leader_epoch, data.partition_epoch
                    )
                else:
                    partition.isr_change_failed(proposal, data.error_code.name)
        for key, (partition, proposal) in batch.items():
            if key not in answered:
                partition.isr_change_failed(proposal, "not in the controller's answer")
        self.on_change()
