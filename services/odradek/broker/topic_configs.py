"""Each topic's effective configuration: the broker's defaults with its ZooKeeper overrides.

Overrides live in ``/config/topics/<topic>`` (Kafka's layout). They are read for every topic at
start, and again for one topic when a ``/config/changes/config_change_<seq>`` notification names
it (AlterConfigs writes one after changing the overrides). A changed configuration is handed to
``on_change`` so the topic's logs apply it. An override that fails validation (written by a
newer or foreign tool) is logged and the topic keeps its previous configuration.

Notifications for other entities go to the handler registered for their type in
``entity_handlers`` (``brokers``: ``broker_configs.BrokerConfigs.refresh``), with the entity's
name; types without a handler are skipped, as before.

kazoo drops watches when a connection drops; after a reconnect the notifications are read again,
so a change made meanwhile is not missed (a notification is processed once: by sequence number).

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from odradek.config.topic import TopicConfig
from odradek.errors import InvalidConfigError
from odradek.zk.client import SessionEvent, WatchEvent, ZkClient
from odradek.zk.errors import NoNodeError, ZkDataError
from odradek.zk.paths import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    ConfigChangeNotification,
    EntityConfig,
    sequence_number,
    topic_config_path,
)

log = logging.getLogger(__name__)

TOPICS_CONFIG_PATH = "/config/topics"


class TopicConfigs:
    def __init__(
        self,
        zk: ZkClient,
        defaults: TopicConfig,
        on_change: Callable[[str, TopicConfig], None] = lambda topic, config: None,
        entity_handlers: Mapping[str, Callable[[str], Awaitable[None]]] | None = None,
    ):
        self.zk = zk
        self.defaults = defaults
        self.on_change = on_change
        self.entity_handlers = dict(entity_handlers or {})
        self._configs: dict[str, TopicConfig] = {}
        self._read: set[str] = set()  # topics whose overrides were read at least once
        self._last_change = -1
        self._checking = asyncio.Lock()

    def get(self, topic: str) -> TopicConfig:
        return self._configs.get(topic, self.defaults)

    async def start(self) -> None:
        """Read every topic's overrides, then follow change notifications."""
        try:
            topics = await self.zk.achildren(TOPICS_CONFIG_PATH)
        except NoNodeError:
            topics = []
        for topic in topics:
            await self.refresh(topic)
        self.zk.add_session_listener(self._on_session, loop=asyncio.get_running_loop())
        await self._check_changes(first=True)

    async def ensure(self, topic: str) -> TopicConfig:
        """``topic``'s configuration, read from ZooKeeper first if this broker never did.

        A topic created after start-up has its overrides written with it and no change
        notification (as in Kafka): they are read when the broker first hosts the topic.
        """
        if topic not in self._read:
            return await self.refresh(topic)
        return self.get(topic)

    async def refresh(self, topic: str) -> TopicConfig:
        """Read ``topic``'s overrides from ZooKeeper and apply them."""
        self._read.add(topic)
        try:
            data, _ = await self.zk.aget(topic_config_path(topic))
            overrides = EntityConfig.decode(data, topic_config_path(topic)).config
            config = TopicConfig.from_properties(overrides, base=self.defaults)
        except NoNodeError:
            config = self.defaults
        except (ZkDataError, InvalidConfigError) as e:
            log.error("keeping the current configuration of topic %s: %s", topic, e)
            return self.get(topic)
        if config != self.get(topic):
            self._configs[topic] = config
            self.on_change(topic, config)
        return config

    def forget(self, topic: str) -> None:
        self._configs.pop(topic, None)

    async def _check_changes(self, first: bool = False) -> None:
        async with self._checking:
            try:
                names = await self.zk.achildren(CONFIG_CHANGES_PATH, watch=self._on_watch)
            except NoNodeError:
                return
            for name in sorted(n for n in names if n.startswith(CONFIG_CHANGE_PREFIX)):
                sequence = sequence_number(name, CONFIG_CHANGE_PREFIX)
                if sequence <= self._last_change:
                    continue
                self._last_change = sequence
                if first:
                    continue  # start() already read every topic's current overrides
                try:
                    data, _ = await self.zk.aget(f"{CONFIG_CHANGES_PATH}/{name}")
                    notification = ConfigChangeNotification.decode(data)
                except (NoNodeError, ZkDataError) as e:
                    log.warning("skipping config change %s: %s", name, e)
                    continue
                entity_type, _, entity_name = notification.entity_path.partition("/")
                if entity_type == "topics":
                    await self.refresh(entity_name)
                elif (handler := self.entity_handlers.get(entity_type)) is not None:
                    await handler(entity_name)

    def _on_watch(self, event: WatchEvent) -> None:
        asyncio.ensure_future(self._check_changes())

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        if event in (SessionEvent.NEW_SESSION, SessionEvent.RECONNECTED):
            asyncio.ensure_future(self._check_changes())
