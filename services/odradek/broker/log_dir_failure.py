"""What a broker does when one of its log dirs fails (Kafka's ``handleLogDirFailure``).

The log manager takes the dir offline on an I/O error, on whichever thread hit it, and calls
``dir_offline``. Then, on the event loop:

- the replica fetchers stop fetching the partitions of that dir (their logs refuse appends);
- the controller is told, Kafka's ZooKeeper way: a sequential znode
  ``/log_dir_event_notification/log_dir_event_<seq>`` holding ``{"version":1,"broker":<id>,
  "event":1}``. The controller then sends this broker LeaderAndIsr for its replicas, reads
  KAFKA_STORAGE_ERROR for those on the failed dir in the answer, and moves their leadership and
  ISR membership elsewhere (``controller.log_dir_events``). The broker keeps serving its other
  dirs;
- if no dir is left online the broker stops (Kafka halts): it cannot serve anything.

A notification that cannot be written is retried (ZooKeeper may be reconnecting) up to
``NOTIFY_ATTEMPTS_MAX`` times. Runs on the event loop, except ``dir_offline`` (any thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from odradek.common.partitions import TopicPartition
from odradek.storage.manager import LogManager
from odradek.zk.client import ZkClient
from odradek.zk.errors import ZkError
from odradek.zk.paths import LogDirEventNotification, log_dir_event_path_prefix

log = logging.getLogger(__name__)

NOTIFY_ATTEMPTS_MAX = 30
NOTIFY_BACKOFF_S = 1.0


class LogDirFailureHandler:
    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        log_manager: LogManager,
        *,
        stop_partitions: Callable[[list[TopicPartition]], None],
        stop_broker: Callable[[], None],
    ):
        self.broker_id = broker_id
        self.zk = zk
        self.log_manager = log_manager
        self.stop_partitions = stop_partitions
        self.stop_broker = stop_broker
        self.loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()

    def dir_offline(self, log_dir: Path, partitions: list[TopicPartition]) -> None:
        """The log manager's ``on_dir_offline``: any thread."""
        if self.loop is None:
            return  # at load: nothing is hosted yet, the controller learns it from LeaderAndIsr
        self.loop.call_soon_threadsafe(self._handle, log_dir, partitions)

    def _handle(self, log_dir: Path, partitions: list[TopicPartition]) -> None:
        self.stop_partitions(partitions)
        if len(self.log_manager.offline_dirs) == len(self.log_manager.log_dirs):
            log.critical("every log dir has failed (%s): stopping", log_dir)
            self.stop_broker()
            return
        task = asyncio.get_running_loop().create_task(self._notify(log_dir))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self, log_dir: Path) -> None:
        data = LogDirEventNotification(self.broker_id).encode()
        for attempt in range(1, NOTIFY_ATTEMPTS_MAX + 1):
            try:
                path = await self.zk.acreate(log_dir_event_path_prefix(), data, sequence=True)
            except ZkError as e:
                log.warning(
                    "cannot notify the controller of %s (attempt %d): %s", log_dir, attempt, e
                )
                await asyncio.sleep(NOTIFY_BACKOFF_S)
                continue
            log.info("told the controller that log dir %s failed: %s", log_dir, path)
            return
        log.error("could not notify the controller that log dir %s failed", log_dir)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
