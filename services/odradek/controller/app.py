"""The controller process: a ZooKeeper session, the controller, its listener, metrics, until
SIGTERM.

Wiring only: the ZooKeeper store and the per-broker channels are built here and given to the
``Controller``; its listener (``server``) is bound before the election starts, so the endpoint
published in ``/controller`` is the bound one (``listeners`` may ask for port 0; the bound
addresses go to ``odradek.listeners.file`` if set, see ``odradek.listeners``).

The controller has no clock of its own: the timers live here and only enqueue events. With
``auto.leader.rebalance.enable`` one task calls ``Controller.check_leader_balance`` every
``leader.imbalance.check.interval.seconds`` (Kafka's auto-leader-rebalance-task); a controller that
is not active ignores the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from odradek.config.controller import ControllerConfig
from odradek.config.endpoints import HostPort, SecurityProtocol
from odradek.connection_quotas import ConnectionQuotas
from odradek.controller import handlers
from odradek.controller.channel import ControllerChannels
from odradek.controller.controller import Controller
from odradek.controller.handlers import broker_responses
from odradek.controller.server import ControllerServer
from odradek.controller.store import ControllerStore
from odradek.large_messages import freeze_long_lived_objects
from odradek.listeners import write_listeners_file
from odradek.observability.admin_server import AdminServer, start_admin_server
from odradek.observability.loop_monitor import EventLoopMonitor
from odradek.observability.metrics import common_metrics, controller_metrics, new_registry
from odradek.security import acl_authorizer
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.security.acl_authorizer import AclAuthorizer
from odradek.security.principal import KafkaPrincipal
from odradek.security.tls import ClientTls, ListenerTls, reload_certificates
from odradek.zk.client import SessionEvent, ZkClient, ZkTls
from odradek.zk.election import ControllerElection
from odradek.zk.paths import PERSISTENT_PATHS

log = logging.getLogger(__name__)


class ControllerApp:
    def __init__(self, config: ControllerConfig):
        self.config = config
        tls = (
            ListenerTls.of(config.ssl_settings())
            if config.security_protocol is SecurityProtocol.SSL
            else None
        )
        # The controller's requests to the brokers' control planes, with its listener's stores.
        self.links_tls = None if tls is None else ClientTls(config.ssl_settings())
        self.tls = tls
        self.registry = new_registry()
        self.common = common_metrics(self.registry)
        self.metrics = controller_metrics(self.registry)
        timeout_ms = config.effective_zookeeper_connection_timeout_ms
        self.zk = ZkClient(
            config.zookeeper_connect,
            session_timeout_s=config.zookeeper_session_timeout_ms / 1000,
            connect_timeout_s=timeout_ms / 1000,
            tls=ZkTls.of(config.zookeeper_client_settings()),
            secure_acls=config.zookeeper_set_acl,
        )
        self.controller = Controller(
            config.controller_id,
            ControllerStore(self.zk),
            ControllerChannels(
                config.control_plane_listener_name,
                request_timeout_s=config.controller_socket_timeout_ms / 1000,
                tls=None if self.links_tls is None else self.links_tls.context,
            ),
            metrics=self.metrics,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            control_plane_listener_name=config.control_plane_listener_name,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        )
        # LeaderAndIsr answers tell of replicas on failed log dirs (controller.log_dir_events).
        self.controller.channel.on_response = broker_responses.on_response(self.controller)
        # authorizer.class.name's, built over ZooKeeper in run(); None: anyone may ask, as Kafka
        # without an authorizer.
        self.authorizer: AclAuthorizer | None = None
        self.server = ControllerServer(
            handlers.served(self.controller),
            quotas=ConnectionQuotas(
                max_connections=config.max_connections,
                max_connections_per_ip=config.max_connections_per_ip,
                max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
                max_connection_creation_rate=config.max_connection_creation_rate,
                evict_to_admit=True,  # brokers are the only clients: see controller.server
                metrics=self.metrics.connection_quotas,
            ),
            tls=tls,
            authorize=self._may_act_for_the_cluster if config.authorizer_class_name else None,
        )
        self.port: int | None = None  # the listener's bound port
        self.admin: AdminServer | None = None
        self.loop_monitor = EventLoopMonitor(self.common)
        self.stopped = asyncio.Event()

    def _may_act_for_the_cluster(self, principal: KafkaPrincipal, host: str) -> bool:
        """CLUSTER_ACTION on the cluster: what every request on the listener needs."""
        return self.authorizer is not None and self.authorizer.authorize(
            principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        )

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        self.common.set_zookeeper_session_state(event.session_state)

    def _not_ready_reasons(self) -> list[str]:
        reasons = []
        if self.common.zookeeper_session_state != "connected":
            reasons.append("zookeeper session not connected")
        if (lagging := self.loop_monitor.not_ready_reason()) is not None:
            reasons.append(lagging)
        return reasons

    async def _check_leader_balance_periodically(self) -> None:
        interval_s = self.config.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval_s)
            self.controller.check_leader_balance()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopped.set)
        self.zk.add_session_listener(self._on_session, loop=loop)
        self.loop_monitor.start()
        await self.zk.astart()
        await self.zk.aensure_paths(PERSISTENT_PATHS)
        self.authorizer = acl_authorizer.from_config(self.config, self.zk)
        if self.authorizer is not None:
            await self.authorizer.start()  # its ACLs read before the listener serves
        if self.config.odradek_admin_listener is not None:
            admin = self.config.odradek_admin_listener
            self.admin = await start_admin_server(
                admin.host, admin.port, self.registry, ready=self._not_ready_reasons
            )
        listener = self.config.listener
        self.port = await self.server.start(listener.host, listener.port)
        log.info("controller listener %s://%s:%d", listener.name, listener.host, self.port)
        if self.config.odradek_listeners_file:
            write_listeners_file(
                self.config.odradek_listeners_file,
                {listener.name: str(HostPort(listener.host, self.port))},
                None if self.admin is None else str(HostPort(self.admin.host, self.admin.port)),
            )
        self.controller.election = ControllerElection(
            self.zk,
            self.config.controller_id,
            on_elect=self.controller.elected,
            on_resign=self.controller.resigned,
            endpoint=(listener.host, self.port),
        )
        self.zk.add_session_listener(self.controller.on_session, loop=loop)
        log.info("controller %d campaigning", self.config.controller_id)
        freeze_long_lived_objects()  # later full collections skip them (``large_messages``)
        background = []
        if self.config.auto_leader_rebalance_enable:
            background.append(asyncio.create_task(self._check_leader_balance_periodically()))
        if self.tls is not None and self.links_tls is not None:
            # Certificates reload without a restart, the listener's and the links', as a
            # broker's (security.tls).
            background.append(
                asyncio.create_task(
                    reload_certificates(self.stopped, (self.tls, self.links_tls)),
                    name="certificate-reload",
                )
            )
        try:
            await self.controller.run(self.stopped)
        finally:
            for task in background:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self.server.stop()
            if self.admin is not None:
                await self.admin.stop()
            await self.zk.aclose()
            await self.loop_monitor.stop()
