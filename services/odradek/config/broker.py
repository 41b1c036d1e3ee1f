"""Broker configuration: Kafka's ``server.properties`` keys, defaults and validation, as one table.

``BROKER_KEYS`` lists every key a broker reads, with Kafka's names and defaults (Kafka 3.x in
ZooKeeper mode), and ``BrokerConfig`` has one attribute per row in the same order, named with
underscores (``log.segment.bytes`` -> ``log_segment_bytes``). A ``BrokerConfig`` that exists is
valid. Build one with ``BrokerConfig.load(path, overrides)`` (a ``server.properties`` file plus
``--override key=value``), ``from_properties(mapping)``, or by hand in tests.

Where Kafka differs from "one key, one value", Kafka's precedence is kept and the attribute holds
what was set (``None`` when unset) while ``effective_*`` gives the value to use:

- ``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``; negative means no
  limit (-1). Likewise ``log.roll.ms`` > ``log.roll.hours`` and the jitter pair;
- ``log.flush.interval.ms`` falls back to ``log.flush.scheduler.interval.ms``;
- ``log.dirs`` wins over ``log.dir``; one of them must be set (Kafka's ``/tmp/kafka-logs`` default
  is not kept: data should not land in /tmp by accident);
- ``advertised.listeners`` defaults to ``listeners``; ``zookeeper.connection.timeout.ms`` to
  ``zookeeper.session.timeout.ms``; ``inter.broker.listener.name`` to PLAINTEXT (what Kafka
  derives from ``security.inter.broker.protocol``'s default).

Listeners are checked as Kafka's ``KafkaConfig`` checks them: every listener has a security
protocol in ``listener.security.protocol.map``, advertised names are among the listeners', the
inter-broker and the control-plane listeners are advertised and differ. Departures, all for
safety: the inter-broker and control-plane listeners are PLAINTEXT or SSL, not SASL yet (the
broker's own connections to other brokers and to the controller use their settings,
``security.tls.broker_links_tls``), and
``control.plane.listener.name`` is always set and must name one of ``listeners``, because the
controller's requests are served on that listener only (``listener_table`` gives each listener
its role). The defaults have a client listener and a control-plane one.

SSL listeners take Kafka's ``ssl.*`` keys (PEM key and trust stores only) and their
per-listener overrides ``listener.name.<l>.ssl.*`` (``config.ssl``, ``ssl_settings``); any
``ssl.*`` key not honoured is refused by name. SASL_SSL listeners take them too.

SASL listeners (SASL_PLAINTEXT, SASL_SSL) take Kafka's ``sasl.enabled.mechanisms`` and
``listener.name.<l>.sasl.enabled.mechanisms``, ``listener.name.<l>.<mechanism>.sasl.jaas.config``
(``config.sasl``, ``sasl_settings``), and for OAUTHBEARER Kafka's JWT validator with its
``sasl.oauthbearer.*`` keys (``config.oauthbearer``); GSSAPI (Kafka's default), the unsecured
OAUTHBEARER validator and any ``sasl.*`` key not honoured are refused by name.

The broker's ``log.*`` keys (and a few others) are the defaults of every topic:
``topic_defaults()`` maps them with ``TOPIC_CONFIG_SYNONYMS``, Kafka's
``ServerTopicConfigSynonyms`` table. Rows for those keys are the topic rows renamed, so bounds and
documentation cannot drift apart.

Keys that Kafka does not have start with ``odradek.``. The limits a client can push against
(``socket.request.max.bytes``, ``queued.max.requests``, ``queued.max.request.bytes``,
``max.connections``, ``connections.max.idle.ms``, ``odradek.socket.request.receive.timeout.ms``,
``odradek.connection.max.inflight.requests``) are all here, with finite defaults;
docs/security.md says what happens at each.

``odradek.broker.rack.file`` names a file whose content is ``broker.rack`` (on Kubernetes, a
downward API file of the pod annotation the operator copies from the node's topology label:
pods get no node labels otherwise). ``with_rack_from_file()`` waits at start, up to
``odradek.broker.rack.file.timeout.ms``, for the file to be non-empty and returns the config with
``broker.rack`` set from it; a timeout is an ``InvalidConfigError`` (the broker does not start).

Immutable and free of I/O except ``load`` and ``with_rack_from_file``: any thread may use it.

Its length is deliberate: the rows of ``BROKER_KEYS`` are data (a key, its type, Kafka's
default and its documentation), and keeping them in one table is what keeps names and defaults
from having a second home; the checks across keys follow the table.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.common.limits import SOCKET_REQUEST_MAX_BYTES_DEFAULT
from odradek.config.authorizer import AUTHORIZER_KEYS
from odradek.config.connection_limits import (
    INT_MAX,
    listener_connection_properties,
    normalize_ip_overrides,
    parse_listener_connection_key,
    parse_listener_connection_value,
)
from odradek.config.endpoints import (
    CONTROL_PLANE_LISTENER_NAME,
    DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP,
    SASL_SECURITY_PROTOCOLS,
    TLS_SECURITY_PROTOCOLS,
    Endpoint,
    HostPort,
    Listener,
    ListenerProtocol,
    ListenerRole,
    SecurityProtocol,
    parse_address,
    parse_advertised_listeners,
    parse_listener_name,
    parse_listeners,
    parse_security_protocol_map,
    parse_zookeeper_connect,
)
from odradek.config.keys import (
    REQUIRED,
    ConfigKey,
    ConfigType,
    invalid_value,
    missing_required,
    optional_string,
)
from odradek.config.oauthbearer import OAUTHBEARER_KEYS, check_validator_keys
from odradek.config.properties import PropertiesConfig
from odradek.config.sasl import (
    SASL_KEYS,
    SaslSettings,
    listener_sasl_properties,
    parse_listener_sasl_key,
    parse_listener_sasl_value,
    unsupported_sasl_key,
)
from odradek.config.ssl import (
    LISTENER_PREFIX,
    SSL_KEYS,
    SslSettings,
    listener_override_properties,
    parse_listener_overrides,
    unsupported_key,
)
from odradek.config.topic import CONFIG_KEYS, TopicConfig
from odradek.config.zookeeper_tls import (
    ZK_CLIENT_KEYS,
    ZkClientSettings,
    unsupported_zk_key,
)
from odradek.errors import InvalidConfigError

__all__ = ["BROKER_KEYS", "TOPIC_CONFIG_SYNONYMS", "BrokerConfig"]

log = logging.getLogger(__name__)

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS
_NON_ROUTABLE = ("0.0.0.0", "::")
# Kafka derives the inter-broker listener from security.inter.broker.protocol, PLAINTEXT.
DEFAULT_INTER_BROKER_LISTENER_NAME = "PLAINTEXT"
DEFAULT_LISTENERS = f"PLAINTEXT://127.0.0.1:9092,{CONTROL_PLANE_LISTENER_NAME}://127.0.0.1:9091"
RACK_FILE_POLL_S = 0.5  # how often a broker waiting for odradek.broker.rack.file looks again


def _zookeeper_connect(name: str, raw: object) -> str:
    """The connect string, checked and normalised; kazoo takes it as it is."""
    return str(parse_zookeeper_connect(name, raw))


def _log_dirs(name: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list | tuple) or not all(isinstance(d, str) for d in raw):
        raise invalid_value(name, raw, "Expected a value of type LIST")
    dirs = tuple(d.strip() for d in raw if d.strip())
    if not dirs:
        raise invalid_value(name, ",".join(raw), "at least one directory is required")
    normalised = [os.path.normpath(d) for d in dirs]
    for d in normalised:
        if normalised.count(d) > 1:
            raise invalid_value(name, ",".join(dirs), f"directory {d} is listed twice")
    return dirs


def _log_dir(name: str, raw: object) -> str:
    return ",".join(_log_dirs(name, raw))


def _topic_row(name: str, topic_name: str, **changes: object) -> ConfigKey:
    """A broker row that is the default of a topic row: same type, bounds and documentation."""
    return dataclasses.replace(CONFIG_KEYS[topic_name], name=name, **changes)


_T = ConfigType

# Kafka 3.x names and defaults (KafkaConfig); odradek.* keys are ours.
BROKER_KEYS: Mapping[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            "broker.id", _T.INT, REQUIRED, "This broker's id, unique in the cluster.", minimum=0
        ),
        ConfigKey(
            "zookeeper.connect",
            _T.STRING,
            REQUIRED,
            "ZooKeeper ensemble and optional chroot: host:port[,host:port...][/chroot].",
            convert=_zookeeper_connect,
        ),
        ConfigKey(
            "broker.rack",
            _T.STRING,
            None,
            "Rack or zone of this broker; replicas of a partition are spread across racks.",
            convert=optional_string,
        ),
        ConfigKey(
            "odradek.broker.rack.file",
            _T.STRING,
            None,
            "A file whose content is broker.rack: the broker waits at start for it to be "
            "non-empty (a Kubernetes downward API file). Not together with broker.rack.",
            convert=optional_string,
        ),
        ConfigKey(
            "odradek.broker.rack.file.timeout.ms",
            _T.LONG,
            600000,
            "How long a broker waits for odradek.broker.rack.file; then it refuses to start.",
            minimum=0,
        ),
        ConfigKey(
            "listeners",
            _T.LIST,
            DEFAULT_LISTENERS,
            "Where the Kafka protocol is served: NAME://host:port, one server per listener.",
            convert=parse_listeners,
        ),
        ConfigKey(
            "advertised.listeners",
            _T.LIST,
            None,
            "Addresses registered in ZooKeeper for clients and brokers; default: listeners.",
            convert=parse_advertised_listeners,
        ),
        ConfigKey(
            "listener.security.protocol.map",
            _T.LIST,
            DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP,
            "Security protocol of each listener, NAME:PROTOCOL: PLAINTEXT, SSL, SASL_PLAINTEXT or "
            "SASL_SSL.",
            convert=parse_security_protocol_map,
        ),
        ConfigKey(
            "control.plane.listener.name",
            _T.STRING,
            CONTROL_PLANE_LISTENER_NAME,
            "The listener that serves the controller's requests, and only them; required.",
            convert=parse_listener_name,
        ),
        ConfigKey(
            "inter.broker.listener.name",
            _T.STRING,
            None,
            "The listener other brokers use (replication); default: PLAINTEXT.",
            convert=parse_listener_name,
        ),
        ConfigKey(
            "odradek.admin.listener",
            _T.STRING,
            "127.0.0.1:9644",
            "host:port of the HTTP server for /metrics, /healthz, /readyz; empty: off.",
            convert=parse_address,
        ),
        ConfigKey(
            "odradek.listeners.file",
            _T.STRING,
            "",
            "A file written once every listener is bound: the host:port each got (JSON), for a "
            "launcher that starts the process on port 0; empty: none.",
        ),
        *SSL_KEYS,
        *AUTHORIZER_KEYS,
        *SASL_KEYS,
        *ZK_CLIENT_KEYS,
        ConfigKey(
            "zookeeper.session.timeout.ms",
            _T.INT,
            18000,
            "ZooKeeper session timeout; a process silent this long loses its ephemeral nodes.",
            minimum=1,
        ),
        ConfigKey(
            "zookeeper.connection.timeout.ms",
            _T.INT,
            None,
            "How long to wait to connect to ZooKeeper; default: zookeeper.session.timeout.ms.",
            minimum=1,
        ),
        ConfigKey(
            "socket.request.max.bytes",
            _T.INT,
            SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            "Largest request accepted; a larger size prefix closes the connection.",
            minimum=1,
        ),
        ConfigKey(
            "queued.max.requests",
            _T.INT,
            500,
            "Requests read but not yet handled, all connections together, before reads pause.",
            minimum=1,
        ),
        ConfigKey(
            "queued.max.request.bytes",
            _T.LONG,
            268435456,
            "Bytes of large requests held in memory, all connections; reads pause at the limit. "
            "-1: no limit (Kafka's default). At least socket.request.max.bytes.",
            minimum=-1,
        ),
        ConfigKey(
            "connections.max.idle.ms",
            _T.LONG,
            600000,
            "A connection with no request in progress and nothing received this long is closed.",
            minimum=1,
        ),
        ConfigKey(
            "odradek.socket.request.receive.timeout.ms",
            _T.LONG,
            60000,
            "A request whose bytes take longer than this to arrive closes its connection.",
            minimum=1,
        ),
        ConfigKey(
            "max.connections",
            _T.INT,
            1000,
            "Connections open at once, all listeners together, and the default of each "
            "listener's listener.name.<l>.max.connections; more are refused, except on the "
            "inter-broker listener, which closes the least recently used client connection "
            "instead (KIP-402). Kafka's default: no limit.",
            minimum=0,
        ),
        ConfigKey(
            "max.connections.per.ip",
            _T.INT,
            2147483647,
            "Connections from one IP address at once (client listeners); more are refused.",
            minimum=0,
        ),
        ConfigKey(
            "max.connections.per.ip.overrides",
            _T.STRING,
            "",
            "Per-IP (or host name) exceptions to max.connections.per.ip: host:count,...",
            convert=normalize_ip_overrides,
        ),
        ConfigKey(
            "max.connection.creation.rate",
            _T.INT,
            2147483647,
            "New connections per second, all client listeners together (KIP-612); accepting "
            "waits while the rate is over it. Per listener: "
            "listener.name.<l>.max.connection.creation.rate.",
            minimum=0,
        ),
        ConfigKey(
            "max.broker.partitions",
            _T.INT,
            -1,
            "Replicas this broker may hold (KIP-578's name); -1: derived from the open-files "
            "limit (broker/replica_budget.py). Registered so CreateTopics can check it.",
            minimum=-1,
        ),
        ConfigKey(
            "odradek.open.files.reserved",
            _T.INT,
            -1,
            "Open files kept out of the replica budget for connections, checkpoints and "
            "inactive segments; -1: a quarter of the open-files limit.",
            minimum=-1,
        ),
        ConfigKey(
            "odradek.test.open.files.limit",
            _T.INT,
            -1,
            "TEST ONLY: lower RLIMIT_NOFILE (soft and hard) to this at start; -1: leave it.",
            minimum=-1,
        ),
        ConfigKey(
            "odradek.connection.max.inflight.requests",
            _T.INT,
            100,
            "Requests of one connection read but not yet answered; reading pauses there.",
            minimum=1,
        ),
        ConfigKey(
            "num.partitions",
            _T.INT,
            1,
            "Partitions of a topic created without a count (auto-created or -1).",
            minimum=1,
        ),
        ConfigKey(
            "default.replication.factor",
            _T.INT,
            1,
            "Replication factor of a topic created without one (auto-created or -1).",
            minimum=1,
        ),
        ConfigKey(
            "auto.create.topics.enable",
            _T.BOOLEAN,
            True,
            "Whether a Metadata request for an unknown topic from a client that allows it "
            "(v4+ allow_auto_topic_creation; always before v4) creates it with num.partitions "
            "and default.replication.factor, answering LEADER_NOT_AVAILABLE meanwhile (Kafka's "
            "rule and default). At most 10 topics per request are created.",
        ),
        ConfigKey(
            "delete.topic.enable",
            _T.BOOLEAN,
            True,
            "Whether DeleteTopics may delete topics.",
        ),
        # Kafka declares the two numbers below without bounds; a negative count (no attempt at
        # all) or backoff (Thread.sleep throws at shutdown) is refused here, at start.
        ConfigKey(
            "controlled.shutdown.enable",
            _T.BOOLEAN,
            True,
            "Whether SIGTERM first asks the controller to move this broker's leaderships and "
            "take it out of the ISRs (ControlledShutdown) before it stops.",
        ),
        ConfigKey(
            "controlled.shutdown.max.retries",
            _T.INT,
            3,
            "ControlledShutdown attempts while partitions remain or no controller answers; "
            "then the broker stops anyway.",
            minimum=0,
        ),
        ConfigKey(
            "controlled.shutdown.retry.backoff.ms",
            _T.LONG,
            5000,
            "Pause between two ControlledShutdown attempts.",
            minimum=0,
        ),
        ConfigKey(
            "controller.socket.timeout.ms",
            _T.INT,
            30000,
            "How long one request to the controller (ControlledShutdown) may take, finding the "
            "controller included.",
            minimum=1,
        ),
        # The group coordinator (Kafka's GroupCoordinatorConfig), read by odradek.groups.
        ConfigKey(
            "offsets.topic.num.partitions",
            _T.INT,
            50,
            "Partitions of __consumer_offsets, fixed when it is created on first use: each "
            "group lives in one of them, decided by its id's hash.",
            minimum=1,
        ),
        ConfigKey(
            "offsets.topic.replication.factor",
            _T.INT,
            3,
            "Replication factor of __consumer_offsets. While fewer brokers are alive the topic is "
            "not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE.",
            minimum=1,
            maximum=32767,
        ),
        ConfigKey(
            "offsets.topic.segment.bytes",
            _T.INT,
            104857600,
            "segment.bytes of __consumer_offsets (small segments compact and load faster).",
            minimum=1,
        ),
        ConfigKey(
            "offsets.commit.timeout.ms",
            _T.INT,
            5000,
            "How long a write of the coordinator (commit, group metadata) may wait for the "
            "ISR before the request fails with a retriable error.",
            minimum=1,
        ),
        ConfigKey(
            "offsets.retention.minutes",
            _T.INT,
            10080,
            "Committed offsets of a group expire this long after it became empty (for a group "
            "without a protocol: after the commit).",
            minimum=1,
        ),
        ConfigKey(
            "offsets.retention.check.interval.ms",
            _T.LONG,
            600000,
            "How often expired offsets and empty groups are removed.",
            minimum=1,
        ),
        ConfigKey(
            "offset.metadata.max.bytes",
            _T.INT,
            4096,
            "The longest metadata string a commit may carry (else OFFSET_METADATA_TOO_LARGE).",
            minimum=0,
        ),
        ConfigKey(
            "group.min.session.timeout.ms",
            _T.INT,
            6000,
            "The shortest session.timeout.ms a classic member may ask for.",
            minimum=0,
        ),
        ConfigKey(
            "group.max.session.timeout.ms",
            _T.INT,
            1800000,
            "The longest session.timeout.ms a classic member may ask for.",
            minimum=0,
        ),
        ConfigKey(
            "group.initial.rebalance.delay.ms",
            _T.INT,
            3000,
            "How long the first rebalance of an empty classic group waits for more members.",
            minimum=0,
        ),
        # Group bounds (issue 23, docs/security.md): Kafka's group.max.size defaults to
        # 2^31-1, which lets one client grow a coordinator without bound; 1000 is a generous
        # group (a member per partition of a 1000-partition topic) that a coordinator holds.
        ConfigKey(
            "group.max.size",
            _T.INT,
            1000,
            "The most members a classic group may have (members and pending member ids "
            "together); more are refused with GROUP_MAX_SIZE_REACHED.",
            minimum=1,
        ),
        ConfigKey(
            "odradek.group.member.metadata.max.bytes",
            _T.INT,
            1048576,
            "The most bytes of one member's metadata: a classic member's protocol metadata "
            "(all its protocols) or its assignment, a consumer-protocol member's subscription "
            "(topic names, regex). More is refused with INVALID_REQUEST.",
            minimum=1,
        ),
        ConfigKey(
            "odradek.group.metadata.max.bytes",
            _T.INT,
            4194304,
            "The most bytes of metadata and assignments all members of one classic group hold "
            "(so also the most the leader's JoinGroup answer carries). A join beyond it is "
            "refused with GROUP_MAX_SIZE_REACHED, a SyncGroup with INVALID_REQUEST.",
            minimum=1,
        ),
        ConfigKey(
            "odradek.group.coordinator.metadata.max.bytes",
            _T.LONG,
            67108864,
            "The most bytes of member metadata, assignments and pending member ids the group "
            "coordinator of a broker holds, all groups together; a join beyond it is refused "
            "with COORDINATOR_NOT_AVAILABLE (retriable: the client backs off and retries).",
            minimum=1,
        ),
        ConfigKey(
            "odradek.group.max.pending.members.per.connection",
            _T.INT,
            16,
            "The most pending member ids (KIP-394: answered MEMBER_ID_REQUIRED, not joined "
            "yet) that JoinGroups of one connection may hold; more are refused with "
            "GROUP_MAX_SIZE_REACHED.",
            minimum=1,
        ),
        ConfigKey(
            "group.coordinator.rebalance.protocols",
            _T.LIST,
            ("classic", "consumer"),
            "Rebalance protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848's "
            "ConsumerGroupHeartbeat); classic cannot be turned off.",
            choices=("classic", "consumer"),
        ),
        ConfigKey(
            "group.consumer.session.timeout.ms",
            _T.INT,
            45000,
            "A consumer-protocol member that has not heartbeated for this long is removed.",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.min.session.timeout.ms",
            _T.INT,
            45000,
            "The shortest group.consumer.session.timeout.ms.",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.max.session.timeout.ms",
            _T.INT,
            60000,
            "The longest group.consumer.session.timeout.ms.",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.heartbeat.interval.ms",
            _T.INT,
            5000,
            "How often consumer-protocol members heartbeat (told in every response).",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.min.heartbeat.interval.ms",
            _T.INT,
            5000,
            "The shortest group.consumer.heartbeat.interval.ms.",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.max.heartbeat.interval.ms",
            _T.INT,
            15000,
            "The longest group.consumer.heartbeat.interval.ms.",
            minimum=1,
        ),
        ConfigKey(
            "group.consumer.assignors",
            _T.LIST,
            ("uniform", "range"),
            "Server-side assignors of consumer-protocol groups; the first is the default.",
            choices=("uniform", "range"),
        ),
        ConfigKey(
            "group.consumer.max.size",
            _T.INT,
            1000,
            "The most members a consumer-protocol group may have (the same reasoning as "
            "group.max.size); more are refused with GROUP_MAX_SIZE_REACHED.",
            minimum=1,
        ),
        # The transaction coordinator (Kafka's TransactionStateManagerConfig and
        # TransactionLogConfig), read by odradek.transactions.
        ConfigKey(
            "transaction.max.timeout.ms",
            _T.INT,
            900000,
            "The longest transaction.timeout.ms a producer may ask for (else InitProducerId "
            "answers INVALID_TRANSACTION_TIMEOUT).",
            minimum=1,
        ),
        ConfigKey(
            "transactional.id.expiration.ms",
            _T.INT,
            604800000,
            "A transactional id without a transaction for this long is forgotten (its "
            "producer id and epoch with it).",
            minimum=1,
        ),
        ConfigKey(
            "transaction.state.log.num.partitions",
            _T.INT,
            50,
            "Partitions of __transaction_state, fixed when it is created on first use: each "
            "transactional id lives in one of them, decided by its hash.",
            minimum=1,
        ),
        ConfigKey(
            "transaction.state.log.replication.factor",
            _T.INT,
            3,
            "Replication factor of __transaction_state. While fewer brokers are alive the topic "
            "is not created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE.",
            minimum=1,
            maximum=32767,
        ),
        ConfigKey(
            "transaction.state.log.min.isr",
            _T.INT,
            2,
            "min.insync.replicas of __transaction_state. Above "
            "transaction.state.log.replication.factor the broker refuses to start.",
            minimum=1,
        ),
        ConfigKey(
            "transaction.state.log.segment.bytes",
            _T.INT,
            104857600,
            "segment.bytes of __transaction_state (small segments compact and load faster).",
            minimum=1,
        ),
        ConfigKey(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            _T.INT,
            10000,
            "How often transactions past their timeout are aborted (their producer fenced), and "
            "completions whose markers are not written yet are driven again.",
            minimum=1,
        ),
        ConfigKey(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            _T.INT,
            3600000,
            "How often expired transactional ids are removed.",
            minimum=1,
        ),
        _topic_row("min.insync.replicas", "min.insync.replicas"),
        _topic_row("unclean.leader.election.enable", "unclean.leader.election.enable"),
        ConfigKey(
            "replica.lag.time.max.ms",
            _T.LONG,
            30000,
            "A follower that has not caught up for this long leaves the ISR.",
            minimum=1,
        ),
        ConfigKey(
            "replica.high.watermark.checkpoint.interval.ms",
            _T.LONG,
            5000,
            "How often each log directory's high-watermark checkpoint is written.",
            minimum=1,
        ),
        ConfigKey(
            "num.replica.fetchers",
            _T.INT,
            1,
            "Fetchers (connections) per leader broker that copy its partitions to this one.",
            minimum=1,
        ),
        ConfigKey(
            "fetch.max.bytes",
            _T.INT,
            57671680,
            "Bytes a fetch is answered with at most, all partitions together, whatever the "
            "fetch asks for (consumers' and followers' alike; a larger first batch still comes "
            "whole, so a consumer makes progress). Static, as in Kafka.",
            minimum=1024,
        ),
        ConfigKey(
            "replica.fetch.max.bytes",
            _T.INT,
            1048576,
            "Bytes a follower asks for per partition and fetch (a larger first batch still "
            "comes whole).",
            minimum=0,
        ),
        ConfigKey(
            "replica.fetch.response.max.bytes",
            _T.INT,
            10485760,
            "Bytes a follower asks for per fetch, all partitions together.",
            minimum=0,
        ),
        ConfigKey(
            "replica.fetch.wait.max.ms",
            _T.INT,
            500,
            "How long a follower's fetch waits at the leader for new records; keep it below "
            "replica.lag.time.max.ms.",
            minimum=0,
        ),
        ConfigKey(
            "replica.fetch.min.bytes",
            _T.INT,
            1,
            "Bytes a follower's fetch waits for at the leader before it is answered.",
            minimum=1,
        ),
        ConfigKey(
            "replica.fetch.backoff.ms",
            _T.INT,
            1000,
            "Pause of a follower's fetcher after a failed fetch.",
            minimum=0,
        ),
        ConfigKey(
            "replica.socket.timeout.ms",
            _T.INT,
            30000,
            "Timeout of a follower's fetch requests, on top of replica.fetch.wait.max.ms.",
            minimum=1,
        ),
        ConfigKey(
            "quota.window.num",
            _T.INT,
            11,
            "Number of samples the client quotas measure their rates over.",
            minimum=1,
        ),
        ConfigKey(
            "quota.window.size.seconds",
            _T.INT,
            1,
            "Time span of each sample of the client quotas' rates.",
            minimum=1,
        ),
        ConfigKey(
            "replication.quota.window.num",
            _T.INT,
            11,
            "Number of samples the replication throttles measure their rates over.",
            minimum=1,
        ),
        ConfigKey(
            "replication.quota.window.size.seconds",
            _T.INT,
            1,
            "Time span of each sample of the replication throttles' rates.",
            minimum=1,
        ),
        ConfigKey(
            "max.incremental.fetch.session.cache.slots",
            _T.INT,
            1000,
            "Incremental fetch sessions (KIP-227) kept at once; 0: fetches are sessionless.",
            minimum=0,
        ),
        ConfigKey(
            "odradek.max.incremental.fetch.session.cache.partitions",
            _T.INT,
            100000,
            "Partitions cached across all fetch sessions, up to ~700 B each (Kafka: no bound).",
            minimum=0,
        ),
        ConfigKey(
            "log.dirs",
            _T.LIST,
            None,
            "Data directories, one per disk (JBOD); required unless log.dir is set.",
            convert=_log_dirs,
        ),
        ConfigKey(
            "log.dir",
            _T.STRING,
            None,
            "Data directory, used only when log.dirs is not set.",
            convert=_log_dir,
        ),
        _topic_row("message.max.bytes", "max.message.bytes"),
        _topic_row("compression.type", "compression.type"),
        _topic_row("log.segment.bytes", "segment.bytes"),
        _topic_row("log.roll.ms", "segment.ms", default=None),
        ConfigKey(
            "log.roll.hours",
            _T.INT,
            168,
            "Time after which the log rolls a new segment, in hours; log.roll.ms wins.",
            minimum=1,
        ),
        _topic_row("log.roll.jitter.ms", "segment.jitter.ms", default=None),
        ConfigKey(
            "log.roll.jitter.hours",
            _T.INT,
            0,
            "Maximum jitter subtracted from the roll time, in hours; log.roll.jitter.ms wins.",
            minimum=0,
        ),
        _topic_row("log.index.interval.bytes", "index.interval.bytes"),
        _topic_row("log.index.size.max.bytes", "segment.index.bytes"),
        _topic_row("log.preallocate", "preallocate"),
        _topic_row("log.segment.delete.delay.ms", "file.delete.delay.ms"),
        # Kafka puts no bound on log.retention.*: any negative value means "no limit".
        _topic_row("log.retention.ms", "retention.ms", default=None, minimum=None),
        ConfigKey(
            "log.retention.minutes",
            _T.INT,
            None,
            "How long a segment is kept, in minutes; log.retention.ms wins.",
        ),
        ConfigKey(
            "log.retention.hours",
            _T.INT,
            168,
            "How long a segment is kept, in hours; log.retention.ms and .minutes win.",
        ),
        _topic_row("log.retention.bytes", "retention.bytes"),
        ConfigKey(
            "log.retention.check.interval.ms",
            _T.LONG,
            300000,
            "How often the broker looks for segments to delete under the retention rules.",
            minimum=1,
        ),
        _topic_row("log.cleanup.policy", "cleanup.policy"),
        ConfigKey(
            "log.cleaner.enable",
            _T.BOOLEAN,
            True,
            "Whether the log cleaner runs; compacted topics need it.",
        ),
        _topic_row("log.cleaner.delete.retention.ms", "delete.retention.ms"),
        _topic_row("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"),
        _topic_row("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
        _topic_row("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
        _topic_row("log.flush.interval.messages", "flush.messages"),
        _topic_row("log.flush.interval.ms", "flush.ms", default=None),
        ConfigKey(
            "log.flush.scheduler.interval.ms",
            _T.LONG,
            CONFIG_KEYS["flush.ms"].default,
            "How often the flusher checks logs; also flush.ms when log.flush.interval.ms unset.",
            minimum=0,
        ),
        ConfigKey(
            "log.flush.offset.checkpoint.interval.ms",
            _T.INT,
            60000,
            "How often each log directory's recovery-point checkpoint is written.",
            minimum=0,
        ),
        _topic_row("log.message.timestamp.type", "message.timestamp.type"),
        _topic_row("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms"),
        _topic_row("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms"),
    )
}

# Topic key -> the broker keys that give its default, first set wins, with the factor to ms.
# A key with none keeps its topic default (Kafka's ServerTopicConfigSynonyms leaves it out).
TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "follower.replication.throttled.replicas": (),  # no broker default, as in Kafka
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "leader.replication.throttled.replicas": (),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", MINUTE_MS),
        ("log.retention.hours", HOUR_MS),
    ),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}

if set(TOPIC_CONFIG_SYNONYMS) != set(CONFIG_KEYS) or any(
    name not in BROKER_KEYS or BROKER_KEYS[synonyms[-1][0]].nullable
    for synonyms in TOPIC_CONFIG_SYNONYMS.values()
    for name, _ in synonyms
):
    raise RuntimeError("every topic key needs an entry; broker synonyms end with a default")


def _default(name: str) -> object:
    return BROKER_KEYS[name].default


@dataclass(frozen=True, slots=True)
class BrokerConfig(PropertiesConfig):
    """A broker's static configuration; invalid values raise ``InvalidConfigError``."""

    KEYS: ClassVar[Mapping[str, ConfigKey]] = BROKER_KEYS
    KIND: ClassVar[str] = "broker"

    broker_id: int
    zookeeper_connect: str
    broker_rack: str | None = None
    odradek_broker_rack_file: str | None = None
    odradek_broker_rack_file_timeout_ms: int = _default("odradek.broker.rack.file.timeout.ms")
    listeners: tuple[Endpoint, ...] = _default("listeners")
    advertised_listeners: tuple[Endpoint, ...] | None = None
    listener_security_protocol_map: tuple[ListenerProtocol, ...] = _default(
        "listener.security.protocol.map"
    )
    control_plane_listener_name: str = _default("control.plane.listener.name")
    inter_broker_listener_name: str | None = None
    odradek_admin_listener: HostPort | None = _default("odradek.admin.listener")
    odradek_listeners_file: str = _default("odradek.listeners.file")
    ssl_keystore_type: str = _default("ssl.keystore.type")
    ssl_keystore_location: str | None = None
    ssl_keystore_key: str | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_key_password: str | None = None
    ssl_truststore_type: str = _default("ssl.truststore.type")
    ssl_truststore_location: str | None = None
    ssl_truststore_certificates: str | None = None
    ssl_client_auth: str = _default("ssl.client.auth")
    ssl_enabled_protocols: tuple[str, ...] = _default("ssl.enabled.protocols")
    ssl_principal_mapping_rules: str = _default("ssl.principal.mapping.rules")
    authorizer_class_name: str = _default("authorizer.class.name")
    super_users: str = _default("super.users")
    allow_everyone_if_no_acl_found: bool = _default("allow.everyone.if.no.acl.found")
    sasl_enabled_mechanisms: tuple[str, ...] = _default("sasl.enabled.mechanisms")
    sasl_mechanism_inter_broker_protocol: str | None = None
    connection_failed_authentication_delay_ms: int = _default(
        "connection.failed.authentication.delay.ms"
    )
    sasl_server_max_receive_size: int = _default("sasl.server.max.receive.size")
    connections_max_reauth_ms: int = _default("connections.max.reauth.ms")
    sasl_oauthbearer_jwks_endpoint_url: str | None = None
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = _default(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms"
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = _default(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"
    )
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = _default(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
    )
    sasl_oauthbearer_expected_audience: tuple[str, ...] | None = None
    sasl_oauthbearer_expected_issuer: str | None = None
    sasl_oauthbearer_scope_claim_name: str = _default("sasl.oauthbearer.scope.claim.name")
    sasl_oauthbearer_sub_claim_name: str = _default("sasl.oauthbearer.sub.claim.name")
    sasl_oauthbearer_clock_skew_seconds: int = _default("sasl.oauthbearer.clock.skew.seconds")
    zookeeper_set_acl: bool = False
    zookeeper_ssl_client_enable: bool = False
    zookeeper_clientCnxnSocket: str | None = None  # noqa: N815 (Kafka's key name)
    zookeeper_ssl_keystore_location: str | None = None
    zookeeper_ssl_keystore_password: str | None = None
    zookeeper_ssl_keystore_type: str | None = None
    zookeeper_ssl_truststore_location: str | None = None
    zookeeper_ssl_truststore_type: str | None = None
    zookeeper_ssl_endpoint_identification_algorithm: str = "HTTPS"
    zookeeper_ssl_protocol: str = "TLSv1.2"
    zookeeper_ssl_enabled_protocols: tuple[str, ...] | None = None
    zookeeper_session_timeout_ms: int = _default("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = None
    socket_request_max_bytes: int = _default("socket.request.max.bytes")
    queued_max_requests: int = _default("queued.max.requests")
    queued_max_request_bytes: int = _default("queued.max.request.bytes")
    connections_max_idle_ms: int = _default("connections.max.idle.ms")
    odradek_socket_request_receive_timeout_ms: int = _default(
        "odradek.socket.request.receive.timeout.ms"
    )
    max_connections: int = _default("max.connections")
    max_connections_per_ip: int = _default("max.connections.per.ip")
    max_connections_per_ip_overrides: str = _default("max.connections.per.ip.overrides")
    max_connection_creation_rate: int = _default("max.connection.creation.rate")
    max_broker_partitions: int = _default("max.broker.partitions")
    odradek_open_files_reserved: int = _default("odradek.open.files.reserved")
    odradek_test_open_files_limit: int = _default("odradek.test.open.files.limit")
    odradek_connection_max_inflight_requests: int = _default(
        "odradek.connection.max.inflight.requests"
    )
    num_partitions: int = _default("num.partitions")
    default_replication_factor: int = _default("default.replication.factor")
    auto_create_topics_enable: bool = _default("auto.create.topics.enable")
    delete_topic_enable: bool = _default("delete.topic.enable")
    controlled_shutdown_enable: bool = _default("controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = _default("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = _default("controlled.shutdown.retry.backoff.ms")
    controller_socket_timeout_ms: int = _default("controller.socket.timeout.ms")
    offsets_topic_num_partitions: int = _default("offsets.topic.num.partitions")
    offsets_topic_replication_factor: int = _default("offsets.topic.replication.factor")
    offsets_topic_segment_bytes: int = _default("offsets.topic.segment.bytes")
    offsets_commit_timeout_ms: int = _default("offsets.commit.timeout.ms")
    offsets_retention_minutes: int = _default("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _default("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = _default("offset.metadata.max.bytes")
    group_min_session_timeout_ms: int = _default("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _default("group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = _default("group.initial.rebalance.delay.ms")
    group_max_size: int = _default("group.max.size")
    odradek_group_member_metadata_max_bytes: int = _default(
        "odradek.group.member.metadata.max.bytes"
    )
    odradek_group_metadata_max_bytes: int = _default("odradek.group.metadata.max.bytes")
    odradek_group_coordinator_metadata_max_bytes: int = _default(
        "odradek.group.coordinator.metadata.max.bytes"
    )
    odradek_group_max_pending_members_per_connection: int = _default(
        "odradek.group.max.pending.members.per.connection"
    )
    group_coordinator_rebalance_protocols: tuple[str, ...] = _default(
        "group.coordinator.rebalance.protocols"
    )
    group_consumer_session_timeout_ms: int = _default("group.consumer.session.timeout.ms")
    group_consumer_min_session_timeout_ms: int = _default("group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _default("group.consumer.max.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _default("group.consumer.heartbeat.interval.ms")
    group_consumer_min_heartbeat_interval_ms: int = _default(
        "group.consumer.min.heartbeat.interval.ms"
    )
    group_consumer_max_heartbeat_interval_ms: int = _default(
        "group.consumer.max.heartbeat.interval.ms"
    )
    group_consumer_assignors: tuple[str, ...] = _default("group.consumer.assignors")
    group_consumer_max_size: int = _default("group.consumer.max.size")
    transaction_max_timeout_ms: int = _default("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = _default("transactional.id.expiration.ms")
    transaction_state_log_num_partitions: int = _default("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor: int = _default(
        "transaction.state.log.replication.factor"
    )
    transaction_state_log_min_isr: int = _default("transaction.state.log.min.isr")
    transaction_state_log_segment_bytes: int = _default("transaction.state.log.segment.bytes")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _default(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _default(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    min_insync_replicas: int = _default("min.insync.replicas")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    replica_lag_time_max_ms: int = _default("replica.lag.time.max.ms")
    replica_high_watermark_checkpoint_interval_ms: int = _default(
        "replica.high.watermark.checkpoint.interval.ms"
    )
    num_replica_fetchers: int = _default("num.replica.fetchers")
    fetch_max_bytes: int = _default("fetch.max.bytes")
    replica_fetch_max_bytes: int = _default("replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = _default("replica.fetch.response.max.bytes")
    replica_fetch_wait_max_ms: int = _default("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = _default("replica.fetch.min.bytes")
    replica_fetch_backoff_ms: int = _default("replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = _default("replica.socket.timeout.ms")
    quota_window_num: int = _default("quota.window.num")
    quota_window_size_seconds: int = _default("quota.window.size.seconds")
    replication_quota_window_num: int = _default("replication.quota.window.num")
    replication_quota_window_size_seconds: int = _default("replication.quota.window.size.seconds")
    max_incremental_fetch_session_cache_slots: int = _default(
        "max.incremental.fetch.session.cache.slots"
    )
    odradek_max_incremental_fetch_session_cache_partitions: int = _default(
        "odradek.max.incremental.fetch.session.cache.partitions"
    )
    log_dirs: tuple[str, ...] | None = None
    log_dir: str | None = None
    message_max_bytes: int = _default("message.max.bytes")
    compression_type: str = _default("compression.type")
    log_segment_bytes: int = _default("log.segment.bytes")
    log_roll_ms: int | None = None
    log_roll_hours: int = _default("log.roll.hours")
    log_roll_jitter_ms: int | None = None
    log_roll_jitter_hours: int = _default("log.roll.jitter.hours")
    log_index_interval_bytes: int = _default("log.index.interval.bytes")
    log_index_size_max_bytes: int = _default("log.index.size.max.bytes")
    log_preallocate: bool = _default("log.preallocate")
    log_segment_delete_delay_ms: int = _default("log.segment.delete.delay.ms")
    log_retention_ms: int | None = None
    log_retention_minutes: int | None = None
    log_retention_hours: int = _default("log.retention.hours")
    log_retention_bytes: int = _default("log.retention.bytes")
    log_retention_check_interval_ms: int = _default("log.retention.check.interval.ms")
    log_cleanup_policy: tuple[str, ...] = _default("log.cleanup.policy")
    log_cleaner_enable: bool = _default("log.cleaner.enable")
    log_cleaner_delete_retention_ms: int = _default("log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio: float = _default("log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: int = _default("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _default("log.cleaner.max.compaction.lag.ms")
    log_flush_interval_messages: int = _default("log.flush.interval.messages")
    log_flush_interval_ms: int | None = None
    log_flush_scheduler_interval_ms: int = _default("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _default(
        "log.flush.offset.checkpoint.interval.ms"
    )
    log_message_timestamp_type: str = _default("log.message.timestamp.type")
    log_message_timestamp_before_max_ms: int = _default("log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = _default("log.message.timestamp.after.max.ms")
    # listener.name.<l>.ssl.* overrides as (LISTENER, key, value), sorted (config.ssl)
    listener_ssl_overrides: tuple[tuple[str, str, object], ...] = ()
    # listener.name.<l>.sasl.enabled.mechanisms, .<mechanism>.sasl.jaas.config and
    # .<mechanism>.connections.max.reauth.ms, as (LISTENER, key, value) sorted (config.sasl)
    listener_sasl_overrides: tuple[tuple[str, str, object], ...] = ()
    # listener.name.<l>.max.connections and .max.connection.creation.rate, as (LISTENER, key,
    # value) sorted (config.connection_limits)
    listener_connection_overrides: tuple[tuple[str, str, int], ...] = ()

    # the keys server.properties and --override named (PropertiesConfig.NAMED_KEYS_FIELD);
    # empty for a config built by hand. Not compared: it says where values came from, not what
    # they are.
    named_keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    PATTERNED_FIELDS: ClassVar[tuple[str, ...]] = (
        "listener_ssl_overrides",
        "listener_sasl_overrides",
        "listener_connection_overrides",
    )
    NAMED_KEYS_FIELD: ClassVar[str | None] = "named_keys"

    @classmethod
    def _split_patterned(
        cls, props: Mapping[str, object]
    ) -> tuple[Mapping[str, object], dict[str, object]]:
        for name in props:
            error = unsupported_key(name) or unsupported_sasl_key(name) or unsupported_zk_key(name)
            if error is not None:
                raise error
        sasl: list[tuple[str, str, object]] = []
        limits: list[tuple[str, str, int]] = []
        others: dict[str, object] = {}
        for name, raw in props.items():
            parsed = parse_listener_sasl_key(name)
            limit = parse_listener_connection_key(name)
            if limit is not None:
                limits.append((*limit, parse_listener_connection_value(name, raw)))
            elif parsed is None:
                others[name] = raw
            else:
                sasl.append((*parsed, parse_listener_sasl_value(parsed[1], name, raw)))
        rest, overrides = parse_listener_overrides(others)
        return rest, {
            "listener_ssl_overrides": overrides,
            "listener_sasl_overrides": tuple(sorted(sasl, key=lambda o: (o[0], o[1]))),
            "listener_connection_overrides": tuple(sorted(limits)),
        }

    def _patterned_properties(self) -> dict[str, str]:
        return {
            **listener_override_properties(self.listener_ssl_overrides),
            **listener_sasl_properties(self.listener_sasl_overrides),
            **listener_connection_properties(self.listener_connection_overrides),
        }

    def listener_max_connections(self, listener_name: str) -> int:
        """``listener.name.<l>.max.connections``, or ``max.connections`` (Kafka's fallback)."""
        return self._listener_limit(listener_name, "max.connections", self.max_connections)

    def listener_max_connection_creation_rate(self, listener_name: str) -> int:
        """``listener.name.<l>.max.connection.creation.rate``; no limit when not set."""
        return self._listener_limit(listener_name, "max.connection.creation.rate", INT_MAX)

    def _listener_limit(self, listener_name: str, key: str, default: int) -> int:
        for listener, name, value in self.listener_connection_overrides:
            if listener == listener_name and name == key:
                return value
        return default

    def ssl_settings(self, listener_name: str) -> SslSettings:
        """What the SSL listener ``listener_name`` uses: its overrides over the broker's keys."""
        broker_wide = {key.name: getattr(self, key.attr) for key in SSL_KEYS}
        return SslSettings.resolve(listener_name, broker_wide, self.listener_ssl_overrides)

    def sasl_settings(self, listener_name: str) -> SaslSettings:
        """What the SASL listener ``listener_name`` uses: its overrides over the broker's keys."""
        return SaslSettings.resolve(
            listener_name,
            self.sasl_enabled_mechanisms,
            self.listener_sasl_overrides,
            self.connections_max_reauth_ms,
        )

    def zookeeper_client_settings(self) -> ZkClientSettings:
        """How this process connects to ZooKeeper (``zookeeper.ssl.*``, ``zookeeper.set.acl``)."""
        return ZkClientSettings.of(self)

    def _check(self) -> None:
        self.zookeeper_client_settings().check()
        if self.log_dirs is None and self.log_dir is None:
            raise missing_required("log.dirs")
        self._check_group_coordinator()
        if self.broker_rack is not None and self.odradek_broker_rack_file is not None:
            raise InvalidConfigError(
                "broker.rack and odradek.broker.rack.file are both set: the rack comes from one "
                "of them; remove the other"
            )
        if self.queued_max_request_bytes == 0 or (
            0 < self.queued_max_request_bytes < self.socket_request_max_bytes
        ):
            raise InvalidConfigError(
                f"queued.max.request.bytes ({self.queued_max_request_bytes}) must be -1 or at "
                f"least socket.request.max.bytes ({self.socket_request_max_bytes}): a request "
                f"that size could never be read"
            )
        self._check_listeners()
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise InvalidConfigError(
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) should always be "
                f"less than or equal to replica.lag.time.max.ms ({self.replica_lag_time_max_ms}) "
                f"to prevent frequent changes in ISR"
            )
        if self.transaction_state_log_min_isr > self.transaction_state_log_replication_factor:
            raise InvalidConfigError(
                f"transaction.state.log.min.isr ({self.transaction_state_log_min_isr}) is above "
                f"transaction.state.log.replication.factor "
                f"({self.transaction_state_log_replication_factor}): no transaction could ever "
                "be written. Lower the first or raise the second."
            )
        if self.log_cleaner_min_compaction_lag_ms > self.log_cleaner_max_compaction_lag_ms:
            raise InvalidConfigError(
                f"conflict broker config setting log.cleaner.min.compaction.lag.ms "
                f"({self.log_cleaner_min_compaction_lag_ms}) > "
                f"log.cleaner.max.compaction.lag.ms ({self.log_cleaner_max_compaction_lag_ms})"
            )
        self.topic_defaults()  # any other rule a topic checks, reported now, not at first use

    def _check_group_coordinator(self) -> None:
        """Kafka's ``GroupCoordinatorConfig`` checks: bounds in order, classic always served."""
        if "classic" not in self.group_coordinator_rebalance_protocols:
            raise InvalidConfigError(
                "group.coordinator.rebalance.protocols must contain classic (the protocol "
                "every client can fall back to)"
            )
        for low, value, high in (
            ("group.min.session.timeout.ms", None, "group.max.session.timeout.ms"),
            (
                "odradek.group.member.metadata.max.bytes",
                "odradek.group.metadata.max.bytes",
                "odradek.group.coordinator.metadata.max.bytes",
            ),
            (
                "group.consumer.min.session.timeout.ms",
                "group.consumer.session.timeout.ms",
                "group.consumer.max.session.timeout.ms",
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
        ):
            names = [n for n in (low, value, high) if n is not None]
            values = [getattr(self, n.replace(".", "_")) for n in names]
            if values != sorted(values):
                raise InvalidConfigError(
                    " <= ".join(names) + " must hold; got " + " > ".join(map(str, values))
                )
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise InvalidConfigError(
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms"
            )

    def _check_listeners(self) -> None:
        """Kafka's listener rules (``KafkaConfig.validateValues``), in Kafka's order and words."""
        protocols = dict(self.listener_security_protocol_map)
        for key, endpoints in (
            ("listeners", self.listeners),
            ("advertised.listeners", self.effective_advertised_listeners),
        ):
            listed = ",".join(map(str, endpoints))
            for endpoint in endpoints:
                protocol = protocols.get(endpoint.name)
                if protocol is None:
                    raise InvalidConfigError(
                        f"Error creating broker listeners from '{listed}' ({key}): No security "
                        f"protocol defined for listener {endpoint.name}; add it to "
                        f"listener.security.protocol.map, e.g. {endpoint.name}:PLAINTEXT"
                    )
        names = [e.name for e in self.listeners]
        advertised = [e.name for e in self.effective_advertised_listeners]
        control_plane = self.control_plane_listener_name
        if control_plane not in names:
            raise InvalidConfigError(
                f"control.plane.listener.name is {control_plane}, but listeners has no "
                f"{control_plane} listener (listeners: {','.join(map(str, self.listeners))}). "
                f"The controller's requests are served only on the control-plane listener: add "
                f"one to listeners, e.g. listeners={','.join(map(str, self.listeners))},"
                f"{control_plane}://127.0.0.1:9091 (with "
                f"{control_plane}:PLAINTEXT in listener.security.protocol.map unless it is "
                f"there), or set control.plane.listener.name to a listener kept for the "
                f"controller"
            )
        inter_broker = self.effective_inter_broker_listener_name
        for key, name in (
            ("control.plane.listener.name", control_plane),
            ("inter.broker.listener.name", inter_broker),
        ):
            if name not in protocols:
                raise InvalidConfigError(
                    f"Listener with name {name} defined in {key} not found in "
                    f"listener.security.protocol.map."
                )
        if inter_broker not in advertised:
            raise InvalidConfigError(
                f"inter.broker.listener.name must be a listener name defined in "
                f"advertised.listeners. The valid options based on currently configured "
                f"listeners are {','.join(advertised)}"
            )
        if not set(advertised) <= set(names):
            raise InvalidConfigError(
                f"advertised.listeners listener names must be equal to or a subset of the ones "
                f"defined in listeners. Found {','.join(advertised)}. The valid options based on "
                f"the current configuration are {','.join(names)}"
            )
        for endpoint in self.effective_advertised_listeners:
            if endpoint.host in _NON_ROUTABLE:
                raise InvalidConfigError(
                    f"advertised.listeners cannot use the nonroutable meta-address "
                    f"{endpoint.host}. Use a routable IP address (listener {endpoint})."
                )
        if control_plane not in advertised:
            raise InvalidConfigError(
                f"control.plane.listener.name must be a listener name defined in "
                f"advertised.listeners. The valid options based on currently configured "
                f"listeners are {','.join(advertised)}"
            )
        if control_plane == inter_broker:
            raise InvalidConfigError(
                f"control.plane.listener.name, when defined, should have a different value from "
                f"the inter broker listener name. Currently they both have the value "
                f"{control_plane}"
            )
        for key, name in (
            ("control.plane.listener.name", control_plane),
            ("inter.broker.listener.name", inter_broker),
        ):
            if protocols[name] not in (SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL):
                raise InvalidConfigError(
                    f"{key} is {name}, whose security protocol is {protocols[name].name}: "
                    f"brokers and the controller connect to each other over PLAINTEXT or SSL "
                    f"(mutual TLS) only (internal links do not speak SASL yet); map {name} to "
                    f"SSL or PLAINTEXT"
                )
        if self.sasl_mechanism_inter_broker_protocol is not None:
            raise InvalidConfigError(
                f"sasl.mechanism.inter.broker.protocol is set "
                f"({self.sasl_mechanism_inter_broker_protocol}), but internal links do not speak "
                f"SASL yet (the inter-broker and control-plane listeners are PLAINTEXT or SSL); "
                f"remove it"
            )
        self._check_sasl_listeners(protocols)
        ssl_listeners = {
            e.name for e in self.listeners if protocols[e.name] in TLS_SECURITY_PROTOCOLS
        }
        for name in ssl_listeners:
            self.ssl_settings(name).check()
        for name, key, _ in self.listener_ssl_overrides:
            if name not in ssl_listeners:
                raise InvalidConfigError(
                    f"{LISTENER_PREFIX}{name.lower()}.{key} is set, but {name} is not an SSL "
                    f"listener of this broker (listeners: {','.join(map(str, self.listeners))})"
                )

    def _check_sasl_listeners(self, protocols: Mapping[str, SecurityProtocol]) -> None:
        sasl_listeners = {
            e.name for e in self.listeners if protocols[e.name] in SASL_SECURITY_PROTOCOLS
        }
        for name in sorted(sasl_listeners):
            settings = self.sasl_settings(name)
            settings.check()
            if "OAUTHBEARER" in settings.enabled_mechanisms:
                check_validator_keys(
                    name, {key.name: getattr(self, key.attr) for key in OAUTHBEARER_KEYS}
                )
        for name, key, _ in self.listener_sasl_overrides:
            if name not in sasl_listeners:
                raise InvalidConfigError(
                    f"{LISTENER_PREFIX}{name.lower()}.{key} is set, but {name} is not a SASL "
                    f"listener of this broker (listeners: {','.join(map(str, self.listeners))})"
                )

    def with_rack_from_file(
        self,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> BrokerConfig:
        """This config with ``broker.rack`` read from ``odradek.broker.rack.file`` (and that key
        cleared), waiting up to its timeout for the file to exist and be non-empty; ``self``
        when the key is unset. Raises ``InvalidConfigError`` on timeout."""
        path = self.odradek_broker_rack_file
        if path is None:
            return self
        deadline = monotonic() + self.odradek_broker_rack_file_timeout_ms / 1000
        waiting_logged = False
        while True:
            try:
                with open(path, encoding="utf-8") as f:
                    content = f.read().strip()
            except FileNotFoundError:
                content = ""
            except OSError as e:
                raise InvalidConfigError(f"odradek.broker.rack.file {path}: {e}") from e
            if content:
                rack = BROKER_KEYS["broker.rack"].parse(content)
                log.info("broker.rack is %s (from %s)", rack, path)
                return dataclasses.replace(self, broker_rack=rack, odradek_broker_rack_file=None)
            if monotonic() >= deadline:
                raise InvalidConfigError(
                    f"odradek.broker.rack.file {path} is still missing or empty after "
                    f"{self.odradek_broker_rack_file_timeout_ms} ms "
                    f"(odradek.broker.rack.file.timeout.ms): no rack to start with. On "
                    f"Kubernetes the operator writes it from the node's topology label: see "
                    f"the OdradekCluster's status"
                )
            if not waiting_logged:
                log.warning("waiting for odradek.broker.rack.file %s to give broker.rack", path)
                waiting_logged = True
            sleep(min(RACK_FILE_POLL_S, max(deadline - monotonic(), 0.0)))

    @property
    def effective_advertised_listeners(self) -> tuple[Endpoint, ...]:
        """What is registered in ZooKeeper; an empty host stands for this machine's name."""
        return self.listeners if self.advertised_listeners is None else self.advertised_listeners

    @property
    def effective_inter_broker_listener_name(self) -> str:
        if self.inter_broker_listener_name is None:
            return DEFAULT_INTER_BROKER_LISTENER_NAME
        return self.inter_broker_listener_name

    def security_protocol(self, listener_name: str) -> SecurityProtocol:
        """The protocol of a listener of this broker (every listener has one: checked)."""
        return dict(self.listener_security_protocol_map)[listener_name]

    @property
    def listener_table(self) -> tuple[Listener, ...]:
        """One ``Listener`` per entry of ``listeners``, in order, with its protocol and role."""
        return tuple(
            Listener(
                endpoint.name,
                self.security_protocol(endpoint.name),
                endpoint.host,
                endpoint.port,
                ListenerRole.CONTROL_PLANE
                if endpoint.name == self.control_plane_listener_name
                else ListenerRole.CLIENT,
            )
            for endpoint in self.listeners
        )

    @property
    def effective_log_dirs(self) -> tuple[str, ...]:
        if self.log_dirs is not None:
            return self.log_dirs
        return tuple(self.log_dir.split(",")) if self.log_dir is not None else ()

    @property
    def effective_zookeeper_connection_timeout_ms(self) -> int:
        if self.zookeeper_connection_timeout_ms is None:
            return self.zookeeper_session_timeout_ms
        return self.zookeeper_connection_timeout_ms

    @property
    def effective_log_retention_ms(self) -> int:
        """Kafka's ``logRetentionTimeMillis``: ms, else minutes, else hours; < 0 means -1."""
        return max(self._synonym("retention.ms"), -1)

    @property
    def effective_log_roll_ms(self) -> int:
        return self._synonym("segment.ms")

    @property
    def effective_log_roll_jitter_ms(self) -> int:
        return self._synonym("segment.jitter.ms")

    @property
    def effective_log_flush_interval_ms(self) -> int:
        return self._synonym("flush.ms")

    def topic_defaults(self) -> TopicConfig:
        """The configuration of a topic that overrides nothing, as Kafka's ``LogConfig``."""
        props = {
            name: self._synonym(name) for name, names in TOPIC_CONFIG_SYNONYMS.items() if names
        }
        props["retention.ms"] = self.effective_log_retention_ms
        return TopicConfig.from_properties(props)

    def _synonym(self, topic_name: str) -> object:
        """The first broker synonym of ``topic_name`` that is set, converted to ms."""
        for name, factor in TOPIC_CONFIG_SYNONYMS[topic_name]:
            value = getattr(self, BROKER_KEYS[name].attr)
            if value is not None:
                return value * factor if factor != 1 else value
        raise AssertionError("the last synonym always has a default")  # checked at import


BrokerConfig.check_fields()
