"""CreateTopics, DeleteTopics and CreatePartitions: validate, then write ZooKeeper as Kafka does.

What is written (``docs/zookeeper.md`` has the formats):

- CreateTopics: ``/config/topics/<t>`` (the overrides, ``{}`` if none) and then
  ``/brokers/topics/<t>`` (the assignment, version 3 with a new topic id) in **one** ZooKeeper
  transaction, so the controller never sees a topic without its configuration, and two brokers
  creating the same topic cannot both succeed (the second gets NODE_EXISTS: TOPIC_ALREADY_EXISTS).
  A leftover config node (a topic deleted while its config stayed) is overwritten by version.
- DeleteTopics: the empty ``/admin/delete_topics/<t>``, in a transaction with a check that the
  topic still exists; the controller deletes the rest. Asking twice is not an error.
- CreatePartitions: ``/brokers/topics/<t>`` rewritten with the new partitions added, only if it
  is still at the version that was read (a concurrent change makes us read and decide again).

The znodes written, the controller elects leaders and tells every broker (UpdateMetadata).
CreateTopics answers once the receiving broker's metadata has a leader for every new partition,
or when the request's ``timeout_ms`` runs out (REQUEST_TIMED_OUT for the topics still without
one), as Kafka's ``DelayedCreatePartitions``: a client that asks this broker for Metadata right
after the answer finds the topic (KafkaJS's ``admin.createTopics()`` does). A timeout of 0, or
``validate_only``, answers once written (Kafka's rule too).

Live brokers, for placement, are the children of ``/brokers/ids`` with their racks. Their
replica budgets, against the replicas all assignments give them, must hold a new topic's or
partitions' replicas (``replica_capacity``): checked before anything is written, refused with
POLICY_VIOLATION.

Every entry is answered on its own: one bad topic does not fail the others.

Bounded work (issue 23): a request may name 77,000 topics in 1 MB. The topics that exist are
listed once per request (with the assignments the replica budgets need anyway), not looked up
one ZooKeeper read per topic (at 1 MB: minutes, 14 s at a tenth of it); the entries are
checked, planned and answered in time slices (``time_slices``); refusals are logged in a bounded
number of lines (``observability.refusals``). One request adds at most
``replica_capacity.REQUEST_PARTITIONS_MAX`` partitions, so at most that many topics are written.

The client's ``controller_mutation_rate`` quota (``broker.mutation_quota``, given by the handler)
counts each topic's partitions once it has passed validation, just before it is written: the
partitions created, added, or (DeleteTopics) the topic's partitions as its assignment says; a
validate-only request and a topic refused before that count nothing. A strict quota already
exhausted refuses the topic (THROTTLING_QUOTA_EXCEEDED) and nothing is written for it. As in
Kafka's ``ZkAdminManager``, a topic counted and then lost to a concurrent writer stays counted,
and so does a DeleteTopics of a topic already marked for deletion.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from odradek.broker.admin.config_entries import ConfigDescription, describe_topic_config
from odradek.broker.admin.errors import (
    WRITE_ATTEMPTS_MAX,
    AdminRequestError,
    ConcurrentUpdateError,
    InvalidTopicError,
    NoZooKeeperError,
    TopicDeletionDisabledError,
    TopicExistsError,
    error_of,
)
from odradek.broker.admin.replica_capacity import ReplicaCapacity
from odradek.broker.admin.validation import (
    MIN_INSYNC_REPLICAS,
    BrokerDefaults,
    NewTopic,
    TopicPlan,
    placeable_size,
    plan_new_partitions,
    plan_topic,
    validate_topic_name,
)
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.mutation_quota import UNBOUNDED, MutationQuota
from odradek.config.broker import BrokerConfig
from odradek.errors import ErrorCode, UnknownTopicOrPartitionError
from odradek.observability.refusals import RefusalLog
from odradek.time_slices import TimeSlices, sliced
from odradek.zk.client import ANY_VERSION, CheckOp, CreateOp, SetDataOp, ZkClient
from odradek.zk.codec import random_topic_id
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.zk.paths import (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    BrokerInfo,
    EntityConfig,
    TopicAssignment,
    broker_id_from_name,
    broker_path,
    delete_topic_path,
    topic_config_path,
    topic_path,
)

__all__ = [
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteTopicResult",
    "NewPartitions",
    "TopicAdmin",
    "TopicRef",
    "topic_id_to_uuid",
    "wait_for_leaders",
]

log = logging.getLogger(__name__)

CREATE_TOPICS_WAIT_MS_MAX = 600_000  # a CreateTopics waits for leaders at most this long
# A Metadata request auto-creates at most this many topics; the others it names stay
# UNKNOWN_TOPIC_OR_PARTITION (retriable: the client's next Metadata creates the next ones).
AUTO_CREATE_TOPICS_PER_REQUEST_MAX = 10

E = TypeVar("E")
R = TypeVar("R")
Brokers = dict[int, str | None]  # each live broker's rack


@dataclass(frozen=True, slots=True)
class _Each:
    """How ``TopicAdmin._each`` names one API: in the refusal log, a duplicate's message, and
    what an error was doing (followed by the topic's name)."""

    api: str
    duplicate: str
    doing: str


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[ConfigDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicRef:
    """A DeleteTopics entry: a name, or (v6+) a topic id."""

    name: str | None
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None = None
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """A CreatePartitions entry: the new total, and optionally the new partitions' replicas."""

    topic: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


async def wait_for_leaders(
    cache: MetadataCache, results: Sequence[CreateTopicResult], timeout_ms: int
) -> list[CreateTopicResult]:
    """``results`` once ``cache`` has a leader for every partition of each created topic.

    Waits at most ``timeout_ms`` (capped at ``CREATE_TOPICS_WAIT_MS_MAX``); a topic still
    without leaders then is REQUEST_TIMED_OUT (it was created, and will get them).
    """

    def live(result: CreateTopicResult) -> bool:
        topic = cache.topic(result.name)
        return (
            topic is not None
            and topic.topic_id == topic_id_to_uuid(result.topic_id)
            and len(topic.partitions) == result.num_partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        )

    created = [r for r in results if r.error == ErrorCode.none and r.topic_id is not None]
    if not created or timeout_ms <= 0:
        return list(results)
    wait_s = min(timeout_ms, CREATE_TOPICS_WAIT_MS_MAX) / 1000
    if await cache.wait_until(lambda: all(live(r) for r in created), wait_s):
        return list(results)
    answered = []
    for r in results:
        if r in created and not live(r):
            log.info("CreateTopics %r: no leaders here within %d ms", r.name, timeout_ms)
            r = dataclasses.replace(
                r,
                error=ErrorCode.request_timed_out,
                message=(
                    f"Topic '{r.name}' was created, but this broker did not learn leaders for "
                    f"all its partitions within the request's timeout ({timeout_ms} ms)."
                ),
            )
        answered.append(r)
    return answered


def topic_id_to_uuid(topic_id: str | None) -> uuid.UUID | None:
    """Kafka's topic id string (URL-safe base64 of 16 bytes) as a UUID, for the wire."""
    if topic_id is None:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


class TopicAdmin:
    """Topic changes requested through one broker; see the module docstring."""

    def __init__(
        self,
        zk: ZkClient | None,
        config: BrokerConfig | None,
        *,
        rng: random.Random | None = None,
    ):
        self.zk = zk
        self.config = config
        self.defaults = BrokerDefaults.of(config)
        # one for the request: a fresh one per topic placed costs its seeding from the OS
        self.rng = rng if rng is not None else random.Random()

    def _zk(self) -> ZkClient:
        if self.zk is None:
            raise NoZooKeeperError("this broker is not connected to ZooKeeper")
        return self.zk

    async def live_brokers(self) -> dict[int, str | None]:
        """Registered brokers (``/brokers/ids``) and their racks."""
        return {b: info.rack for b, info in (await self._broker_infos()).items()}

    async def _broker_infos(self) -> dict[int, BrokerInfo]:
        """Registered brokers (``/brokers/ids``) and their registrations."""
        zk = self._zk()
        names = await zk.achildren(BROKER_IDS_PATH)
        ids = sorted(broker_id_from_name(name) for name in names)
        found = await asyncio.gather(*(self._info(zk, b) for b in ids), return_exceptions=True)
        brokers = {}
        for broker_id, info in zip(ids, found, strict=True):
            if isinstance(info, NoNodeError):
                continue  # it left between the listing and the read
            if isinstance(info, BaseException):
                raise info
            brokers[broker_id] = info
        return brokers

    @staticmethod
    async def _info(zk: ZkClient, broker_id: int) -> BrokerInfo:
        path = broker_path(broker_id)
        data, _ = await zk.aget(path)
        return BrokerInfo.decode(data, path)

    async def _capacity(self, infos: dict[int, BrokerInfo]) -> tuple[ReplicaCapacity, set[str]]:
        """The live brokers' budgets and the replicas every assignment gives them, and the
        topics that exist (``/brokers/topics``, read once for a request)."""
        zk = self._zk()
        names = await zk.achildren(TOPICS_PATH)
        found = await asyncio.gather(
            *(zk.aget(topic_path(n)) for n in names), return_exceptions=True
        )
        hosted: Counter[int] = Counter()
        existing = set()
        for name, result in zip(names, found, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            existing.add(name)
            assignment = TopicAssignment.decode(result[0], topic_path(name))
            hosted.update(b for replicas in assignment.partitions.values() for b in replicas)
        budgets = {b: info.max_broker_partitions for b, info in infos.items()}
        return ReplicaCapacity(budgets, hosted), existing

    # --- CreateTopics ----------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool,
        quota: MutationQuota = UNBOUNDED,
        slices: TimeSlices | None = None,
    ) -> list[CreateTopicResult]:
        """One result per entry, in order. With ``validate_only`` nothing is written."""

        async def create(
            topic: NewTopic, brokers: Brokers, capacity: ReplicaCapacity, existing: set[str]
        ) -> CreateTopicResult:
            return await self._create_topic(
                topic, brokers, capacity, existing, validate_only, quota
            )

        return await self._each(
            topics,
            lambda t: t.name,
            _Each("CreateTopics", "Found multiple entries for this topic.", "creating topic"),
            create,
            CreateTopicResult,
            slices,
        )

    async def _each(
        self,
        entries: Sequence[E],
        name_of: Callable[[E], str],
        each: _Each,
        apply: Callable[[E, Brokers, ReplicaCapacity, set[str]], Awaitable[R]],
        failed: Callable[[str, ErrorCode, str | None], R],
        slices: TimeSlices | None,
    ) -> list[R]:
        """CreateTopics' and CreatePartitions' walk: the live brokers read once (failing that,
        every entry answers the error), then each entry applied in order, a topic named twice
        refused whoever asks, every refusal logged (``RefusalLog``)."""
        slices = slices if slices is not None else TimeSlices()
        counts: Counter[str] = Counter()
        async for entry in sliced(entries, slices):
            counts[name_of(entry)] += 1
        try:
            infos = await self._broker_infos()
            capacity, existing = await self._capacity(infos)
        except Exception as e:
            code, message = error_of(e, "reading the live brokers")
            return [failed(name_of(x), code, message) async for x in sliced(entries, slices)]
        brokers = {b: info.rack for b, info in infos.items()}
        refusals = RefusalLog(log, each.api)
        results = []
        async for entry in sliced(entries, slices):
            name = name_of(entry)
            try:
                if counts[name] > 1:
                    raise AdminRequestError(each.duplicate)
                results.append(await apply(entry, brokers, capacity, existing))
            except Exception as e:
                code, message = error_of(e, f"{each.doing} {name!r}")
                refusals.refused(repr(name), code, message)
                results.append(failed(name, code, message))
        refusals.close()
        return results

    async def _create_topic(
        self,
        topic: NewTopic,
        brokers: dict[int, str | None],
        capacity: ReplicaCapacity,
        existing: set[str],
        validate_only: bool,
        quota: MutationQuota,
    ) -> CreateTopicResult:
        zk = self._zk()
        validate_topic_name(topic.name)
        # As the listing read for this request says (no read per topic: a request may name
        # 77,000); one created since then is refused by the transaction that would write it.
        if topic.name in existing:
            raise TopicExistsError(f"Topic '{topic.name}' already exists.")
        size = placeable_size(topic, self.defaults, brokers)
        if size is not None:  # the room, before the placement that costs more
            partitions, replication_factor = size
            capacity.check_size(topic.name, partitions, partitions * replication_factor)
        plan = plan_topic(topic, brokers, self.defaults, self.rng)
        capacity.check(topic.name, plan.assignment)  # before anything is written
        capacity.add(plan.assignment)
        topic_id = None
        if not validate_only:
            quota.record(len(plan.assignment))
            topic_id = await self._write_new_topic(zk, plan)
        fitted = plan.overrides.get(MIN_INSYNC_REPLICAS)
        if (
            topic_id is not None
            and fitted is not None
            and MIN_INSYNC_REPLICAS not in dict(topic.configs)
        ):
            log.info(
                "topic %s: min.insync.replicas %s, its replication factor (the broker default "
                "%d is above it, and no acks=all write could succeed)",
                topic.name,
                fitted,
                self.defaults.topic_config.min_insync_replicas,
            )
        return CreateTopicResult(
            topic.name,
            topic_id=topic_id,
            num_partitions=len(plan.assignment),
            replication_factor=plan.replication_factor,
            configs=tuple(describe_topic_config(plan.config, plan.overrides, self.config)),
        )

    async def _write_new_topic(self, zk: ZkClient, plan: TopicPlan) -> str:
        topic_id = random_topic_id()
        assignment = TopicAssignment(plan.assignment, topic_id=topic_id).encode()
        config_path = topic_config_path(plan.name)
        config = EntityConfig(plan.overrides).encode()
        for _ in range(WRITE_ATTEMPTS_MAX):
            stat = await zk.aexists(config_path)
            # Kafka writes the config first, then the topic; here both or neither.
            config_op = (
                CreateOp(config_path, config)
                if stat is None
                else SetDataOp(config_path, config, version=stat.version)
            )
            try:
                await zk.atransaction([config_op, CreateOp(topic_path(plan.name), assignment)])
            except NodeExistsError as e:
                if e.path == topic_path(plan.name):
                    raise TopicExistsError(f"Topic '{plan.name}' already exists.") from e
                continue  # someone created the config node meanwhile: read it again
            except BadVersionError:
                continue
            log.info(
                "created topic %s (id %s) with assignment %s and overrides %s",
                plan.name,
                topic_id,
                plan.assignment,
                plan.overrides,
            )
            return topic_id
        raise ConcurrentUpdateError(
            f"{config_path} kept changing while topic '{plan.name}' was being created"
        )

    async def auto_create_topics(
        self, names: Sequence[str], quota: MutationQuota = UNBOUNDED
    ) -> dict[str, ErrorCode]:
        """Metadata's auto-creation, as Kafka's ``AutoTopicCreationManager`` in ZooKeeper mode.

        Each of ``names`` (valid, not internal: the caller's rule) is created with the broker's
        defaults: LEADER_NOT_AVAILABLE once it is written or if it exists meanwhile, its error
        (INVALID_REPLICATION_FACTOR, ...) otherwise. Only the first
        ``AUTO_CREATE_TOPICS_PER_REQUEST_MAX`` are tried; the rest are UNKNOWN_TOPIC_OR_PARTITION.
        """
        tried = list(dict.fromkeys(names))[:AUTO_CREATE_TOPICS_PER_REQUEST_MAX]
        answers = {name: ErrorCode.unknown_topic_or_partition for name in names}
        if not tried:
            return answers
        results = await self.create_topics(
            [NewTopic(name) for name in tried], validate_only=False, quota=quota
        )
        for result in results:
            created = result.error in (ErrorCode.none, ErrorCode.topic_already_exists)
            if result.error == ErrorCode.none:
                log.info(
                    "auto-created topic %s (Metadata from a client that allows it)", result.name
                )
            answers[result.name] = ErrorCode.leader_not_available if created else result.error
        return answers

    # --- DeleteTopics ----------------------------------------------------------------------

    async def delete_topics(
        self, topics: Sequence[TopicRef], quota: MutationQuota = UNBOUNDED
    ) -> list[DeleteTopicResult]:
        """Mark each topic for deletion by the controller; one result per entry, in order."""
        results = []
        ids: dict[uuid.UUID, str] | None = None
        for ref in topics:
            name = ref.name
            try:
                if not self.defaults.delete_topic_enable:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                if ref.topic_id is not None:
                    if name is not None:
                        raise AdminRequestError(
                            "Topic name and topic ID can not both be specified."
                        )
                    if ids is None:
                        ids = await self._topic_ids()
                    name = ids.get(ref.topic_id)
                    if name is None:
                        results.append(
                            DeleteTopicResult(
                                None,
                                ref.topic_id,
                                ErrorCode.unknown_topic_id,
                                f"Topic id {ref.topic_id} does not exist.",
                            )
                        )
                        continue
                await self._delete_topic(name, quota)
                results.append(DeleteTopicResult(name, ref.topic_id))
            except Exception as e:
                code, message = error_of(e, f"deleting topic {name!r}")
                results.append(DeleteTopicResult(name, ref.topic_id, code, message))
        return results

    async def _delete_topic(self, name: str | None, quota: MutationQuota) -> None:
        zk = self._zk()
        try:
            validate_topic_name(name)
        except InvalidTopicError as e:  # no topic can have that name
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from e
        if quota.bounded:  # its partitions are what the quota counts
            try:
                data, _ = await zk.aget(topic_path(name))
            except NoNodeError as e:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from e
            quota.record(len(TopicAssignment.decode(data, topic_path(name)).partitions))
        try:
            await zk.atransaction(
                [CheckOp(topic_path(name), ANY_VERSION), CreateOp(delete_topic_path(name))]
            )
        except NoNodeError as e:
            if e.path == topic_path(name):
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from e
            raise
        except NodeExistsError:
            log.info("topic %s is already marked for deletion", name)
            return
        log.info("marked topic %s for deletion", name)

    async def _topic_ids(self) -> dict[uuid.UUID, str]:
        """Every topic's id, read from the assignments (for DeleteTopics v6 by id)."""
        zk = self._zk()
        names = await zk.achildren(TOPICS_PATH)
        found = await asyncio.gather(
            *(zk.aget(topic_path(n)) for n in names), return_exceptions=True
        )
        ids = {}
        for name, result in zip(names, found, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            topic_id = TopicAssignment.decode(result[0], topic_path(name)).topic_id
            if topic_id is not None:
                ids[topic_id_to_uuid(topic_id)] = name
        return ids

    # --- CreatePartitions ------------------------------------------------------------------

    async def create_partitions(
        self,
        requests: Sequence[NewPartitions],
        *,
        validate_only: bool,
        quota: MutationQuota = UNBOUNDED,
        slices: TimeSlices | None = None,
    ) -> list[CreatePartitionsResult]:
        """Add partitions to existing topics; one result per entry, in order."""

        async def add(
            request: NewPartitions, brokers: Brokers, capacity: ReplicaCapacity, existing: set[str]
        ) -> CreatePartitionsResult:
            await self._create_partitions(
                request, brokers, capacity, existing, validate_only, quota
            )
            return CreatePartitionsResult(request.topic)

        return await self._each(
            requests,
            lambda r: r.topic,
            _Each("CreatePartitions", "Duplicate topic in request.", "adding partitions to"),
            add,
            CreatePartitionsResult,
            slices,
        )

    async def _create_partitions(
        self,
        request: NewPartitions,
        brokers: dict[int, str | None],
        capacity: ReplicaCapacity,
        existing: set[str],
        validate_only: bool,
        quota: MutationQuota,
    ) -> None:
        zk = self._zk()
        topic = request.topic
        missing = UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
        try:
            validate_topic_name(topic)
        except InvalidTopicError as e:
            raise missing from e
        if topic not in existing:  # the listing read for this request (no read per topic)
            raise missing
        path = topic_path(topic)
        recorded = False
        for _ in range(WRITE_ATTEMPTS_MAX):
            try:
                data, stat = await zk.aget(path)
            except NoNodeError as e:
                raise missing from e
            if await zk.aexists(delete_topic_path(topic)) is not None:
                raise InvalidTopicError("The topic is queued for deletion.")
            existing = TopicAssignment.decode(data, path)
            added = plan_new_partitions(
                topic, existing, request.count, request.assignments, brokers
            )
            capacity.check(topic, added)  # before anything is written
            if validate_only:
                capacity.add(added)
                return
            if not recorded:  # once, though a lost race decides again
                quota.record(len(added))
                recorded = True
            updated = TopicAssignment(
                {**existing.partitions, **added},
                topic_id=existing.topic_id,
                adding_replicas=existing.adding_replicas,
                removing_replicas=existing.removing_replicas,
            )
            try:
                await zk.aset(path, updated.encode(), version=stat.version)
            except BadVersionError:
                continue  # changed meanwhile (another CreatePartitions?): decide again
            except NoNodeError as e:
                raise missing from e
            log.info("topic %s: added partitions %s", topic, added)
            capacity.add(added)
            return
        raise ConcurrentUpdateError(f"{path} kept changing while adding partitions to '{topic}'")
