"""The broker process: its parts wired together, started in order, stopped in reverse.

Start-up: ZooKeeper session (and the persistent paths, and the cluster id, created by the first
broker as Kafka does); topic configurations, then the dynamic broker configs (the replication
throttle rates, applied to the two ``ReplicationQuotas``); the logs of every log dir
(recovering them after an unclean shutdown); one Kafka server per listener
(``config.listener_table``: the client listeners and the control-plane listener, which alone
serves the controller's requests); the admin HTTP server (a listener on port 0 binds a free
port, ``odradek.listeners``, and the bound addresses go to ``odradek.listeners.file`` if set,
before the registration advertises them); and last the ephemeral
``/brokers/ids/<id>`` registration listing every advertised listener, so the controller only
sees a broker that can already serve. The registration's czxid is the broker epoch the
controller's requests must carry.
Shutdown reverses that: deregister first, so the controller moves leadership away while the
logs are still open, then stop serving, then close the logs cleanly (the clean-shutdown marker).

SIGTERM (what process managers and Kubernetes send) first runs a controlled shutdown when
``controlled.shutdown.enable`` is true (``controlled_shutdown``: the controller moves this
broker's leaderships to other in-sync replicas and takes it out of the ISRs, retried within
``controlled.shutdown.max.retries``; the broker stops anyway afterwards). SIGINT stops at once,
without it (a fast stop: the controller reacts to the deregistration instead, as to a crash that
closed its logs cleanly), and cuts a controlled shutdown in progress short. ``odradek local
down`` stops whole clusters with SIGINT: with every broker going, leadership has nowhere to go.
A lost registration stops the broker without one too (the controller no longer knows it).

Until the controller tells it otherwise (LeaderAndIsr, UpdateMetadata) a broker hosts nothing
and its metadata cache is empty. It is not ready (``/readyz``) until its cache lists itself: a
client whose first Metadata came from a broker that knows no brokers and no controller has
nothing to go on (librdkafka's admin requests then wait for a controller it never asks about
again), so readiness probes, and the local cluster's start-up, wait for the controller's word.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import signal
import uuid
from dataclasses import dataclass

from odradek.broker import alter_partition, controlled_shutdown, controller_link, txn_markers
from odradek.broker.admin.producer_ids import ProducerIdManager
from odradek.broker.admin.scram_credentials import read_credential
from odradek.broker.alter_partition import AlterPartitionManager
from odradek.broker.broker_configs import BrokerConfigs
from odradek.broker.budget import RequestBudgets
from odradek.broker.context import BrokerContext
from odradek.broker.controller_link import ControllerLink
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.group_coordinator import start_group_coordinator
from odradek.broker.group_lag import run_consumer_lag
from odradek.broker.log_dir_failure import LogDirFailureHandler
from odradek.broker.log_dir_mover import LogDirMover
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.quota_configs import ClientQuotaConfigs
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replica_budget import (
    over_budget_message,
    raise_open_files_limit,
    replica_budget,
)
from odradek.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.replication_quota import ReplicationQuotas
from odradek.broker.sasl_authenticator import ListenerSasl
from odradek.broker.server import BrokerServer
from odradek.broker.topic_configs import TopicConfigs
from odradek.broker.transaction_coordinator import start_transaction_coordinator
from odradek.broker.txn_markers import TxnMarkerSender
from odradek.broker.workers import Workers
from odradek.config.broker import BrokerConfig
from odradek.config.endpoints import SASL_SECURITY_PROTOCOLS, HostPort, Listener
from odradek.config.topic import TopicConfig
from odradek.connection_quotas import ConnectionQuotas
from odradek.large_messages import freeze_long_lived_objects
from odradek.listeners import write_listeners_file
from odradek.observability.admin_server import AdminServer, start_admin_server
from odradek.observability.loop_monitor import EventLoopMonitor
from odradek.observability.metrics import (
    broker_metrics,
    client_quota_metrics,
    common_metrics,
    consumer_lag_metrics,
    new_registry,
    replication_quota_metrics,
    txn_marker_metrics,
)
from odradek.security import acl_authorizer
from odradek.security.jwks import FileJwks, HttpJwks, JwksSettings, jwks_keys
from odradek.security.oauthbearer import ClaimRules, TokenValidator
from odradek.security.scram import ScramCredential, ScramMechanism
from odradek.security.tls import broker_links_tls, listener_tls, reload_certificates
from odradek.storage.manager import LogManager, ManagerIntervals
from odradek.zk.client import SessionEvent, ZkClient, ZkTls
from odradek.zk.controller_locator import ControllerLocator
from odradek.zk.errors import NodeExistsError, NoNodeError
from odradek.zk.paths import (
    CLUSTER_ID_PATH,
    CLUSTER_PATH,
    PERSISTENT_PATHS,
    BrokerInfo,
    ClusterId,
)
from odradek.zk.paths import Endpoint as ZkEndpoint
from odradek.zk.registration import BrokerRegistrar

log = logging.getLogger(__name__)

# How often SSL listeners look at their key and trust store files for new certificates.

UNLOADED_LOGGED_MAX = 20  # replicas named in the over-budget error; the metric has the count
FIND_CONTROLLER_S = 5.0  # AlterPartition waits this long for an active controller, then retries


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a random UUID, as Kafka's ``Uuid.randomUuid``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class BoundAddresses:
    ports: dict[str, int]  # listener name -> bound port
    admin_port: int | None


class BrokerApp:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.registry = new_registry()
        self.common = common_metrics(self.registry)
        self.metrics = broker_metrics(self.registry)
        self.quotas = ReplicationQuotas.of(config, replication_quota_metrics(self.registry))
        self.client_quotas = ClientQuotas(
            window_num=config.quota_window_num,
            window_size_s=config.quota_window_size_seconds,
            metrics=client_quota_metrics(self.registry),
        )
        self.consumer_lag = consumer_lag_metrics(self.registry)
        self.zk = ZkClient(
            config.zookeeper_connect,
            session_timeout_s=config.zookeeper_session_timeout_ms / 1000,
            connect_timeout_s=config.effective_zookeeper_connection_timeout_ms / 1000,
            tls=ZkTls.of(config.zookeeper_client_settings()),
            secure_acls=config.zookeeper_set_acl,
        )
        self.log_manager: LogManager | None = None
        self.replica_budget: int | None = None
        self.servers: list[BrokerServer] = []
        self.jwks: HttpJwks | FileJwks | None = None  # OAUTHBEARER's keys, when served
        self.oauthbearer: TokenValidator | None = None
        # Each SSL listener's TLS context, its key and trust stores read now (``odradek broker``
        # has read them once already, so a bad store is a configuration error before start).
        self.tls = listener_tls(config)
        self.links_tls = broker_links_tls(config)  # this broker's own connections
        self.admin: AdminServer | None = None
        self.registrar: BrokerRegistrar | None = None
        self.topic_configs: TopicConfigs | None = None
        self.broker_configs: BrokerConfigs | None = None
        self.workers: Workers | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.alter_partition: AlterPartitionManager | None = None
        self.controller_link: ControllerLink | None = None
        self.log_dir_mover: LogDirMover | None = None
        self.log_dir_failures: LogDirFailureHandler | None = None
        self._isr_expiration: asyncio.Task[None] | None = None
        self._consumer_lag: asyncio.Task[None] | None = None
        self._certificate_reload: asyncio.Task[None] | None = None
        self.controller_locator: ControllerLocator | None = None
        self._stopping = asyncio.Event()
        self.loop_monitor = EventLoopMonitor(self.common)
        self.stopped = asyncio.Event()
        self.context: BrokerContext | None = None
        self._controlled = False  # the stop asked for a controlled shutdown (SIGTERM)
        self._controlled_shutdown: asyncio.Future[controlled_shutdown.Result] | None = None

    async def start(self) -> BoundAddresses:
        config = self.config
        self.zk.add_session_listener(self._on_session, loop=asyncio.get_running_loop())
        self.loop_monitor.start()
        await self.zk.astart()
        await self.zk.aensure_paths(PERSISTENT_PATHS)
        cluster_id = await self._cluster_id()

        self.broker_configs = BrokerConfigs(self.zk, config.broker_id, self.quotas.update)
        client_quota_configs = ClientQuotaConfigs(self.zk, self.client_quotas)
        self.topic_configs = TopicConfigs(
            self.zk,
            config.topic_defaults(),
            self._config_changed,
            entity_handlers={
                "brokers": self.broker_configs.refresh,
                "users": client_quota_configs.refresh_user,
                "clients": client_quota_configs.refresh_client,
            },
        )
        await self.topic_configs.start()
        await self.broker_configs.start()  # after: a change from now on has its notification
        await client_quota_configs.start()
        files = raise_open_files_limit(config.odradek_test_open_files_limit)
        self.replica_budget = replica_budget(
            files.soft,
            reserved=config.odradek_open_files_reserved,
            max_broker_partitions=config.max_broker_partitions,
        )
        log.info("replica budget: %d replicas (max.broker.partitions)", self.replica_budget)
        self.metrics.replica_budget.set(self.replica_budget)
        self.log_manager = LogManager(
            config.effective_log_dirs,
            max_logs=self.replica_budget,
            topic_config=self.topic_configs.get,
            intervals=ManagerIntervals(
                retention_check_ms=config.log_retention_check_interval_ms,
                checkpoint_ms=config.log_flush_offset_checkpoint_interval_ms,
                high_watermark_checkpoint_ms=config.replica_high_watermark_checkpoint_interval_ms,
            ),
        )
        await asyncio.to_thread(self.log_manager.load)
        unloaded = self.log_manager.unloaded
        self.metrics.replicas_unloaded.set(len(unloaded))
        if unloaded:
            log.error(
                "%s; not loaded: %s",
                over_budget_message(
                    len(unloaded) + self.replica_budget, self.replica_budget, files.soft
                ),
                ", ".join(f"{t}-{p}" for t, p in unloaded[:UNLOADED_LOGGED_MAX]),
            )
        self.log_manager.start(cleaner=config.log_cleaner_enable)

        self.workers = Workers()
        metadata = MetadataCache(cluster_id)
        inter_broker_listener = config.effective_inter_broker_listener_name

        def leader_endpoint(broker_id: int) -> HostPort | None:
            broker = metadata.brokers.get(broker_id)
            return broker.endpoint(inter_broker_listener) if broker is not None else None

        def topic_id(topic: str) -> uuid.UUID | None:
            cached = metadata.topic(topic)
            return cached.topic_id if cached is not None else None

        self.fetchers = ReplicaFetcherManager(
            config.broker_id,
            leader_endpoint=leader_endpoint,
            settings=FetcherSettings(
                num_fetchers=config.num_replica_fetchers,
                max_bytes=config.replica_fetch_max_bytes,
                response_max_bytes=config.replica_fetch_response_max_bytes,
                wait_max_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
                socket_timeout_ms=config.replica_socket_timeout_ms,
            ),
            workers=self.workers,
            metrics=self.metrics,
            quota=self.quotas.follower,
            tls=self.links_tls.brokers_context,
        )
        self.alter_partition = AlterPartitionManager(
            config.broker_id,
            broker_epoch=lambda: context.broker_epoch,
            topic_id=topic_id,
            find_controller=self._find_controller,
            connect=functools.partial(
                alter_partition.open_connection, tls=self.links_tls.controller_context
            ),
            on_change=lambda: context.replica_manager.update_gauges(self.metrics),
        )
        self.log_dir_mover = LogDirMover(self.log_manager, metrics=self.metrics)
        replica_manager = ReplicaManager(
            config.broker_id,
            self.log_manager,
            workers=self.workers,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            isr_changes=self.alter_partition,
            fetchers=self.fetchers,
            metrics=self.metrics,
            leader_quota=self.quotas.leader,
            log_dir_moves=self.log_dir_mover,
        )
        producer_ids = ProducerIdManager(self.zk, config.broker_id)
        # authorizer.class.name's authorizer, its ACL cache read before any request is served.
        authorizer = acl_authorizer.from_config(config, self.zk)
        if authorizer is not None:
            await authorizer.start()
        context = BrokerContext(
            broker_id=config.broker_id,
            replica_manager=replica_manager,
            metadata=metadata,
            metrics=self.metrics,
            config=config,
            zk=self.zk,
            topic_configs=self.topic_configs,
            client_quotas=self.client_quotas,
            producer_ids=producer_ids,
            authorizer=authorizer,
            fetch_max_bytes=config.fetch_max_bytes,
            fetch_sessions=FetchSessionCache.of(config),
            groups=start_group_coordinator(config, replica_manager, metadata, self.workers),
            txn_markers=TxnMarkerSender(
                metadata,
                inter_broker_listener,
                connect=functools.partial(
                    txn_markers.open_connection, tls=self.links_tls.brokers_context
                ),
                metrics=txn_marker_metrics(self.registry),
            ),
        )
        context.transactions = start_transaction_coordinator(
            config,
            replica_manager,
            producer_ids,
            self.workers,
            markers=lambda: context.txn_markers,
        )
        self.context = context
        self.controller_locator = ControllerLocator(self.zk)
        await self.controller_locator.start()
        self.controller_link = context.controller = ControllerLink(
            self._find_controller,
            connect=functools.partial(
                controller_link.open_connection, tls=self.links_tls.controller_context
            ),
        )
        self.alter_partition.start()

        def stop_fetching(partitions: list[tuple[str, int]]) -> None:
            for topic, index in partitions:
                self.fetchers.remove_partition(topic, index)

        self.log_dir_failures = LogDirFailureHandler(
            config.broker_id,
            self.zk,
            self.log_manager,
            stop_partitions=stop_fetching,
            stop_broker=self.stopped.set,
        )
        self.log_dir_failures.start()
        self.log_manager.on_dir_offline = self.log_dir_failures.dir_offline
        self._isr_expiration = asyncio.get_running_loop().create_task(
            replica_manager.run_isr_expiration(self._stopping, self.metrics), name="isr-expiration"
        )
        reloadable = (*self.tls.values(), *self.links_tls.reloadable())
        if reloadable:
            self._certificate_reload = asyncio.get_running_loop().create_task(
                reload_certificates(self._stopping, reloadable), name="certificate-reload"
            )
        if context.groups is not None:
            self._consumer_lag = asyncio.get_running_loop().create_task(
                run_consumer_lag(
                    context.groups, replica_manager, self.consumer_lag, self._stopping
                ),
                name="consumer-lag",
            )
        budgets = RequestBudgets.of(
            queued_max_request_bytes=config.queued_max_request_bytes,
            queued_max_requests=config.queued_max_requests,
        )
        self.oauthbearer = await self._start_oauthbearer()
        quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
            max_connection_creation_rate=config.max_connection_creation_rate,
            # KIP-402's protected listener, and the controller's: no client limit keeps them out
            protected_listeners=(
                config.effective_inter_broker_listener_name,
                config.control_plane_listener_name,
            ),
            metrics=context.metrics.connection_quotas,
        )
        ports = {}
        for listener in config.listener_table:
            ports[listener.name] = await self._serve(context, listener, budgets, quotas)

        admin_port = None
        if config.odradek_admin_listener is not None:
            admin = config.odradek_admin_listener
            self.admin = await start_admin_server(
                admin.host, admin.port, self.registry, ready=self._not_ready_reasons
            )
            admin_port = self.admin.port
        if config.odradek_listeners_file:
            write_listeners_file(
                config.odradek_listeners_file,
                {
                    listener.name: str(HostPort(listener.host, ports[listener.name]))
                    for listener in config.listener_table
                },
                None if self.admin is None else str(HostPort(self.admin.host, self.admin.port)),
            )

        self.registrar = BrokerRegistrar(
            self.zk,
            config.broker_id,
            BrokerInfo(
                endpoints=tuple(
                    ZkEndpoint(
                        advertised.name,
                        advertised.host,
                        advertised.port or ports[advertised.name],  # 0: the port it bound
                        config.security_protocol(advertised.name).name,
                    )
                    for advertised in config.effective_advertised_listeners
                ),
                rack=config.broker_rack,
                max_broker_partitions=self.replica_budget,
            ),
            on_failure=self._registration_failed,
            on_registered=lambda epoch: setattr(context, "broker_epoch", epoch),
        )
        await self.registrar.register()
        log.info(
            "broker %d serving on %s (cluster %s)",
            config.broker_id,
            ", ".join(
                f"{listener.name}://{listener.host}:{ports[listener.name]}"
                for listener in config.listener_table
            ),
            cluster_id,
        )
        freeze_long_lived_objects()  # later full collections skip them (``large_messages``)
        return BoundAddresses(ports, admin_port)

    def _listener_sasl(self, listener: Listener) -> ListenerSasl | None:
        """A SASL listener's mechanisms and users; SCRAM credentials are read from ZooKeeper
        at each authentication (``admin.scram_credentials``)."""
        if listener.security_protocol not in SASL_SECURITY_PROTOCOLS:
            return None
        config = self.config
        settings = config.sasl_settings(listener.name)
        settings.check()

        async def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
            return await read_credential(self.zk, user, mechanism)

        return ListenerSasl(
            listener.name,
            settings.enabled_mechanisms,
            settings.plain_users(),
            lookup,
            config.connection_failed_authentication_delay_ms,
            config.sasl_server_max_receive_size,
            settings.max_reauth_ms(),
            oauthbearer=self.oauthbearer,
        )

    async def _start_oauthbearer(self) -> TokenValidator | None:
        """The OAUTHBEARER validator of every listener that enables it (one key source for the
        broker, as Kafka shares one per configuration), its keys started; None when none does."""
        config = self.config
        if not any(
            "OAUTHBEARER" in config.sasl_settings(listener.name).enabled_mechanisms
            for listener in config.listener_table
            if listener.security_protocol in SASL_SECURITY_PROTOCOLS
        ):
            return None
        assert config.sasl_oauthbearer_jwks_endpoint_url is not None  # checked at load
        self.jwks = jwks_keys(
            JwksSettings(
                config.sasl_oauthbearer_jwks_endpoint_url,
                config.sasl_oauthbearer_jwks_endpoint_refresh_ms,
                config.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms,
                config.sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms,
            )
        )
        await self.jwks.start()
        rules = ClaimRules(
            expected_audience=config.sasl_oauthbearer_expected_audience or (),
            expected_issuer=config.sasl_oauthbearer_expected_issuer,
            scope_claim_name=config.sasl_oauthbearer_scope_claim_name,
            sub_claim_name=config.sasl_oauthbearer_sub_claim_name,
            clock_skew_seconds=config.sasl_oauthbearer_clock_skew_seconds,
        )
        return TokenValidator(self.jwks, rules)

    async def _serve(
        self,
        context: BrokerContext,
        listener: Listener,
        budgets: RequestBudgets,
        quotas: ConnectionQuotas,
    ) -> int:
        """Start the server of one listener; its bound port."""
        config = self.config
        server = BrokerServer(
            context,
            listener,
            tls=self.tls.get(listener.name),
            sasl=self._listener_sasl(listener),
            budgets=budgets,
            max_frame_bytes=config.socket_request_max_bytes,
            max_inflight=config.odradek_connection_max_inflight_requests,
            max_connections=config.listener_max_connections(listener.name),
            max_connection_creation_rate=config.listener_max_connection_creation_rate(
                listener.name
            ),
            quotas=quotas,
            idle_timeout_ms=config.connections_max_idle_ms,
            receive_timeout_ms=config.odradek_socket_request_receive_timeout_ms,
        )
        self.servers.append(server)
        return await server.start(listener.host or "0.0.0.0", listener.port)

    async def _cluster_id(self) -> str:
        try:
            data, _ = await self.zk.aget(CLUSTER_ID_PATH)
            return ClusterId.decode(data).id
        except NoNodeError:
            pass
        await self.zk.aensure_path(CLUSTER_PATH)
        with contextlib.suppress(NodeExistsError):  # another broker won the race: use its id
            await self.zk.acreate(CLUSTER_ID_PATH, ClusterId(new_cluster_id()).encode())
        data, _ = await self.zk.aget(CLUSTER_ID_PATH)
        return ClusterId.decode(data).id

    def _config_changed(self, topic: str, config: TopicConfig) -> None:
        if self.log_manager is None:
            return
        for each in self.log_manager.logs():
            if each.directory.name.rsplit("-", 1)[0] == topic:
                each.update_config(config)

    def _on_session(self, event: SessionEvent, session_id: int | None) -> None:
        self.common.set_zookeeper_session_state(event.session_state)

    def _not_ready_reasons(self) -> list[str]:
        reasons = []
        if self.registrar is None or not self.registrar.registered:
            reasons.append("not registered in ZooKeeper")
        elif self.context is None or self.config.broker_id not in self.context.metadata.brokers:
            reasons.append("no cluster metadata from the controller yet")
        if self.log_manager is not None and self.log_manager.offline_dirs:
            reasons.append(f"offline log dirs: {sorted(map(str, self.log_manager.offline_dirs))}")
        if (lagging := self.loop_monitor.not_ready_reason()) is not None:
            reasons.append(lagging)
        return reasons

    def _registration_failed(self, error: Exception) -> None:
        log.error("lost the broker registration and could not renew it: %s; stopping", error)
        self.stopped.set()

    async def _find_controller(self) -> HostPort | None:
        """The active controller's listener (None while there is none)."""
        endpoint = self.controller_locator.endpoint if self.controller_locator else None
        if endpoint is None and self.controller_locator is not None:
            with contextlib.suppress(TimeoutError):  # a new election takes a moment
                endpoint = await self.controller_locator.wait_for_endpoint(FIND_CONTROLLER_S)
        return HostPort(*endpoint) if endpoint is not None else None

    async def stop(self) -> None:
        self._stopping.set()
        if self.registrar is not None:
            try:
                await self.registrar.deregister()
            except Exception as e:  # ZooKeeper gone: the ephemeral node goes with the session
                log.warning("could not deregister: %s", e)
        for server in self.servers:
            await server.stop()
        if self.jwks is not None:
            await self.jwks.close()
        if self.admin is not None:
            await self.admin.stop()
        if self._isr_expiration is not None:
            await self._isr_expiration
        if self._consumer_lag is not None:
            await self._consumer_lag
        if self._certificate_reload is not None:
            await self._certificate_reload
        if self.context is not None and self.context.transactions is not None:
            await self.context.transactions.close()
        if self.context is not None and self.context.txn_markers is not None:
            await self.context.txn_markers.close()
        if self.context is not None and self.context.groups is not None:
            await self.context.groups.runtime.close()
        if self.fetchers is not None:
            await self.fetchers.close()
        if self.log_dir_mover is not None:
            await self.log_dir_mover.close()
        if self.log_dir_failures is not None:
            await self.log_dir_failures.close()
        if self.alter_partition is not None:
            await self.alter_partition.close()
        if self.controller_link is not None:
            await self.controller_link.close()
        if self.controller_locator is not None:
            await self.controller_locator.stop()
        if self.workers is not None:
            await asyncio.to_thread(self.workers.shutdown)
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown)
        await self.zk.aclose()
        await self.loop_monitor.stop()

    def request_stop(self, *, controlled: bool) -> None:
        """Stop serving (``run`` returns): SIGTERM with ``controlled``, SIGINT without (which
        also cuts a controlled shutdown in progress short)."""
        if not self.stopped.is_set():
            self._controlled = controlled
        elif not controlled and self._controlled_shutdown is not None:
            self._controlled_shutdown.cancel()
        self.stopped.set()

    async def run_controlled_shutdown(self) -> controlled_shutdown.Result | None:
        """Ask the controller to move what this broker holds (``controlled_shutdown``); None
        when disabled, or when there is no controller link (not started)."""
        config, context = self.config, self.context
        if not config.controlled_shutdown_enable or context is None or context.controller is None:
            return None
        self._controlled_shutdown = asyncio.ensure_future(
            controlled_shutdown.controlled_shutdown(
                context.controller,
                config.broker_id,
                lambda: context.broker_epoch,
                controlled_shutdown.Settings(
                    max_retries=config.controlled_shutdown_max_retries,
                    retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
                    request_timeout_ms=config.controller_socket_timeout_ms,
                ),
            )
        )
        await asyncio.wait({self._controlled_shutdown})
        if self._controlled_shutdown.cancelled():
            log.warning("controlled shutdown cut short (SIGINT): stopping now")
            return None
        return self._controlled_shutdown.result()

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT (or a lost registration), then stop cleanly;
        SIGTERM runs a controlled shutdown first (see the module docstring)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: self.request_stop(controlled=True))
        loop.add_signal_handler(signal.SIGINT, lambda: self.request_stop(controlled=False))
        await self.start()
        await self.stopped.wait()
        log.info(
            "broker %d shutting down%s",
            self.config.broker_id,
            " (controlled)" if self._controlled and self.config.controlled_shutdown_enable else "",
        )
        if self._controlled:
            await self.run_controlled_shutdown()
        await self.stop()
