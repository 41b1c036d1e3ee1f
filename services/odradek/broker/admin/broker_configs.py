"""DescribeConfigs and (Incremental)AlterConfigs for BROKER resources: the dynamic broker configs.

A BROKER resource is named by a broker id (that broker's own configs, which only that broker
serves, as in Kafka's ZooKeeper mode) or by "" (the cluster-wide default, which any broker
serves). The dynamic configs are stored as Kafka stores them:

    set    /config/brokers/<id>  or  /config/brokers/<default>   at the version read
    create /config/changes/config_change_<seq>   {"version":2,"entity_path":"brokers/<id>"}

in one ZooKeeper transaction (compare-and-set; a lost race reads again), and every broker applies
them within moments (``broker/broker_configs.py``). Only the replication throttle rates can be
set (``config/throttle.py``); any other key is INVALID_REQUEST, worded as Kafka's
``ZkAdminManager`` words it: "Invalid config value for resource ConfigResource(type=BROKER,
name='1'): Cannot update these configs dynamically: Set(num.partitions) ...". AlterConfigs
replaces the entity's configs; IncrementalAlterConfigs applies SET and DELETE (APPEND and
SUBTRACT are for lists: refused).

DescribeConfigs of a broker id lists its static keys (read-only) and the dynamic ones with their
source: DYNAMIC_BROKER_CONFIG (its own node), DYNAMIC_DEFAULT_BROKER_CONFIG (the default node),
else DEFAULT_CONFIG (Long.MAX_VALUE: unthrottled); of "" only the keys the default node sets.

Runs on the broker's event loop (ZooKeeper calls are awaited).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from odradek.broker.admin.config_entries import (
    ConfigDescription,
    ConfigSynonym,
    Source,
    described,
)
from odradek.broker.admin.errors import WRITE_ATTEMPTS_MAX, AdminRequestError, ConcurrentUpdateError
from odradek.config.throttle import DYNAMIC_BROKER_KEYS, check_dynamic_broker_config
from odradek.errors import InvalidConfigError
from odradek.zk.client import CreateOp, SetDataOp, ZkClient
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.zk.paths import (
    ConfigChangeNotification,
    EntityConfig,
    broker_config_entity,
    broker_config_path,
    config_change_path_prefix,
)

__all__ = ["describe_dynamic_rows", "read_dynamic_configs", "write_dynamic_configs"]

log = logging.getLogger(__name__)

# (name, op, value) with op one of "SET", "DELETE", "APPEND", "SUBTRACT"
Operation = tuple[str, str, str | None]


async def read_dynamic_configs(
    zk: ZkClient, broker_id: int | None
) -> tuple[dict[str, str], int | None]:
    """The entity's stored dynamic configs that Odradek knows, and its znode version."""
    return await read_entity_config(
        zk, broker_config_path(broker_id), DYNAMIC_BROKER_KEYS, "keys that are not dynamic here"
    )


async def read_entity_config(
    zk: ZkClient, path: str, known: Collection[str], unknown_are: str
) -> tuple[dict[str, str], int | None]:
    """The configs stored at ``path`` (``/config/<type>/<name>``) whose keys are ``known``, and
    the znode's version (None: no znode); other keys are logged as ``unknown_are`` and left."""
    try:
        data, stat = await zk.aget(path)
    except NoNodeError:
        return {}, None
    stored = EntityConfig.decode(data, path).config
    unknown = sorted(set(stored) - set(known))
    if unknown:
        log.warning("%s: ignoring %s: %s", path, unknown_are, unknown)
    return {k: v for k, v in stored.items() if k in known}, stat.version


def describe_dynamic_rows(
    own: Mapping[str, str] | None,
    default: Mapping[str, str],
    *,
    keys: Collection[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigDescription]:
    """Rows of the dynamic keys: of a broker (``own`` given) or of the default entity (None)."""
    rows = []
    for key in DYNAMIC_BROKER_KEYS.values():
        if keys is not None and key.name not in keys:
            continue
        synonyms = []
        if own is not None and key.name in own:
            synonyms.append(ConfigSynonym(key.name, own[key.name], Source.DYNAMIC_BROKER_CONFIG))
        if key.name in default:
            synonyms.append(
                ConfigSynonym(key.name, default[key.name], Source.DYNAMIC_DEFAULT_BROKER_CONFIG)
            )
        if own is None and not synonyms:
            continue  # the default entity lists only what it sets, as Kafka does
        synonyms.append(
            ConfigSynonym(key.name, key.to_string(key.parse(key.default)), Source.DEFAULT_CONFIG)
        )
        rows.append(
            described(
                key,
                synonyms[0].value,
                synonyms,
                read_only=False,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return rows


def replaced(resource: object, configs: Sequence[tuple[str, str | None]]) -> Callable:
    """AlterConfigs: the entity's configs become exactly ``configs``."""
    props = dict(configs)

    def compute(current: Mapping[str, str]) -> dict[str, str]:
        return _checked(resource, props)

    return compute


def altered(resource: object, ops: Sequence[Operation]) -> Callable:
    """IncrementalAlterConfigs: SET and DELETE applied to the entity's configs."""

    def compute(current: Mapping[str, str]) -> dict[str, str]:
        new = dict(current)
        for name, op, value in ops:
            if op in ("APPEND", "SUBTRACT"):
                verb = op.lower()
                raise AdminRequestError(
                    f"Config value {verb} is not allowed for config key: {name}"
                )
            if op == "SET":
                new[name] = value
            else:
                new.pop(name, None)  # deleting what is not there removes nothing, as in Kafka
        return _checked(resource, new)

    return compute


def _checked(resource: object, props: Mapping[str, object]) -> dict[str, str]:
    try:
        return check_dynamic_broker_config(props)
    except InvalidConfigError as e:
        raise AdminRequestError(f"Invalid config value for resource {resource}: {e}") from e


async def write_dynamic_configs(
    zk: ZkClient,
    broker_id: int | None,
    compute: Callable[[Mapping[str, str]], dict[str, str]],
    validate_only: bool,
) -> None:
    """Read-modify-write of the entity's configs with its notification; see the top."""
    path = broker_config_path(broker_id)
    for _ in range(WRITE_ATTEMPTS_MAX):
        current, version = await read_dynamic_configs(zk, broker_id)
        new = compute(current)
        if validate_only:
            return
        data = EntityConfig(new).encode()
        config_op = (
            CreateOp(path, data) if version is None else SetDataOp(path, data, version=version)
        )
        notification = ConfigChangeNotification.for_entity(
            "brokers", broker_config_entity(broker_id)
        ).encode()
        try:
            await zk.atransaction(
                [config_op, CreateOp(config_change_path_prefix(), notification, sequence=True)]
            )
        except (BadVersionError, NodeExistsError):
            continue  # another alteration won: read again and re-apply ours
        log.info("%s: dynamic broker configs are now %s", path, new)
        return
    raise ConcurrentUpdateError(f"{path} kept changing while it was being altered")
