"""Followers copy their leaders: replica fetchers, as Kafka's ReplicaFetcherManager/Thread.

A partition this broker follows is fetched from its leader by one of ``num.replica.fetchers``
fetchers per leader broker (chosen by a hash of the partition, so a partition stays on one
fetcher). Each fetcher is one asyncio task with one connection to the leader's inter-broker
listener, sending Fetch requests with ``replica_id`` = this broker, for every partition it holds,
in an incremental fetch session (KIP-227, ``fetch_session_client``: only partitions whose fetch
state changed are sent, only partitions with news come back):

- the fetch offset is the follower's log end offset (LEO); ``current_leader_epoch`` the epoch
  the controller gave it, so a leader with another epoch refuses (FENCED_LEADER_EPOCH: we are
  behind, wait for the controller; UNKNOWN_LEADER_EPOCH: it is behind, retry);
  ``last_fetched_epoch`` the latest epoch in the follower's log, so the leader can say where the
  two histories diverge (``diverging_epoch``, KIP-595);
- a diverging answer truncates the follower (``truncation_offset``: the end of the last epoch
  both logs share, Kafka's ``getOffsetTruncationState``) and the next fetch goes on from there;
  nothing is truncated by the high watermark alone, so replicas stay byte-identical;
- records are appended as they came (offsets, epochs, compression), then the follower's high
  watermark becomes min(leader's HW, own LEO) and its log start offset follows the leader's;
- OFFSET_OUT_OF_RANGE means the leader's log starts beyond ours (retention ran there), ends before
  ours (after an unclean election), or holds no epoch of ours: the follower asks the leader for
  its first and last offsets (ListOffsets) and cuts back to the leader's end, or empties its log
  and goes on at the leader's log start offset;
- each request long-polls (``replica.fetch.wait.max.ms``, ``replica.fetch.min.bytes``); a
  partition returns at most ``replica.fetch.max.bytes``, a response ``replica.fetch.response.
  max.bytes``; a failed connection is retried after ``replica.fetch.backoff.ms``, and so is a
  partition's error, except the ones a leader gives while it has not yet applied the
  controller's latest request (UNKNOWN_TOPIC_OR_PARTITION for a new partition,
  UNKNOWN_LEADER_EPOCH for a new epoch), retried after ``LEADER_NOT_READY_RETRY_S``: a new
  topic's followers would otherwise hold back its first acks=all writes by a whole backoff.

Follower replication throttle (KIP-73): a partition that ``follower.replication.throttled.replicas``
lists on this broker is left out of the next Fetch while it is not in sync (its last answer had
not caught up with the leader's high watermark, or none came yet) and the follower quota is over
``follower.replication.throttled.rate``; every byte fetched for a listed partition is recorded
(``broker/replication_quota.py``). With every partition held back the fetcher sends nothing and
waits ``replica.fetch.backoff.ms`` (or until a partition is added), as Kafka's does.

A response is applied to a partition only if the partition's fetch state is still the one the
request was built from (same leader epoch, same offset): a LeaderAndIsr or a truncation in
between makes it stale, and it is dropped.

Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.schema.fetch.v12 import request as fetch_request  # the last version naming topics
from kio.schema.list_offsets.v4 import request as list_request

from odradek.broker.fetch_session_client import FetchedPartition, FetchSessionHandler
from odradek.broker.partition import READ_UNCOMMITTED, UNDEFINED_EPOCH, Partition
from odradek.broker.replica_manager import FetchPartitionRequest
from odradek.broker.replication_quota import ReplicationQuota
from odradek.broker.workers import Workers
from odradek.client.connection import BrokerConnection
from odradek.client.errors import ClientError
from odradek.common.partitions import NO_EPOCH, TopicPartition
from odradek.config.endpoints import HostPort
from odradek.errors import ErrorCode, OdradekError
from odradek.observability.metrics import BrokerMetrics
from odradek.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

log = logging.getLogger(__name__)

# Answers that mean the leader has not applied the controller's latest request yet.
LEADER_NOT_READY = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_leader_epoch})
LEADER_NOT_READY_RETRY_S = 0.05


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The replica.fetch.* settings (``BrokerConfig``), in one value."""

    num_fetchers: int = 1
    max_bytes: int = 1_048_576  # replica.fetch.max.bytes, per partition
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms


@dataclass(slots=True)
class FetchState:
    """Where a follower's partition stands: fetched from ``fetch_offset`` under ``leader_epoch``."""

    partition: Partition
    leader_epoch: int
    fetch_offset: int
    # Offsets behind the leader's HW after the last answer that brought records (or the first
    # answer; None: none yet). 0 is Kafka's "in sync" for the follower throttle. Not part of
    # the staleness check.
    lag: int | None = field(default=None, compare=False)

    @property
    def key(self) -> TopicPartition:
        return (self.partition.topic, self.partition.index)


