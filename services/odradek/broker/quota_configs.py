"""This broker's client quotas, followed in ZooKeeper: ``/config/users`` and ``/config/clients``.

Every user, user+client-id and client-id entity (``admin/client_quotas.py`` has the layout) is
read at start; afterwards ``TopicConfigs``, which follows the change notifications, hands each
``users/...`` and ``clients/...`` one to ``refresh_user`` / ``refresh_client`` with the rest of
the entity path (``alice``, ``alice/clients/app``, ``<default>``), and that entity alone is read
again and applied to ``ClientQuotas``. A node that cannot be read or decoded is logged and the
entity keeps its previous quotas; a node gone means no quotas.

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging

from odradek.broker.admin.client_quotas import read_all, read_entity
from odradek.broker.quotas import ClientQuotas, QuotaEntity
from odradek.zk.client import ZkClient
from odradek.zk.errors import ZkDataError

__all__ = ["ClientQuotaConfigs"]

log = logging.getLogger(__name__)


class ClientQuotaConfigs:
    def __init__(self, zk: ZkClient, quotas: ClientQuotas):
        self.zk = zk
        self.quotas = quotas

    async def start(self) -> None:
        try:
            found = await read_all(self.zk)
        except ZkDataError as e:
            log.error("client quotas not read at start: %s", e)
            return
        for entity, config in found.items():
            self.quotas.set_entity(entity, config)

    async def refresh_user(self, entity_name: str) -> None:
        await self._refresh(f"users/{entity_name}")

    async def refresh_client(self, entity_name: str) -> None:
        await self._refresh(f"clients/{entity_name}")

    async def _refresh(self, entity_path: str) -> None:
        try:
            entity = QuotaEntity.from_path(entity_path)
            config, _ = await read_entity(self.zk, entity)
        except (ValueError, ZkDataError) as e:
            log.error("keeping the current client quotas of %s: %s", entity_path, e)
            return
        self.quotas.set_entity(entity, config)
        log.info(
            "client quotas of %s are now %s",
            entity_path,
            dict(self.quotas.entities().get(entity, {})),
        )
