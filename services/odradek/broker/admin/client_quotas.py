"""AlterClientQuotas and DescribeClientQuotas on ZooKeeper, as Kafka's ``ZkAdminManager`` does.

Layout (Kafka's ``ConfigCommand``/``AdminZkClient``), names sanitized (``broker.quotas.sanitize``):

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>  the same format
    /config/clients/<client-id>               the same format
    /config/changes/config_change_<seq>       {"version":2,"entity_path":"users/alice/clients/app"}

A write is a compare-and-set of the entity's znode with its notification, in one transaction (a
lost race reads again). Keys this module does not own (a user's SCRAM credentials, written by
another tool under the same znode) are read and written back unchanged. Removing every quota
leaves ``{"config":{}}`` (or the other keys), as Kafka does.

Validation as Kafka's ``alterClientQuotas``: an empty entity, an unknown entity type, an empty
name, a combination other than user / client-id / user+client-id, a key that is not a quota key
(``Invalid configuration key <key>``) or a LONG key with a fraction (``Configuration <key> must
be a LONG value``) are INVALID_REQUEST. The DOUBLE keys (``request_percentage``,
``controller_mutation_rate``) are stored as Java's ``Double.toString`` writes them. IP quotas
(``ip``) are refused: not served.

Bounded work (issue 23): the entities that have a znode are listed once per AlterClientQuotas
request (``stored_entities``), so one without (1 MB names 77,000 users) is validated without a
ZooKeeper read of its own (7.4 s for a tenth of that before).

Runs on the broker's event loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.broker.admin.errors import WRITE_ATTEMPTS_MAX, AdminRequestError, ConcurrentUpdateError
from odradek.broker.quotas import (
    CLIENT_QUOTA_KEYS,
    DEFAULT_ENTITY,
    QuotaEntity,
    desanitize,
    sanitize,
)
from odradek.zk.client import CreateOp, SetDataOp, ZkClient
from odradek.zk.errors import BadVersionError, NodeExistsError, NoNodeError
from odradek.zk.paths import (
    CONFIG_PATH,
    ConfigChangeNotification,
    EntityConfig,
    config_change_path_prefix,
)

__all__ = [
    "CLIENT_ID",
    "USER",
    "Op",
    "alter_entity",
    "describe",
    "entity_of",
    "read_all",
    "read_entity",
    "stored_entities",
]

log = logging.getLogger(__name__)

USER = "user"  # ClientQuotaEntity.USER
CLIENT_ID = "client-id"  # ClientQuotaEntity.CLIENT_ID
IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match_type
LONG_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class Op:
    key: str
    value: float
    remove: bool


def _name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def entity_of(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The (entity_type, entity_name) pairs of a request, as a checked ``QuotaEntity``."""
    user = client = None
    seen = False
    for entity_type, entity_name in parts:
        seen = True
        if entity_type == USER:
            user = _name(entity_name)
        elif entity_type == CLIENT_ID:
            client = _name(entity_name)
        elif entity_type == IP:
            raise AdminRequestError("IP quotas are not supported by Odradek")
        else:
            raise AdminRequestError(f"Unhandled client quota entity type: {entity_type}")
        if entity_name is not None and not entity_name:
            raise AdminRequestError(f"Empty {entity_type} not supported")
    if not seen:
        raise AdminRequestError("Invalid empty client quota entity")
    if user is None and client is None:
        raise AdminRequestError("Invalid client quota entity")
    return QuotaEntity(user, client)


