"""This broker's dynamic configuration: ``/config/brokers/<id>`` over ``/config/brokers/<default>``.

Kafka's ZooKeeper-mode layout: each entity's overrides are ``{"version":1,"config":{...}}``, and
a change is announced by a ``/config/changes/config_change_<seq>`` notification naming
``brokers/<id>`` or ``brokers/<default>`` (``broker/admin/broker_configs.py`` writes both in one
transaction). Both nodes are read at start; afterwards ``TopicConfigs``, which follows the
notifications, hands every ``brokers/...`` one to ``refresh``. A notification for another broker
is ignored, as in Kafka.

The only dynamic keys are the replication throttle rates (``config/throttle.py``); the effective
``ThrottleRates`` (own value, else the default's, else unthrottled) go to ``on_change`` whenever
they change. A node that fails validation (written by another tool) is logged and the broker keeps
its previous rates; keys Odradek does not know are logged and ignored.

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.config.throttle import DYNAMIC_BROKER_KEYS, ThrottleRates, check_dynamic_broker_config
from odradek.errors import InvalidConfigError
from odradek.zk.client import ZkClient
from odradek.zk.errors import NoNodeError, ZkDataError
from odradek.zk.paths import BROKER_DEFAULT_ENTITY, EntityConfig, broker_config_path

__all__ = ["BrokerConfigs"]

log = logging.getLogger(__name__)


class BrokerConfigs:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        on_change: Callable[[ThrottleRates], None] = lambda rates: None,
    ):
        self.zk = zk
        self.broker_id = broker_id
        self.on_change = on_change
        self._own: dict[str, str] = {}
        self._default: dict[str, str] = {}
        self.rates = ThrottleRates()

    async def start(self) -> None:
        """Read both nodes (TopicConfigs follows the notifications from then on)."""
        self._own = await self._read(self.broker_id) or {}
        self._default = await self._read(None) or {}
        self._apply()

    async def refresh(self, entity: str) -> None:
        """A notification named ``brokers/<entity>``: read that node again if it concerns us."""
        if entity == BROKER_DEFAULT_ENTITY:
            read = await self._read(None)
            if read is not None:
                self._default = read
        elif entity == str(self.broker_id):
            read = await self._read(self.broker_id)
            if read is not None:
                self._own = read
        else:
            return
        self._apply()

    async def _read(self, broker_id: int | None) -> dict[str, str] | None:
        """The node's dynamic configs ({} if absent); None if it cannot be used."""
        path = broker_config_path(broker_id)
        try:
            data, _ = await self.zk.aget(path)
            stored = dict(EntityConfig.decode(data, path).config)
        except NoNodeError:
            return {}
        except ZkDataError as e:
            log.error("keeping the current dynamic broker configs: %s", e)
            return None
        unknown = sorted(set(stored) - set(DYNAMIC_BROKER_KEYS))
        if unknown:
            log.warning("%s: ignoring keys that are not dynamic here: %s", path, unknown)
        try:
            return check_dynamic_broker_config(
                {k: v for k, v in stored.items() if k in DYNAMIC_BROKER_KEYS}
            )
        except InvalidConfigError as e:
            log.error("keeping the current dynamic broker configs: %s: %s", path, e)
            return None

    def _apply(self) -> None:
        rates = ThrottleRates.of(self._own, self._default)
        if rates != self.rates:
            log.info("broker %d: replication throttle rates are now %s", self.broker_id, rates)
            self.rates = rates
            self.on_change(rates)