def truncation_offset(partition: Partition, diverging_epoch: int, leader_end_offset: int) -> int:
    """Where a follower must truncate, given the leader's end of ``diverging_epoch``.

    Kafka's rule: if the follower has that epoch too, keep up to the smaller of both ends;
    if not, keep up to the end of its own largest epoch below it, and let the next fetch compare
    again. If the follower has no epoch at or below it, nothing it holds is known to match.
    """
    partition_log = partition.log
    log_end_offset = partition_log.log_end_offset
    follower_epoch, follower_end = partition_log.end_offset_for_epoch(diverging_epoch)
    if follower_epoch == UNDEFINED_EPOCH or follower_end < 0:
        return partition_log.log_start_offset
    if follower_epoch == diverging_epoch:
        return min(leader_end_offset, follower_end, log_end_offset)
    return min(follower_end, log_end_offset)


Connect = Callable[[str, int], Awaitable[BrokerConnection]]


class ReplicaFetcher:
    """One fetcher: one leader, one connection, a set of partitions."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        fetcher_id: int,
        *,
        leader_endpoint: Callable[[int], HostPort | None],
        settings: FetcherSettings,
        connect: Connect,
        workers: Workers | None,
        metrics: BrokerMetrics | None,
        quota: ReplicationQuota | None = None,
    ):
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.quota = quota  # the follower side's; None: never throttled
        self.fetcher_id = fetcher_id
        self.leader_endpoint = leader_endpoint
        self.settings = settings
        self.connect = connect
        self.workers = workers
        self.metrics = metrics
        self.states: dict[TopicPartition, FetchState] = {}
        # The last request part made for each partition, reused while nothing in it changed.
        self._requests: dict[TopicPartition, FetchPartitionRequest] = {}
        self.session = FetchSessionHandler(leader_id)
        self.connection: BrokerConnection | None = None
        self._changed = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{leader_id}-{fetcher_id}"
        )

    def add(self, partition: Partition) -> None:
        state = FetchState(partition, partition.state.leader_epoch, partition.log.log_end_offset)
        self.states[state.key] = state
        self._changed.set()

    def remove(self, key: TopicPartition) -> bool:
        self._requests.pop(key, None)
        removed = self.states.pop(key, None) is not None
        if removed and self.metrics is not None:
            self.metrics.forget_replica_lag(*key)
        return removed

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self._disconnect()

    async def _disconnect(self) -> None:
        if self.connection is not None:
            await self.connection.close()
            self.connection = None

    async def _run(self) -> None:
        backoff_s = self.settings.backoff_ms / 1000
        while True:
            if not self.states:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                connection = await self._connection()
                if connection is None:
                    await asyncio.sleep(backoff_s)
                    continue
                built = self._build_request()
                if built is None:  # every partition held back by the throttle
                    self._changed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), backoff_s)
                    continue
                request, sent = built
                wait_s = self.settings.wait_max_ms / 1000
                response = await connection.send(
                    request, timeout_s=self.settings.socket_timeout_ms / 1000 + wait_s
                )
                await self._process(response, sent)
            except ClientError as e:
                log.info(
                    "broker %d: fetch from leader %d failed (%s); retrying in %.1f s",
                    self.broker_id,
                    self.leader_id,
                    e,
                    backoff_s,
                )
                self.session.handle_error()
                await self._disconnect()
                await asyncio.sleep(backoff_s)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                await asyncio.sleep(backoff_s)

    async def _connection(self) -> BrokerConnection | None:
        if self.connection is not None and not self.connection.closed:
            return self.connection
        address = self.leader_endpoint(self.leader_id)
        if address is None:
            log.info("broker %d: no address for leader %d yet", self.broker_id, self.leader_id)
            return None
        self.connection = await self.connect(address.host, address.port)
        return self.connection

    def _build_request(self) -> tuple[Any, dict[TopicPartition, FetchState]] | None:
        """The next Fetch (full or incremental, the session decides), and the states it was
        built from (copies, to recognise stale answers); None when there is nothing to send."""
        sent: dict[TopicPartition, FetchState] = {}
        wanted = []
        for key, state in self.states.items():
            if self.quota is not None and self.quota.should_throttle(
                state.partition.log.config, key[1], in_sync=state.lag == 0
            ):
                continue
            partition_log = state.partition.log
            sent[key] = FetchState(state.partition, state.leader_epoch, state.fetch_offset)
            latest_epoch = partition_log.latest_epoch
            last_fetched_epoch = NO_EPOCH if latest_epoch is None else latest_epoch
            log_start_offset = partition_log.log_start_offset
            wanted_here = self._requests.get(key)
            if (  # a partition's request is made again only when it changed
                wanted_here is None
                or wanted_here.fetch_offset != state.fetch_offset
                or wanted_here.current_leader_epoch != state.leader_epoch
                or wanted_here.last_fetched_epoch != last_fetched_epoch
                or wanted_here.log_start_offset != log_start_offset
            ):
                wanted_here = self._requests[key] = FetchPartitionRequest(
                    key[0],
                    key[1],
                    state.fetch_offset,
                    self.settings.max_bytes,
                    current_leader_epoch=state.leader_epoch,
                    last_fetched_epoch=last_fetched_epoch,
                    log_start_offset=log_start_offset,
                )
            wanted.append(wanted_here)
        data = self.session.build(wanted)
        if not data.session_partitions and not data.to_forget:
            return None
        topics: dict[str, list[Any]] = {}
        for partition in data.to_send:
            topics.setdefault(partition.topic, []).append(
                fetch_request.FetchPartition(
                    partition=partition.partition,
                    current_leader_epoch=partition.current_leader_epoch,
                    fetch_offset=partition.fetch_offset,
                    last_fetched_epoch=partition.last_fetched_epoch,
                    log_start_offset=partition.log_start_offset,
                    partition_max_bytes=partition.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in data.to_forget:
            forgotten.setdefault(topic, []).append(index)
        request = fetch_request.FetchRequest(
            cluster_id=None,
            replica_id=self.broker_id,
            max_wait=timedelta(milliseconds=self.settings.wait_max_ms),
            min_bytes=self.settings.min_bytes,
            max_bytes=self.settings.response_max_bytes,
            isolation_level=READ_UNCOMMITTED,
            session_id=data.session_id,
            session_epoch=data.session_epoch,
            topics=tuple(
                fetch_request.FetchTopic(topic=name, partitions=tuple(partitions))
                for name, partitions in topics.items()
            ),
            forgotten_topics_data=tuple(
                fetch_request.ForgottenTopic(topic=name, partitions=tuple(indexes))
                for name, indexes in forgotten.items()
            ),
            rack_id="",
        )
        return request, sent

    async def _process(self, response: Any, sent: dict[TopicPartition, FetchState]) -> None:
        fetched = self.session.handle_response(response)
        if fetched is None:
            # Dropped (a session error or an answer that does not fit the session): the next
            # request is a full one.
            log.info(
                "broker %d: fetch from leader %d answered %s; restarting the fetch session",
                self.broker_id,
                self.leader_id,
                response.error_code.name,
            )
            await asyncio.sleep(self.settings.backoff_ms / 1000)
            return
        pause_s = 0.0
        for key, data in fetched.items():
            if not data.in_response:
                continue  # an incremental answer left it out: nothing new
            before = sent.get(key)
            current = self.states.get(key)
            if before is None or current is None or current != before:
                continue  # the state changed while the request was out: stale
            try:
                pause_s = max(pause_s, await self._apply(current, data))
            except OdradekError as e:
                log.warning("%s-%d: cannot apply fetched data: %s", *key, e)
                pause_s = self.settings.backoff_ms / 1000
        if pause_s:
            await asyncio.sleep(pause_s)

    async def _apply(self, state: FetchState, data: FetchedPartition) -> float:
        """Apply one partition's answer; how long the fetcher should pause after (seconds)."""
        partition = state.partition
        error = data.error
        if error == ErrorCode.none:
            diverging = data.diverging_epoch
            if diverging is not None:
                offset = truncation_offset(partition, *diverging)
                await partition.truncate_to(offset)
                state.fetch_offset = partition.log.log_end_offset
                return 0.0
            records = data.records
            if records:
                info = await partition.append_as_follower(records, self.workers)
                if info is None:
                    return 0.0  # it became leader meanwhile: its fetch state goes soon
                if self.quota is not None and self.quota.is_throttled(
                    partition.log.config, partition.index
                ):
                    self.quota.record(memoryview(records).nbytes)
                if self.metrics is not None and self.broker_id in partition.state.adding_replicas:
                    self.metrics.reassignment_bytes.inc(memoryview(records).nbytes)
            state.fetch_offset = partition.log.log_end_offset
            if records or state.lag is None:
                state.lag = max(data.high_watermark - partition.log.log_end_offset, 0)
            if data.log_start_offset > partition.log.log_start_offset:
                partition.log.advance_log_start_offset(
                    min(data.log_start_offset, partition.log.high_watermark)
                )
            partition.update_follower_high_watermark(data.high_watermark)
            if self.metrics is not None:
                lag = max(data.high_watermark - partition.log.log_end_offset, 0)
                self.metrics.set_replica_lag(partition.topic, partition.index, lag)
            return 0.0
        if error == ErrorCode.offset_out_of_range:
            await self._reset_out_of_range(state)
            return 0.0
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower):
            # We are behind the controller's news: stop until a LeaderAndIsr says more.
            log.info("%s: leader %d answered %s", partition.name, self.leader_id, error.name)
            self.remove(state.key)
            return 0.0
        if error in LEADER_NOT_READY:
            # The leader has not applied the controller's news yet (a new partition, a new
            # epoch): it will within moments, so ask again soon, not after a whole backoff.
            log.debug("%s: leader %d answered %s", partition.name, self.leader_id, error.name)
            return min(LEADER_NOT_READY_RETRY_S, self.settings.backoff_ms / 1000)
        log.info(
            "%s: leader %d answered %s; backing off", partition.name, self.leader_id, error.name
        )
        return self.settings.backoff_ms / 1000

    async def _reset_out_of_range(self, state: FetchState) -> None:
        """The fetch offset is outside the leader's log: ask where it starts and ends."""
        partition = state.partition
        earliest, latest = await self._leader_offsets(partition)
        log_end_offset = partition.log.log_end_offset
        if earliest is None or latest is None:
            return  # asked again at the next fetch
        if log_end_offset > latest:
            # The leader has less than we do (after an unclean election): cut back to its end;
            # the next fetch compares epochs again from there.
            await partition.truncate_to(max(latest, partition.log.log_start_offset))
        else:
            # Our log ends before the leader's starts, or no epoch of ours is in its log (it
            # cannot tell where we diverge): nothing we hold can be checked, start over at its
            # log start.
            log.warning(
                "%s: offset %d out of the leader's range [%d, %d]; restarting at %d",
                partition.name,
                log_end_offset,
                earliest,
                latest,
                earliest,
            )
            await partition.truncate_fully_and_start_at(earliest)
        state.fetch_offset = partition.log.log_end_offset

    async def _leader_offsets(self, partition: Partition) -> tuple[int | None, int | None]:
        connection = await self._connection()
        if connection is None:
            return None, None
        found: list[int | None] = []
        for timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            response = await connection.send(
                list_request.ListOffsetsRequest(
                    replica_id=self.broker_id,
                    isolation_level=READ_UNCOMMITTED,
                    topics=(
                        list_request.ListOffsetsTopic(
                            name=partition.topic,
                            partitions=(
                                list_request.ListOffsetsPartition(
                                    partition_index=partition.index,
                                    current_leader_epoch=partition.state.leader_epoch,
                                    timestamp=timestamp,
                                ),
                            ),
                        ),
                    ),
                )
            )
            answer = response.topics[0].partitions[0]
            found.append(answer.offset if answer.error_code == ErrorCode.none else None)
        return found[0], found[1]


