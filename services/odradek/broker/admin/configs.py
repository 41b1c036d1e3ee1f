"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (and this broker).

A topic's overrides live in ``/config/topics/<t>`` (``{"version":1,"config":{...}}``); every
broker applies them on top of its own defaults. A change is one ZooKeeper transaction:

    check  /brokers/topics/<t>                       (the topic still exists)
    set    /config/topics/<t>   at the version read   (create it if it was missing)
    create /config/changes/config_change_<seq>        {"version":2,"entity_path":"topics/<t>"}

Kafka writes the last two one after the other; here the notification exists exactly when the
change does, and two concurrent alterations cannot lose one another's keys (the loser reads
again and re-applies its operations). Brokers (``odradek.broker.topic_configs``) re-read a
topic's overrides when a notification names it.

Errors follow Kafka 3.x in ZooKeeper mode (``ZkAdminManager``): an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, an unknown key INVALID_CONFIG ("Unknown topic config name: x"), and a
bad value INVALID_REQUEST ("Invalid config value for resource ConfigResource(type=TOPIC,
name='t'): Invalid value ..."). AlterConfigs replaces all of a topic's overrides;
IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT to them. A
``min.insync.replicas`` above the topic's replication factor is INVALID_CONFIG; without one, a
larger broker default is stored as the RF (``validation.fit_min_insync_replicas``).

A resource named twice in one alteration request is refused, every occurrence INVALID_REQUEST
(``DUPLICATE_RESOURCE``), and so is a key named twice in one resource, as Kafka's
``ConfigAdminManager.preprocess`` refuses them. Bounded work (issue 23): 1 MB names 142,000
resources (or keys); they are checked and altered in time slices (``time_slices``), the topics
that exist listed once per request (an unknown topic costs no ZooKeeper read: 142,000 of them
took 2 minutes), refusals logged in a bounded number of lines (``observability.refusals``).

Broker resources (a broker id, or "" for the cluster-wide default) are the dynamic broker
configs, stored in ``/config/brokers/<id>`` and ``/config/brokers/<default>``: only the
replication throttle rates can be changed; ``broker_configs.py`` describes and writes them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from odradek.broker.admin import broker_configs
from odradek.broker.admin.config_entries import (
    ConfigDescription,
    describe_broker_config,
    describe_topic_config,
)
from odradek.broker.admin.errors import (
    WRITE_ATTEMPTS_MAX,
    AdminRequestError,
    ConcurrentUpdateError,
    NoZooKeeperError,
    error_of,
)
from odradek.broker.admin.validation import (
    BrokerDefaults,
    check_config_names,
    fit_min_insync_replicas,
    replication_factor_of,
    topic_overrides,
    validate_topic_name,
)
from odradek.config.broker import BrokerConfig
from odradek.config.keys import ConfigType
from odradek.config.topic import CONFIG_KEYS, TopicConfig, alter_overrides
from odradek.errors import ErrorCode, InvalidConfigError, OdradekError, UnknownTopicOrPartitionError
from odradek.observability.refusals import RefusalLog
from odradek.time_slices import TimeSlices, sliced
from odradek.zk.client import ANY_VERSION, CheckOp, CreateOp, SetDataOp, ZkClient
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.zk.paths import (
    TOPICS_PATH,
    ConfigChangeNotification,
    EntityConfig,
    TopicAssignment,
    config_change_path_prefix,
    topic_config_path,
    topic_path,
)

__all__ = [
    "DUPLICATE_RESOURCE",
    "AlterOp",
    "AlterResult",
    "ConfigAdmin",
    "ConfigResource",
    "DescribeResult",
    "IncrementalAlteration",
    "ResourceType",
]

log = logging.getLogger(__name__)

DUPLICATE_RESOURCE = "Each resource must appear at most once."  # Kafka's (ConfigAdminManager)


class ResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` wire values."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterOp(IntEnum):
    """IncrementalAlterConfigs' ``config_operation`` (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A resource as a request names it, with what to describe or to set.

    ``keys``: DescribeConfigs' filter (None: every key). ``configs``: AlterConfigs' new values
    (name, value). ``ops``: IncrementalAlterConfigs' (name, operation, value).
    """

    resource_type: int
    name: str
    keys: tuple[str, ...] | None = None
    configs: tuple[tuple[str, str | None], ...] = ()
    ops: tuple[IncrementalAlteration, ...] = ()

    def __str__(self) -> str:  # as Kafka's ConfigResource prints itself
        return f"ConfigResource(type={_type_name(self.resource_type)}, name='{self.name}')"


@dataclass(frozen=True, slots=True)
class IncrementalAlteration:
    name: str
    op: int
    value: str | None


@dataclass(frozen=True, slots=True)
class DescribeResult:
    resource_type: int
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    configs: tuple[ConfigDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterResult:
    resource_type: int
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return ResourceType.UNKNOWN.name


class ConfigAdmin:
    """Configuration requests served by broker ``broker_id``; see the module docstring."""

    def __init__(self, zk: ZkClient | None, broker_id: int, config: BrokerConfig | None):
        self.zk = zk
        self.broker_id = broker_id
        self.config = config
        self.defaults = BrokerDefaults.of(config).topic_config

    def _zk(self) -> ZkClient:
        if self.zk is None:
            raise NoZooKeeperError("this broker is not connected to ZooKeeper")
        return self.zk

    # --- DescribeConfigs -------------------------------------------------------------------

    async def describe(
        self,
        resources: Sequence[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        slices: TimeSlices | None = None,
    ) -> list[DescribeResult]:
        results = []
        async for resource in sliced(resources, slices):
            flags = {
                "keys": resource.keys,
                "include_synonyms": include_synonyms,
                "include_documentation": include_documentation,
            }
            try:
                if resource.resource_type == ResourceType.TOPIC:
                    config, overrides = await self._topic_config(resource.name)
                    rows = describe_topic_config(config, overrides, self.config, **flags)
                elif resource.resource_type == ResourceType.BROKER:
                    rows = await self._broker_rows(resource.name, flags)
                else:
                    raise AdminRequestError(
                        f"Unsupported resource type: {_type_name(resource.resource_type)}"
                    )
                results.append(
                    DescribeResult(resource.resource_type, resource.name, configs=tuple(rows))
                )
            except Exception as e:
                code, message = error_of(e, f"describing {resource}")
                results.append(DescribeResult(resource.resource_type, resource.name, code, message))
        return results

    async def _topic_config(self, topic: str) -> tuple[TopicConfig, dict[str, str]]:
        validate_topic_name(topic)
        zk = self._zk()
        if await zk.aexists(topic_path(topic)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        overrides, _ = await self._read_overrides(zk, topic)
        config = TopicConfig.from_properties(overrides, self.defaults)
        return config, overrides

    async def _broker_rows(self, name: str, flags: dict) -> list[ConfigDescription]:
        if name != "":
            self._check_broker_id(name, describing=True)
        if self.config is None:
            return []  # a broker without a configuration (tests): nothing to list
        own: dict[str, str] = {}
        default: dict[str, str] = {}
        if self.zk is not None:  # None: a broker without a cluster (tests), nothing set
            default, _ = await broker_configs.read_dynamic_configs(self.zk, None)
            own, _ = await broker_configs.read_dynamic_configs(self.zk, self.broker_id)
        if name == "":
            return broker_configs.describe_dynamic_rows(None, default, **flags)
        static = describe_broker_config(self.config, **flags)
        return static + broker_configs.describe_dynamic_rows(own, default, **flags)

    def _check_broker_id(self, name: str, *, describing: bool) -> None:
        try:
            broker_id = int(name)
        except ValueError:
            raise AdminRequestError(f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.broker_id:
            also = " or empty string" if describing else ""
            raise AdminRequestError(
                f"Unexpected broker id, expected {self.broker_id}{also}, but received {name}"
            )

    async def _read_overrides(self, zk: ZkClient, topic: str) -> tuple[dict[str, str], int | None]:
        """The topic's stored overrides that Odradek knows, and the znode version (None: none)."""
        return await broker_configs.read_entity_config(
            zk, topic_config_path(topic), CONFIG_KEYS, "keys Odradek does not know"
        )

    # --- AlterConfigs and IncrementalAlterConfigs ------------------------------------------

    async def alter(
        self,
        resources: Sequence[ConfigResource],
        *,
        validate_only: bool,
        slices: TimeSlices | None = None,
    ) -> list[AlterResult]:
        """AlterConfigs: each topic's overrides become exactly ``resource.configs``."""
        return await self._alter_all(resources, validate_only, False, slices)

    async def incremental_alter(
        self,
        resources: Sequence[ConfigResource],
        *,
        validate_only: bool,
        slices: TimeSlices | None = None,
    ) -> list[AlterResult]:
        """IncrementalAlterConfigs: ``resource.ops`` applied to each topic's overrides."""
        return await self._alter_all(resources, validate_only, True, slices)

    async def _alter_all(
        self,
        resources: Sequence[ConfigResource],
        validate_only: bool,
        incremental: bool,
        slices: TimeSlices | None,
    ) -> list[AlterResult]:
        """Each resource altered in turn, in time slices; the topics that exist are listed once
        for the request (``_existing_topics``), so an unknown one costs no ZooKeeper read."""
        slices = slices if slices is not None else TimeSlices()
        existing = None
        if self.zk is not None and any(r.resource_type == ResourceType.TOPIC for r in resources):
            existing = await self._existing_topics()
        refusals = RefusalLog(log, "IncrementalAlterConfigs" if incremental else "AlterConfigs")
        results = []
        async for resource in sliced(resources, slices):
            result = await self._alter_one(resource, validate_only, incremental, existing, slices)
            if result.error != ErrorCode.none:
                refusals.refused(resource, result.error, result.message)
            results.append(result)
        refusals.close()
        return results

    async def _existing_topics(self) -> frozenset[str] | None:
        """The topics ``/brokers/topics`` lists now; None if it cannot be read (each topic is
        then read on its own, and answers its own error)."""
        try:
            return frozenset(await self._zk().achildren(TOPICS_PATH))
        except Exception as e:  # noqa: BLE001 - the per-topic reads say what is wrong
            log.info("listing the topics for a config alteration: %s", e)
            return None

    async def _alter_one(
        self,
        resource: ConfigResource,
        validate_only: bool,
        incremental: bool,
        existing: frozenset[str] | None,
        slices: TimeSlices,
    ) -> AlterResult:
        try:
            if incremental:
                await _check_operations(resource.ops, slices)
            else:
                await _check_config_entries(resource.configs, slices)
            if resource.resource_type == ResourceType.TOPIC:
                compute = (
                    _incremental(resource, self.defaults)
                    if incremental
                    else _replace(resource, self.defaults)
                )
                await self._write_overrides(resource.name, compute, validate_only, existing)
            elif resource.resource_type == ResourceType.BROKER:
                broker_id = None
                if resource.name != "":
                    self._check_broker_id(resource.name, describing=False)
                    broker_id = self.broker_id
                compute = (
                    broker_configs.altered(
                        resource,
                        [(op.name, AlterOp(op.op).name, op.value) for op in resource.ops],
                    )
                    if incremental
                    else broker_configs.replaced(resource, resource.configs)
                )
                await broker_configs.write_dynamic_configs(
                    self._zk(), broker_id, compute, validate_only
                )
            else:
                raise AdminRequestError(
                    "AlterConfigs is only supported for topics and brokers, but resource type "
                    f"is {_type_name(resource.resource_type)}"
                )
            return AlterResult(resource.resource_type, resource.name)
        except Exception as e:
            code, message = error_of(e, resource)  # formatted only if logged: 142,000 a request
            return AlterResult(resource.resource_type, resource.name, code, message)

    async def _write_overrides(
        self,
        topic: str,
        compute: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool,
        existing: frozenset[str] | None = None,
    ) -> None:
        """Read-modify-write of the topic's overrides, with its notification; see the top.
        ``existing``: the topics listed for this request (None: not listed)."""
        zk = self._zk()
        missing = UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
        try:
            validate_topic_name(topic)
        except OdradekError as e:
            raise missing from e
        if existing is not None and topic not in existing:
            raise missing
        try:
            data, _ = await zk.aget(topic_path(topic))
        except NoNodeError as e:
            raise missing from e
        replication_factor = replication_factor_of(TopicAssignment.decode(data, topic_path(topic)))
        path = topic_config_path(topic)
        for _ in range(WRITE_ATTEMPTS_MAX):
            current, version = await self._read_overrides(zk, topic)
            new = fit_min_insync_replicas(
                topic, compute(current), self.defaults, replication_factor
            )
            if validate_only:
                return
            data = EntityConfig(new).encode()
            config_op = (
                CreateOp(path, data) if version is None else SetDataOp(path, data, version=version)
            )
            notification = ConfigChangeNotification.for_entity("topics", topic).encode()
            try:
                await zk.atransaction(
                    [
                        CheckOp(topic_path(topic), ANY_VERSION),
                        config_op,
                        CreateOp(config_change_path_prefix(), notification, sequence=True),
                    ]
                )
            except NoNodeError as e:
                if e.path == topic_path(topic):
                    raise missing from e
                raise
            except (BadVersionError, NodeExistsError):
                continue  # another alteration won: read again and re-apply ours
            log.info("topic %s: overrides are now %s", topic, new)
            return
        raise ConcurrentUpdateError(f"{path} kept changing while it was being altered")


def _invalid_value(resource: ConfigResource, error: InvalidConfigError) -> AdminRequestError:
    return AdminRequestError(f"Invalid config value for resource {resource}: {error}")


def _replace(
    resource: ConfigResource, base: TopicConfig
) -> Callable[[dict[str, str]], dict[str, str]]:
    props = dict(resource.configs)

    def compute(current: dict[str, str]) -> dict[str, str]:
        check_config_names(props)
        try:
            return topic_overrides(props, base)[0]
        except InvalidConfigError as e:
            raise _invalid_value(resource, e) from e

    return compute


async def repeated_resources(
    resources: Iterable[ConfigResource], slices: TimeSlices | None = None
) -> set[tuple[int, str]]:
    """The (type, name) of the resources named more than once: Kafka's
    ``ConfigAdminManager.preprocess`` answers each of their occurrences INVALID_REQUEST,
    ``DUPLICATE_RESOURCE``, before anything else is looked at."""
    seen: set[tuple[int, str]] = set()
    repeated: set[tuple[int, str]] = set()
    async for r in sliced(resources, slices):
        key = (r.resource_type, r.name)
        if key in seen:
            repeated.add(key)
        seen.add(key)
    return repeated


async def _check_config_entries(
    configs: Sequence[tuple[str, str | None]], slices: TimeSlices
) -> None:
    """AlterConfigs' request-level checks (Kafka's ``preprocess``): no key twice, no null."""
    if not configs:  # most resources of a large request: no generator, no counter
        return
    counts: Counter[str] = Counter()
    nulls = []
    async for name, value in sliced(configs, slices):
        counts[name] += 1
        if value is None:
            nulls.append(name)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise AdminRequestError(f"Error due to duplicate config keys : {','.join(duplicates)}")
    if nulls:
        raise AdminRequestError(f"Null value not supported for : {','.join(nulls)}")


OPERATIONS = frozenset(kind.value for kind in AlterOp)


async def _check_operations(ops: Sequence[IncrementalAlteration], slices: TimeSlices) -> None:
    """Kafka's request-level checks: no key twice, no null value except for DELETE."""
    if not ops:
        return
    counts: Counter[str] = Counter()
    async for op in sliced(ops, slices):
        counts[op.name] += 1
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise AdminRequestError(f"Error due to duplicate config keys : {','.join(duplicates)}")
    nulls = []
    async for op in sliced(ops, slices):
        if op.op not in OPERATIONS:
            raise AdminRequestError(f"Unknown config operation {op.op} for {op.name}")
        if op.value is None and op.op != AlterOp.DELETE:
            nulls.append(f"{AlterOp(op.op).name}:{op.name}")
    if nulls:
        raise AdminRequestError(f"Null value not supported for : {','.join(nulls)}")


def _incremental(
    resource: ConfigResource, base: TopicConfig
) -> Callable[[dict[str, str]], dict[str, str]]:
    ops = resource.ops

    def of(kind: AlterOp) -> dict[str, str | None]:
        return {op.name: op.value for op in ops if op.op == kind}

    def compute(current: dict[str, str]) -> dict[str, str]:
        # DELETE of a key Odradek does not know removes nothing, as in Kafka; others must exist.
        check_config_names(op.name for op in ops if op.op != AlterOp.DELETE)
        for op in ops:
            if (
                op.op in (AlterOp.APPEND, AlterOp.SUBTRACT)
                and CONFIG_KEYS[op.name].type is not ConfigType.LIST
            ):
                verb = "append" if op.op == AlterOp.APPEND else "subtract"
                raise AdminRequestError(
                    f"Config value {verb} is not allowed for config key: {op.name}"
                )
        try:
            return alter_overrides(
                current,
                set_=of(AlterOp.SET),
                delete=[name for name in of(AlterOp.DELETE) if name in CONFIG_KEYS],
                append=of(AlterOp.APPEND),
                subtract=of(AlterOp.SUBTRACT),
                base=base,
            )[0]
        except InvalidConfigError as e:
            raise _invalid_value(resource, e) from e

    return compute
