"""Producer ids for idempotent producers (InitProducerId), unique across brokers and restarts.

As Kafka's ``ZkProducerIdManager``: ids are handed out from blocks of ``PRODUCER_ID_BLOCK_SIZE``
reserved in ``/latest_producer_id_block``, which holds the last block anyone reserved::

    {"version":1,"broker":1,"block_start":"1000","block_end":"1999"}    (both ends inclusive)

To reserve the next block a broker reads the node (data and znode version), computes
``[block_end + 1, block_end + size]`` (``[0, size - 1]`` when the node is empty or missing), and
writes it only if the znode is still at the version it read. A broker that loses the race reads
again. So every block is reserved by exactly one broker, blocks never overlap, and a restarted
broker starts a fresh block (ids left in its old block are skipped, never reused). A write whose
answer was lost (a ZooKeeper timeout) at worst wastes a block: the next attempt reads it back as
someone else's.

Producer ids are handed out in order from the current block under an ``asyncio.Lock``, so
concurrent requests on one broker never share an id. The epoch of a new producer id is 0.

Transactional producers (a non-null ``transactional_id``) are the transaction coordinator's
(``odradek.transactions``), which takes its producer ids from here (``next_producer_id``);
``init_producer_id`` answers idempotent producers only.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from odradek.broker.admin.errors import (
    ConcurrentUpdateError,
    CoordinatorNotAvailableError,
    error_of,
)
from odradek.common.limits import INT64_MAX
from odradek.errors import ErrorCode, OdradekError
from odradek.zk.client import ZkClient
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.zk.paths import LATEST_PRODUCER_ID_BLOCK_PATH, ProducerIdBlock

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "InitProducerIdResult",
    "ProducerIdManager",
    "init_producer_id",
]

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
BLOCK_ATTEMPTS_MAX = 100  # compare-and-set rounds lost to other brokers before giving up
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerIdsExhaustedError(OdradekError):
    """The next block would pass 2^63 - 1 (Kafka treats this as fatal too)."""


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode = ErrorCode.none
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    message: str | None = None


class ProducerIdManager:
    """Hands out producer ids from blocks reserved in ZooKeeper; see the module docstring."""

    def __init__(
        self, zk: ZkClient, broker_id: int, *, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, not {block_size}")
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._lock = asyncio.Lock()

    async def init_producer_id(self, transactional_id: str | None) -> InitProducerIdResult:
        """InitProducerId: a new producer id with epoch 0, or the error to answer."""
        try:
            if transactional_id is not None:
                raise CoordinatorNotAvailableError(
                    f"transactional id {transactional_id!r}: the transaction coordinator's"
                )
            return InitProducerIdResult(producer_id=await self.next_producer_id(), producer_epoch=0)
        except Exception as e:
            code, message = error_of(e, "allocating a producer id")
            if code in (ErrorCode.request_timed_out, ErrorCode.network_exception):
                # ZooKeeper is unreachable: tell the client to come back, as Kafka does while
                # its producer id manager waits for a block.
                code = ErrorCode.coordinator_load_in_progress
            return InitProducerIdResult(code, message=message)

    async def next_producer_id(self) -> int:
        """The next unused producer id, reserving a new block first if this one is used up."""
        async with self._lock:
            if self._block is None or self._next_id > self._block.block_end:
                self._block = await self._reserve_block()
                self._next_id = self._block.block_start
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    async def _reserve_block(self) -> ProducerIdBlock:
        path = LATEST_PRODUCER_ID_BLOCK_PATH
        for _ in range(BLOCK_ATTEMPTS_MAX):
            try:
                data, stat = await self.zk.aget(path)
            except NoNodeError:
                data, stat = b"", None
            start = 0
            if data:
                last = ProducerIdBlock.decode(data, path)
                if last.block_end > INT64_MAX - self.block_size:
                    raise ProducerIdsExhaustedError(
                        f"Have exhausted all producerIds (last block ends at {last.block_end})"
                    )
                start = last.block_end + 1
            block = ProducerIdBlock(self.broker_id, start, start + self.block_size - 1)
            try:
                if stat is None:
                    await self.zk.acreate(path, block.encode())
                else:
                    await self.zk.aset(path, block.encode(), version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker reserved a block meanwhile: take the next one
            log.info("reserved producer ids %d..%d", block.block_start, block.block_end)
            return block
        raise ConcurrentUpdateError(
            f"could not reserve a producer id block in {BLOCK_ATTEMPTS_MAX} attempts"
        )


async def init_producer_id(
    manager: ProducerIdManager | None, transactional_id: str | None
) -> InitProducerIdResult:
    """InitProducerId through the broker's manager; without ZooKeeper there are no producer ids."""
    if manager is None:
        return InitProducerIdResult(
            ErrorCode.coordinator_not_available,
            message="this broker is not connected to ZooKeeper: no producer ids",
        )
    return await manager.init_producer_id(transactional_id)