def fetcher_id_of(topic: str, index: int, num_fetchers: int) -> int:
    """Which of a leader's fetchers takes a partition: stable across restarts (crc32)."""
    return zlib.crc32(f"{topic}-{index}".encode()) % num_fetchers


class ReplicaFetcherManager:
    """The fetchers of this broker, by (leader, fetcher id); see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        *,
        leader_endpoint: Callable[[int], HostPort | None],
        settings: FetcherSettings = FetcherSettings(),
        workers: Workers | None = None,
        metrics: BrokerMetrics | None = None,
        connect: Connect | None = None,
        quota: ReplicationQuota | None = None,
        tls: ssl.SSLContext | None = None,
    ):
        self.broker_id = broker_id
        self.tls = tls  # to the leaders' inter-broker listener; None: plaintext
        self.leader_endpoint = leader_endpoint
        self.quota = quota
        self.settings = settings
        self.workers = workers
        self.metrics = metrics
        self.connect = connect or self._connect
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._closing: set[asyncio.Task[None]] = set()

    async def _connect(self, host: str, port: int) -> BrokerConnection:
        return await BrokerConnection.open(
            host,
            port,
            client_id=f"replica-fetcher-{self.broker_id}",
            request_timeout_s=self.settings.socket_timeout_ms / 1000,
            max_response_bytes=self.settings.response_max_bytes + self.settings.max_bytes + 65536,
            tls=self.tls,
        )

    def add_partition(self, partition: Partition) -> None:
        leader = partition.state.leader
        key = (leader, fetcher_id_of(partition.topic, partition.index, self.settings.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id,
                leader,
                key[1],
                leader_endpoint=self.leader_endpoint,
                settings=self.settings,
                connect=self.connect,
                workers=self.workers,
                metrics=self.metrics,
                quota=self.quota,
            )
            self.fetchers[key] = fetcher
        fetcher.add(partition)

    def remove_partition(self, topic: str, index: int) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if fetcher.remove((topic, index)) and not fetcher.states:
                del self.fetchers[key]
                closing = asyncio.ensure_future(fetcher.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.close()
        for closing in list(self._closing):
            with contextlib.suppress(Exception):
                await closing