def entity_parts(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """The (entity_type, entity_name) pairs of an answer (None: the default entity)."""
    parts = []
    for entity_type, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        if name is not None:
            parts.append((entity_type, None if name == DEFAULT_ENTITY else desanitize(name)))
    return parts


def _apply(config: dict[str, str], ops: Sequence[Op]) -> None:
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
            continue
        kind = CLIENT_QUOTA_KEYS.get(op.key)
        if kind is None:
            raise AdminRequestError(f"Invalid configuration key {op.key}")
        if kind == "DOUBLE":
            config[op.key] = repr(float(op.value))  # Java's Double.toString for usual values
            continue
        whole = int(op.value + LONG_EPSILON)
        if abs(whole - op.value) > LONG_EPSILON:
            raise AdminRequestError(f"Configuration {op.key} must be a {kind} value")
        config[op.key] = str(whole)


async def read_entity(zk: ZkClient, entity: QuotaEntity) -> tuple[dict[str, str], int | None]:
    """Every key stored at the entity's znode (quota keys and others) and its version."""
    path = f"{CONFIG_PATH}/{entity.path}"
    try:
        data, stat = await zk.aget(path)
    except NoNodeError:
        return {}, None
    if not data:  # a parent Kafka's createRecursive made for users/<user>/clients/<id>
        return {}, stat.version
    return dict(EntityConfig.decode(data, path).config), stat.version


async def alter_entity(
    zk: ZkClient,
    entity: QuotaEntity,
    ops: Sequence[Op],
    validate_only: bool,
    stored: frozenset[str] | None = None,
) -> None:
    """Apply ``ops`` to the entity's znode with its change notification; see the module.
    ``stored``: the entities with a znode, listed for the request (``stored_entities``): one
    not among them is not read (None: every entity is read)."""
    path = f"{CONFIG_PATH}/{entity.path}"
    for attempt in range(WRITE_ATTEMPTS_MAX):
        if attempt == 0 and stored is not None and entity.path not in stored:
            config, version = {}, None  # a lost race (NodeExists) reads it the next time
        else:
            config, version = await read_entity(zk, entity)
        _apply(config, ops)
        if validate_only:
            return
        data = EntityConfig(config).encode()
        if version is None:
            await _ensure_parents(zk, entity)
            config_op = CreateOp(path, data)
        else:
            config_op = SetDataOp(path, data, version=version)
        notification = ConfigChangeNotification(entity.path).encode()
        try:
            await zk.atransaction(
                [config_op, CreateOp(config_change_path_prefix(), notification, sequence=True)]
            )
        except (BadVersionError, NodeExistsError):
            continue
        log.info("%s: client quotas are now %s", path, quotas_of(config))
        return
    raise ConcurrentUpdateError(f"{path} kept changing while it was being altered")


async def _ensure_parents(zk: ZkClient, entity: QuotaEntity) -> None:
    """``/config/users/<user>`` (and its ``clients``) must exist for a user+client znode."""
    if entity.user is None or entity.client_id is None:
        return
    for path in (
        f"{CONFIG_PATH}/users/{entity.user}",
        f"{CONFIG_PATH}/users/{entity.user}/clients",
    ):
        with contextlib.suppress(NodeExistsError):
            await zk.acreate(path, EntityConfig({}).encode() if path.count("/") == 3 else b"")


def quotas_of(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a znode's config, as numbers (others, e.g. SCRAM, left out)."""
    quotas = {}
    for key, value in config.items():
        if key in CLIENT_QUOTA_KEYS:
            try:
                quotas[key] = float(value)
            except ValueError:
                log.warning("ignoring client quota %s=%r: not a number", key, value)
    return quotas


async def _children(zk: ZkClient, path: str) -> list[str]:
    try:
        return sorted(await zk.achildren(path))
    except NoNodeError:
        return []


async def _entities(zk: ZkClient) -> list[QuotaEntity]:
    """Every user, user+client and client entity with a znode."""
    entities = []
    for user in await _children(zk, f"{CONFIG_PATH}/users"):
        entities.append(QuotaEntity(user=user))
        for client in await _children(zk, f"{CONFIG_PATH}/users/{user}/clients"):
            entities.append(QuotaEntity(user, client))
    for client in await _children(zk, f"{CONFIG_PATH}/clients"):
        entities.append(QuotaEntity(client_id=client))
    return entities


async def stored_entities(zk: ZkClient) -> frozenset[str]:
    """The ``path`` of every entity with a znode (listed, not read): one listing for an
    AlterClientQuotas request, so its entities that have none cost no read each."""
    return frozenset(entity.path for entity in await _entities(zk))


async def read_all(zk: ZkClient) -> dict[QuotaEntity, dict[str, str]]:
    """Every user, user+client and client entity's stored config."""
    found = {}
    for entity in await _entities(zk):
        config, version = await read_entity(zk, entity)
        if version is not None:
            found[entity] = config
    return found


def _component_match(
    component: tuple[int, str | None] | None, part: str | None, strict: bool
) -> bool:
    """Kafka's ``matches``; ``part`` is the entity's stored (sanitized) name or None."""
    if component is None:
        return part is None or not strict
    match_type, match = component
    if match_type == MATCH_EXACT:
        return part is not None and part != DEFAULT_ENTITY and desanitize(part) == match
    if match_type == MATCH_DEFAULT:
        return part == DEFAULT_ENTITY
    return part is not None  # MATCH_SPECIFIED


async def describe(
    zk: ZkClient, components: Sequence[tuple[str, int, str | None]], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """DescribeClientQuotas' entries: (entity_type, match_type, match) filter components."""
    by_type: dict[str, tuple[int, str | None]] = {}
    for entity_type, match_type, match in components:
        if entity_type == "":
            raise AdminRequestError("Unexpected empty filter component entity type")
        if entity_type not in (USER, CLIENT_ID):
            if entity_type == IP:
                raise AdminRequestError("IP quotas are not supported by Odradek")
            raise AdminRequestError(f"Custom entity type '{entity_type}' not supported")
        if entity_type in by_type:
            which = "user" if entity_type == USER else "client"
            raise AdminRequestError(f"Duplicate {which} filter component entity type")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise AdminRequestError(f"Unexpected match type {match_type}")
        if match_type == MATCH_EXACT and match is None:
            raise AdminRequestError(f"Exact match of {entity_type} needs a name")
        by_type[entity_type] = (match_type, match)
    answer = []
    for entity, config in (await read_all(zk)).items():
        quotas = quotas_of(config)
        if (
            quotas
            and _component_match(by_type.get(USER), entity.user, strict)
            and _component_match(by_type.get(CLIENT_ID), entity.client_id, strict)
        ):
            answer.append((entity, quotas))
    return answer
