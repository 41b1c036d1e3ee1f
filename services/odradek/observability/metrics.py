"""Every Prometheus metric Odradek exports, defined in this one module.

Names follow Kafka's meanings under an ``odradek_`` prefix (``odradek_broker_bytes_in_total`` is
Kafka's ``BytesInPerSec``; summing ``odradek_controller_active`` over the controllers gives
``ActiveControllerCount``). Units are last, in base units (seconds, bytes), as Prometheus asks.

Registries: each service builds its own ``CollectorRegistry`` with ``new_registry()`` and fills it
with ``common_metrics(registry)`` plus ``broker_metrics(registry)`` or
``controller_metrics(registry)``. Nothing touches prometheus_client's global registry, so tests and
several services in one process never collide. Building the same holder twice on one registry
raises ``ValueError`` (a duplicated series), which is the point.

Cardinality is bounded on purpose: every label takes values from a finite set or through a
budget, and there is never a partition label (a broker with 10 000 partitions would export 10 000
series per metric) except on two metrics whose point is the partition, each bounded: the replica
lag (``TOPIC_LABELS_MAX`` partitions) and the consumer lag
(``odradek_group_consumer_lag{group, topic, partition}``, at most ``CONSUMER_LAG_SERIES_MAX``
series; the series left out are counted in ``odradek_group_consumer_lag_series_omitted``).

- finite sets: ``error`` (kio's ``ErrorCode``), ``state`` (three values), ``reason`` (the members
  of ``broker.connection.CloseReason``), ``listener`` (the configured listeners), ``mechanism``
  and ``result`` (SASL), ``operation``, ``side`` (leader, follower), ``quota`` (the four quota
  keys), ``version`` (this build), and the Connect REST API's ``method`` (others under
  ``OVERFLOW_LABEL``), ``route`` (its route table) and ``status``;
- budgets, because clients choose them: ``topic`` (``TOPIC_LABELS_MAX`` per holder), ``api``
  (``API_LABELS_MAX``), ``user`` and ``client_id`` (``quotas.METRIC_ENTITIES_MAX`` pairs, only
  those a quota applies to). Later values are counted under ``OVERFLOW_LABEL``, which no Kafka
  topic name can equal. ``BrokerMetrics.remove_topic`` drops a deleted topic's series and frees
  its slot.

Thread-safety: prometheus_client's metrics are thread-safe, and so is every method here (the label
budgets take a lock only when a new topic or API appears). The ZooKeeper session state is swapped
in one assignment, so a scrape never sees two states at once even when kazoo's thread reports it.

Its length is deliberate: one module for every metric is what keeps names, labels and their
bounds from drifting apart between services and docs/observability.md.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from odradek import __version__
from odradek.errors import ErrorCode

NAMESPACE = "odradek"

# 0.1 ms to 10 s: a produce to the page cache takes well under a millisecond, a Fetch long poll
# waits up to its max_wait_ms (500 ms by default in most clients), acks=-1 waits for replicas.
REQUEST_LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

# 1 ms to 10 s: a healthy loop runs timers within a millisecond or two.
EVENT_LOOP_LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

TOPIC_LABELS_MAX = 2_000  # distinct topics with their own series, per broker
API_LABELS_MAX = 100  # distinct API names; Kafka has fewer than 80 APIs
OVERFLOW_LABEL = "<other>"  # '<' and '>' are illegal in Kafka topic names

CONSUMER_LAG_SERIES_MAX = 10_000  # (group, partition) pairs exported by one coordinator

# kazoo's KazooState values, lower-cased; kazoo starts a client in LOST until it connects.
ZOOKEEPER_SESSION_STATES = ("connected", "suspended", "lost")


class _LabelBudget:
    """Admits at most ``max_values`` distinct label values; the rest map to ``OVERFLOW_LABEL``."""

    def __init__(self, max_values: int) -> None:
        self._max_values = max_values
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def admit(self, value: str) -> str:
        with self._lock:
            if value in self._values:
                return value
            if len(self._values) < self._max_values:
                self._values.add(value)
                return value
            return OVERFLOW_LABEL

    def release(self, value: str) -> bool:
        with self._lock:
            if value not in self._values:
                return False
            self._values.discard(value)
            return True


@dataclass(frozen=True, slots=True)
class _TopicSeries:
    """The four per-topic counters of one topic, looked up once instead of on every request."""

    bytes_in: Counter
    bytes_out: Counter
    messages_in: Counter
    messages_out: Counter


@dataclass(frozen=True, slots=True)
class _ApiSeries:
    latency: Histogram
    succeeded: Counter  # requests{api, error="none"}: the common case, looked up once


@dataclass(frozen=True, slots=True)
class ConnectionQuotaMetrics:
    """What ``odradek.connection_quotas`` counts, on a broker's and on a controller's registry."""

    connections_rejected: Counter
    connection_accept_throttle: Counter
    connections_evicted: Counter


@dataclass(eq=False)
class BrokerMetrics:
    """A broker's metrics. Gauges are set directly (``metrics.partitions.set(n)``)."""

    bytes_in: Counter
    bytes_out: Counter
    replica_budget: Gauge
    replicas_unloaded: Gauge
    messages_in: Counter
    messages_out: Counter
    request_latency: Histogram
    requests: Counter
    partitions: Gauge
    leader_partitions: Gauge
    under_replicated_partitions: Gauge
    offline_partitions: Gauge
    offline_log_dirs: Gauge
    connections: Gauge
    connections_closed: Counter
    connection_quotas: ConnectionQuotaMetrics
    sasl_authentications: Counter
    request_memory_used: Gauge
    requests_queued: Gauge
    refused_controller_requests: Counter
    under_min_isr_partitions: Gauge
    isr_shrinks: Counter
    reassignment_bytes: Counter
    isr_expands: Counter
    purgatory_size: Gauge
    replica_max_lag: Gauge
    replica_lag: Gauge
    log_dir_moves: Gauge
    log_dir_move_bytes: Counter
    topic_labels_max: int = TOPIC_LABELS_MAX
    api_labels_max: int = API_LABELS_MAX
    _topics: dict[str, _TopicSeries] = field(default_factory=dict, repr=False)
    _apis: dict[str, _ApiSeries] = field(default_factory=dict, repr=False)
    _topic_budget: _LabelBudget = field(init=False, repr=False)
    _api_budget: _LabelBudget = field(init=False, repr=False)
    _partition_budget: _LabelBudget = field(init=False, repr=False)
    _replica_lags: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._topic_budget = _LabelBudget(self.topic_labels_max)
        self._api_budget = _LabelBudget(self.api_labels_max)
        self._partition_budget = _LabelBudget(self.topic_labels_max)

    def set_replica_lag(self, topic: str, partition: int, lag: int) -> None:
        """A followed partition's lag in offsets behind its leader's high watermark."""
        self._replica_lags[(topic, partition)] = lag
        label = self._partition_budget.admit(f"{topic}-{partition}")
        if label != OVERFLOW_LABEL:
            self.replica_lag.labels(topic=topic, partition=str(partition)).set(lag)
        self.replica_max_lag.set(max(self._replica_lags.values()))

    def forget_replica_lag(self, topic: str, partition: int) -> None:
        """The partition is no longer followed here: its series goes."""
        if self._replica_lags.pop((topic, partition), None) is None:
            return
        if self._partition_budget.release(f"{topic}-{partition}"):
            with contextlib.suppress(KeyError):
                self.replica_lag.remove(topic, str(partition))
        self.replica_max_lag.set(max(self._replica_lags.values(), default=0))

    def record_produce(self, topic: str, *, bytes_in: int, messages_in: int) -> None:
        """Count what a Produce request appended to ``topic`` (batch bytes, records)."""
        series = self._topic_series(topic)
        series.bytes_in.inc(bytes_in)
        series.messages_in.inc(messages_in)

    def record_fetch(self, topic: str, *, bytes_out: int, messages_out: int) -> None:
        """Count what a Fetch response sent from ``topic`` (batch bytes, records)."""
        series = self._topic_series(topic)
        series.bytes_out.inc(bytes_out)
        series.messages_out.inc(messages_out)

    def observe_request(
        self, api: str, latency_s: float, error: ErrorCode = ErrorCode.none
    ) -> None:
        """Record one request of ``api`` (Kafka's name: "Produce", "Fetch") from receipt to reply.

        ``error`` is the request's top-level error, or ``ErrorCode.none``. The latency of a Fetch
        includes its long poll, as Kafka's ``TotalTimeMs`` does.
        """
        series = self._apis.get(api)
        if series is None:
            series = self._api_series(api)
        series.latency.observe(latency_s)
        if error is ErrorCode.none:
            series.succeeded.inc()
        else:
            self.requests.labels(api=self._api_budget.admit(api), error=error.name).inc()

    def remove_topic(self, topic: str) -> None:
        """Drop a deleted topic's series, so deleted topics do not accumulate."""
        if self._topics.pop(topic, None) is None or not self._topic_budget.release(topic):
            return
        for metric in (self.bytes_in, self.bytes_out, self.messages_in, self.messages_out):
            metric.remove(topic)

    def _topic_series(self, topic: str) -> _TopicSeries:
        series = self._topics.get(topic)
        if series is not None:
            return series
        label = self._topic_budget.admit(topic)
        series = _TopicSeries(
            bytes_in=self.bytes_in.labels(topic=label),
            bytes_out=self.bytes_out.labels(topic=label),
            messages_in=self.messages_in.labels(topic=label),
            messages_out=self.messages_out.labels(topic=label),
        )
        if label != OVERFLOW_LABEL:
            self._topics[topic] = series  # overflowed topics are not cached: memory stays bounded
        return series

    def _api_series(self, api: str) -> _ApiSeries:
        label = self._api_budget.admit(api)
        series = _ApiSeries(
            latency=self.request_latency.labels(api=label),
            succeeded=self.requests.labels(api=label, error=ErrorCode.none.name),
        )
        if label != OVERFLOW_LABEL:
            self._apis[api] = series
        return series


@dataclass(eq=False)
class ControllerMetrics:
    """A controller's metrics, set directly: ``metrics.active.set(1)`` on winning the election."""

    active: Gauge
    epoch: Gauge
    live_brokers: Gauge
    offline_partitions: Gauge
    preferred_replica_imbalance: Gauge
    unclean_leader_elections: Counter
    clean_leader_elections: Counter
    controlled_shutdowns: Counter
    controlled_shutdown_unmoved_partitions: Counter
    shutting_down_brokers: Gauge
    reassigning_partitions: Gauge
    reassignments_completed: Counter
    reassignments_cancelled: Counter
    connection_quotas: ConnectionQuotaMetrics


class _StateSetCollector(Collector):
    """A gauge family with one series per state: 1 for the current state, 0 for the others."""

    def __init__(self, name: str, documentation: str, states: tuple[str, ...], initial: str):
        self._name = name
        self._documentation = documentation
        self._states = states
        self._state = initial

    @property
    def state(self) -> str:
        return self._state

    def set(self, state: str) -> None:
        if state not in self._states:
            raise ValueError(
                f"{self._name}: unknown state {state!r}, expected one of {self._states}"
            )
        self._state = state  # one assignment: a concurrent scrape sees the old or the new state

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self._name, self._documentation, labels=["state"])

    def collect(self) -> Iterator[Metric]:
        current = self._state
        family = GaugeMetricFamily(self._name, self._documentation, labels=["state"])
        for state in self._states:
            family.add_metric([state], 1.0 if state == current else 0.0)
        yield family


@dataclass(eq=False)
class CommonMetrics:
    """What every service exports: its build, its ZooKeeper session state, its loop's lag."""

    build_info: Gauge
    event_loop_lag: Histogram
    event_loop_lag_last: Gauge
    _zookeeper_session_state: _StateSetCollector = field(repr=False)

    def observe_event_loop_lag(self, lag_s: float) -> None:
        self.event_loop_lag.observe(lag_s)
        self.event_loop_lag_last.set(lag_s)

    @property
    def zookeeper_session_state(self) -> str:
        return self._zookeeper_session_state.state

    def set_zookeeper_session_state(self, state: str) -> None:
        """Record a session state: "connected", "suspended" or "lost", or kazoo's ``KazooState``.

        Safe to call from kazoo's listener thread.
        """
        self._zookeeper_session_state.set(str(state).lower())


@dataclass(eq=False)
class ReplicationQuotaMetrics:
    """The replication throttles of a broker (KIP-73), one series per ``side``: leader, follower.

    ``throttled_bytes``: bytes replicated for throttled partitions (what the quota counts: sent
    as leader, fetched as follower); ``held_back``: times a throttled partition was left out
    because its side was over its rate; ``rate``: the measured rate (Kafka's ``byte-rate`` of
    ``LeaderReplication`` / ``FollowerReplication``), read from the quota at each scrape;
    ``rate_limit``: the rate in force (9.2e18, Long.MAX_VALUE, when unthrottled).
    """

    throttled_bytes: Counter
    held_back: Counter
    rate: Gauge
    rate_limit: Gauge


@dataclass(eq=False)
class ClientQuotaMetrics:
    """Client quotas (``broker.quotas``), labelled as Kafka's quota metrics: ``quota`` (the key:
    producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate),
    ``user`` and ``client_id`` (the sensor's tags; "" where the quota entity has no such part).

    ``recorded``: bytes counted against the quota (their rate is Kafka's ``byte-rate``), for
    request_percentage the percentage-seconds of handler time (rate: Kafka's ``request-time``),
    for controller_mutation_rate the partition mutations (rate: Kafka's ``mutation-rate``);
    ``throttle_time``: milliseconds of throttle given (Kafka's ``throttle-time``, as a sum);
    ``throttled``: answers throttled, and for controller_mutation_rate also each topic a strict
    request had refused; ``tokens``: controller_mutation_rate's bucket at its last recording
    (Kafka's ``tokens``; below zero while exhausted). Label cardinality: at most
    ``quotas.METRIC_ENTITIES_MAX`` (user, client_id) pairs, and only those some quota applies
    to; later ones are counted under ``<other>``.
    """

    recorded: Counter
    throttle_time: Counter
    throttled: Counter
    tokens: Gauge

    def observe(
        self, quota: str, user: str, client_id: str, value: float, throttle_ms: int
    ) -> None:
        labels = {"quota": quota, "user": user, "client_id": client_id}
        if value > 0:
            self.recorded.labels(**labels).inc(value)
        if throttle_ms > 0:
            self.throttle_time.labels(**labels).inc(throttle_ms)
            self.throttled.labels(**labels).inc()

    def tokens_left(self, user: str, client_id: str, tokens: float) -> None:
        self.tokens.labels(user=user, client_id=client_id).set(tokens)


@dataclass(eq=False)
class TxnMarkerMetrics:
    """The transaction markers this broker's transaction coordinator sends (``txn_markers``).

    ``pending``: markers submitted and not yet written to every partition (nor dropped);
    ``written``: markers written to all their partitions (then the coordinator completes the
    transaction); ``errors``: partitions of a WriteTxnMarkers that failed, by ``error`` (Kafka's
    error code name; ``network_exception`` for a connection that failed, ``leader_not_available``
    for a partition whose leader the metadata does not name yet).
    """

    pending: Gauge
    written: Counter
    errors: Counter


class ConsumerLagMetrics(Collector):
    """Consumer lag per group and partition on the group's coordinator: the partition's high
    watermark minus the group's committed offset, as sampled last (``update``, from the event
    loop; a scrape reads the snapshot swapped in by one assignment, so it never sees half a
    sample). Lags of partitions with no replica on the coordinator are not known there."""

    def __init__(self, series_max: int = CONSUMER_LAG_SERIES_MAX) -> None:
        self.series_max = series_max
        self._sample: tuple[tuple[tuple[str, str, str], int], ...] = ()
        self._omitted = 0

    def update(self, lags: Iterable[tuple[str, str, int, int]]) -> None:
        """Replace the sample with ``(group, topic, partition, lag)`` rows."""
        rows = sorted(((g, t, str(p)), lag) for g, t, p, lag in lags)
        kept = tuple(rows[: self.series_max])
        self._sample, self._omitted = kept, len(rows) - len(kept)

    def lag(self, group: str, topic: str, partition: int) -> int | None:
        return dict(self._sample).get((group, topic, str(partition)))

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        sample, omitted = self._sample, self._omitted
        lag, left_out = self._families()
        for labels, value in sample:
            lag.add_metric(list(labels), float(value))
        left_out.add_metric([], float(omitted))
        yield lag
        yield left_out

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                f"{NAMESPACE}_group_consumer_lag",
                "Records a consumer group has not committed yet: the partition's high watermark "
                "minus the group's committed offset (on the group's coordinator).",
                labels=["group", "topic", "partition"],
            ),
            GaugeMetricFamily(
                f"{NAMESPACE}_group_consumer_lag_series_omitted",
                "Consumer lag series left out of the last sample by CONSUMER_LAG_SERIES_MAX.",
            ),
        )


def consumer_lag_metrics(
    registry: CollectorRegistry, *, series_max: int = CONSUMER_LAG_SERIES_MAX
) -> ConsumerLagMetrics:
    """Register the consumer lag of the groups this broker coordinates on ``registry``."""
    metrics = ConsumerLagMetrics(series_max)
    registry.register(metrics)
    return metrics


def new_registry() -> CollectorRegistry:
    """An empty registry for one service; never prometheus_client's global ``REGISTRY``."""
    return CollectorRegistry(auto_describe=True)


def broker_metrics(
    registry: CollectorRegistry,
    *,
    topic_labels_max: int = TOPIC_LABELS_MAX,
    api_labels_max: int = API_LABELS_MAX,
) -> BrokerMetrics:
    """Register a broker's metrics on ``registry``."""
    prefix = f"{NAMESPACE}_broker"

    def topic_counter(name: str, documentation: str) -> Counter:
        return Counter(f"{prefix}_{name}", documentation, ["topic"], registry=registry)

    def gauge(name: str, documentation: str) -> Gauge:
        return Gauge(f"{prefix}_{name}", documentation, registry=registry)

    return BrokerMetrics(
        bytes_in=topic_counter("bytes_in_total", "Record batch bytes appended by Produce."),
        bytes_out=topic_counter("bytes_out_total", "Record batch bytes sent in Fetch responses."),
        replica_budget=gauge(
            "replica_budget", "Replicas this broker can host, from its open-files limit."
        ),
        replicas_unloaded=gauge(
            "replicas_unloaded",
            "Replicas found on disk past the replica budget, left unloaded (see the log).",
        ),
        messages_in=topic_counter("messages_in_total", "Records appended by Produce."),
        messages_out=topic_counter("messages_out_total", "Records sent in Fetch responses."),
        request_latency=Histogram(
            f"{NAMESPACE}_request_latency_seconds",
            "Time from a request's arrival to its response being queued, per Kafka API.",
            ["api"],
            buckets=REQUEST_LATENCY_BUCKETS_S,
            registry=registry,
        ),
        requests=Counter(
            f"{NAMESPACE}_requests_total",
            "Requests answered, per Kafka API and top-level error code name ('none' for success).",
            ["api", "error"],
            registry=registry,
        ),
        partitions=gauge("partitions", "Partitions with a replica on this broker."),
        leader_partitions=gauge("leader_partitions", "Partitions this broker leads."),
        under_replicated_partitions=gauge(
            "under_replicated_partitions",
            "Partitions led here whose in-sync replicas are fewer than all replicas.",
        ),
        offline_partitions=gauge(
            "offline_partitions", "Partitions hosted here that cannot be served (log dir failed)."
        ),
        offline_log_dirs=gauge("offline_log_dirs", "Entries of log.dirs that have failed."),
        connections=Gauge(
            f"{NAMESPACE}_connections",
            "Open connections, per listener.",
            ["listener"],
            registry=registry,
        ),
        connections_closed=Counter(
            f"{NAMESPACE}_connections_closed",
            "Connections the broker closed, by reason (malformed_frame, idle, handler_error, ...).",
            ["reason"],
            registry=registry,
        ),
        connection_quotas=connection_quota_metrics(registry),
        sasl_authentications=Counter(
            f"{NAMESPACE}_sasl_authentications",
            "SASL authentications on SASL listeners, by listener, mechanism and result "
            "(succeeded, failed, reauthentication_succeeded, reauthentication_failed).",
            ["listener", "mechanism", "result"],
            registry=registry,
        ),
        request_memory_used=gauge(
            "request_memory_used_bytes",
            "Bytes of large requests held in memory (bounded by queued.max.request.bytes).",
        ),
        requests_queued=gauge(
            "requests_queued",
            "Requests read and not yet handled, all connections (bounded by queued.max.requests).",
        ),
        refused_controller_requests=Counter(
            f"{prefix}_refused_controller_requests_total",
            "Controller requests (LeaderAndIsr, StopReplica, UpdateMetadata) that arrived on a "
            "client listener and were refused with CLUSTER_AUTHORIZATION_FAILED, per API.",
            ["api"],
            registry=registry,
        ),
        under_min_isr_partitions=gauge(
            "under_min_isr_partitions",
            "Partitions led here whose ISR is below min.insync.replicas (acks=all refused).",
        ),
        reassignment_bytes=Counter(
            f"{prefix}_reassignment_bytes_in",
            "Bytes this broker copied from leaders into replicas a reassignment is adding "
            "(KIP-455 adding_replicas): what reassignments, drains and rebalances moved.",
            registry=registry,
        ),
        isr_shrinks=Counter(
            f"{prefix}_isr_shrinks",
            "ISR shrinks this broker proposed as leader and the controller committed.",
            registry=registry,
        ),
        isr_expands=Counter(
            f"{prefix}_isr_expands",
            "ISR expansions this broker proposed as leader and the controller committed.",
            registry=registry,
        ),
        purgatory_size=Gauge(
            f"{prefix}_purgatory_size",
            "Requests waiting: produce (acks=all, for replication) and fetch (long polls).",
            ["operation"],
            registry=registry,
        ),
        replica_max_lag=gauge(
            "replica_max_lag",
            "Largest lag, in offsets, of a partition this broker follows behind its leader's HW.",
        ),
        replica_lag=Gauge(
            f"{prefix}_replica_lag",
            "Lag in offsets of each partition this broker follows, behind its leader's HW.",
            ["topic", "partition"],
            registry=registry,
        ),
        log_dir_moves=gauge(
            "log_dir_moves",
            "Replicas being moved between log dirs of this broker (AlterReplicaLogDirs).",
        ),
        log_dir_move_bytes=Counter(
            f"{prefix}_log_dir_move_bytes",
            "Bytes copied into future logs by moves between log dirs.",
            registry=registry,
        ),
        topic_labels_max=topic_labels_max,
        api_labels_max=api_labels_max,
    )


def connection_quota_metrics(registry: CollectorRegistry) -> ConnectionQuotaMetrics:
    """Register the connection quotas' counters (a broker's and a controller's)."""
    return ConnectionQuotaMetrics(
        connections_rejected=Counter(
            f"{NAMESPACE}_connections_rejected",
            "Connections refused by a connection quota, by listener and reason "
            "(listener_max_connections, max_connections, max_connections_per_ip).",
            ["listener", "reason"],
            registry=registry,
        ),
        connection_accept_throttle=Counter(
            f"{NAMESPACE}_connection_accept_throttle_seconds",
            "Seconds the accept loop waited for max.connection.creation.rate (KIP-612), by "
            "listener: Kafka's connection-accept-throttle-time.",
            ["listener"],
            registry=registry,
        ),
        connections_evicted=Counter(
            f"{NAMESPACE}_connections_evicted",
            "Idle connections closed at max.connections to admit a new one, by the listener they "
            "were on: a broker's, for one on a protected listener (KIP-402); the controller's, "
            "for any new one (a broker's connection is never closed so).",
            ["listener"],
            registry=registry,
        ),
    )


def controller_metrics(registry: CollectorRegistry) -> ControllerMetrics:
    """Register a controller's metrics on ``registry``."""
    prefix = f"{NAMESPACE}_controller"

    def gauge(name: str, documentation: str) -> Gauge:
        return Gauge(f"{prefix}_{name}", documentation, registry=registry)

    return ControllerMetrics(
        active=gauge(
            "active",
            "1 on the active controller, 0 otherwise; the sum over controllers should be 1.",
        ),
        epoch=gauge("epoch", "The controller epoch this controller last saw or won."),
        live_brokers=gauge("live_brokers", "Brokers registered in ZooKeeper."),
        offline_partitions=gauge(
            "offline_partitions", "Partitions without a live leader, cluster-wide."
        ),
        preferred_replica_imbalance=gauge(
            "preferred_replica_imbalance",
            "Partitions led by another replica than their preferred (first) one, topics being "
            "deleted aside (Kafka's PreferredReplicaImbalanceCount).",
        ),
        unclean_leader_elections=Counter(
            f"{prefix}_unclean_leader_elections",
            "Leaders elected from outside the ISR (unclean.leader.election.enable): records "
            "only the ISR had may be lost (Kafka's UncleanLeaderElectionsPerSec).",
            registry=registry,
        ),
        clean_leader_elections=Counter(
            f"{prefix}_clean_leader_elections",
            "Leaders elected from the ISR after a leader was lost (Kafka's "
            "LeaderElectionRateAndTimeMs count).",
            registry=registry,
        ),
        controlled_shutdowns=Counter(
            f"{prefix}_controlled_shutdowns",
            "ControlledShutdown requests decided (each attempt of a stopping broker counts).",
            registry=registry,
        ),
        controlled_shutdown_unmoved_partitions=Counter(
            f"{prefix}_controlled_shutdown_unmoved_partitions",
            "Partitions a stopping broker still led after its ControlledShutdown: no other "
            "in-sync replica could take them (counted at every attempt; the controller's log "
            "names them).",
            registry=registry,
        ),
        shutting_down_brokers=gauge(
            "shutting_down_brokers",
            "Live brokers in controlled shutdown: never elected leader or added to an ISR.",
        ),
        reassigning_partitions=gauge(
            "reassigning_partitions",
            "Partitions being reassigned (KIP-455: with adding or removing replicas), as Kafka's "
            "ReassigningPartitions.",
        ),
        reassignments_completed=Counter(
            f"{prefix}_reassignments_completed",
            "Partition reassignments finished: the target replicas in sync, the removed ones "
            "deleted.",
            registry=registry,
        ),
        reassignments_cancelled=Counter(
            f"{prefix}_reassignments_cancelled",
            "Partition reassignments cancelled (AlterPartitionReassignments with null "
            "replicas): back to the original replicas.",
            registry=registry,
        ),
        connection_quotas=connection_quota_metrics(registry),
    )


def txn_marker_metrics(registry: CollectorRegistry) -> TxnMarkerMetrics:
    """Register the transaction marker sender's metrics on ``registry``."""
    prefix = f"{NAMESPACE}_broker_txn_marker"
    return TxnMarkerMetrics(
        pending=Gauge(
            f"{prefix}s_pending",
            "Transaction markers submitted by this broker's transaction coordinator and not yet "
            "written to every partition of their transaction.",
            registry=registry,
        ),
        written=Counter(
            f"{prefix}s_written_total",
            "Transaction markers written to every partition of their transaction.",
            registry=registry,
        ),
        errors=Counter(
            f"{prefix}_errors_total",
            "Partitions of transaction markers whose write failed (retried or dropped), by error.",
            ["error"],
            registry=registry,
        ),
    )


def replication_quota_metrics(registry: CollectorRegistry) -> ReplicationQuotaMetrics:
    """Register a broker's replication throttle metrics on ``registry``."""
    prefix = f"{NAMESPACE}_replication"
    return ReplicationQuotaMetrics(
        throttled_bytes=Counter(
            f"{prefix}_throttled_bytes_total",
            "Bytes replicated for partitions listed in *.replication.throttled.replicas, per "
            "side: sent to followers by this leader, fetched from leaders by this follower.",
            ["side"],
            registry=registry,
        ),
        held_back=Counter(
            f"{prefix}_throttled_partitions_held_back_total",
            "Times a throttled partition was held back because its side was over its rate: "
            "left out of a follower's Fetch answer (leader), of a Fetch request (follower).",
            ["side"],
            registry=registry,
        ),
        rate=Gauge(
            f"{prefix}_throttled_bytes_per_second",
            "Rate of the throttled partitions' replication, per side, over the quota's windows "
            "(replication.quota.window.num x replication.quota.window.size.seconds).",
            ["side"],
            registry=registry,
        ),
        rate_limit=Gauge(
            f"{prefix}_throttled_rate_limit_bytes_per_second",
            "leader.replication.throttled.rate and follower.replication.throttled.rate in force "
            "(9223372036854775807: unthrottled).",
            ["side"],
            registry=registry,
        ),
    )


def client_quota_metrics(registry: CollectorRegistry) -> ClientQuotaMetrics:
    """Register a broker's client quota metrics on ``registry``."""
    prefix = f"{NAMESPACE}_client_quota"
    labels = ["quota", "user", "client_id"]
    return ClientQuotaMetrics(
        recorded=Counter(
            f"{prefix}_recorded_bytes_total",
            "Bytes counted against a client quota: Produce requests (producer_byte_rate), "
            "Fetch answers' records (consumer_byte_rate); for request_percentage, handler time "
            "on the event loop in percent-seconds (100 = one second of the whole loop); for "
            "controller_mutation_rate, partitions created, added or deleted.",
            labels,
            registry=registry,
        ),
        throttle_time=Counter(
            f"{prefix}_throttle_time_ms_total",
            "Milliseconds of throttle_time_ms given to clients over their quota.",
            labels,
            registry=registry,
        ),
        throttled=Counter(
            f"{prefix}_throttled_total",
            "Answers throttled because the client was over its quota (for "
            "controller_mutation_rate, also each topic refused with THROTTLING_QUOTA_EXCEEDED).",
            labels,
            registry=registry,
        ),
        tokens=Gauge(
            f"{prefix}_tokens",
            "controller_mutation_rate: the tokens left in the client's bucket at its last "
            "recording (below zero: exhausted; Kafka's ControllerMutation tokens).",
            ["user", "client_id"],
            registry=registry,
        ),
    )


def common_metrics(registry: CollectorRegistry, *, version: str = __version__) -> CommonMetrics:
    """Register what every service exports, plus the ``process_*`` metrics of this process."""
    build_info = Gauge(
        f"{NAMESPACE}_build_info",
        "Always 1; the labels say which build runs.",
        ["version"],
        registry=registry,
    )
    build_info.labels(version=version).set(1)
    session_state = _StateSetCollector(
        f"{NAMESPACE}_zookeeper_session_state",
        "1 for the current ZooKeeper session state (connected, suspended, lost), 0 otherwise.",
        ZOOKEEPER_SESSION_STATES,
        initial="lost",
    )
    registry.register(session_state)
    ProcessCollector(registry=registry)
    return CommonMetrics(
        build_info=build_info,
        event_loop_lag=Histogram(
            f"{NAMESPACE}_event_loop_lag_seconds",
            "How much later than asked the event loop ran a timer (sampled several times a "
            "second): the delay anything slow on the loop adds to every client.",
            buckets=EVENT_LOOP_LAG_BUCKETS_S,
            registry=registry,
        ),
        event_loop_lag_last=Gauge(
            f"{NAMESPACE}_event_loop_lag_last_seconds",
            "The event loop's lag at the latest sample.",
            registry=registry,
        ),
        _zookeeper_session_state=session_state,
    )


# Kafka Connect's REST API (odradek connect). ``route`` is the resource pattern aiohttp matched
# (``/connectors/{name}/status``), never the path a client sent, so the series are bounded by the
# API's routes; unmatched requests share ``OVERFLOW_LABEL``. ``method`` is limited the same way.
CONNECT_REST_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@dataclass(frozen=True, slots=True)
class ConnectRestMetrics:
    requests: Counter  # {method, route, status}
    latency: Histogram  # {method, route}
    forwarded: Counter  # requests answered by forwarding to the leader

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in CONNECT_REST_METHODS else OVERFLOW_LABEL
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)


def connect_rest_metrics(registry: CollectorRegistry) -> ConnectRestMetrics:
    """Register a Connect worker's REST API metrics on ``registry``."""
    prefix = f"{NAMESPACE}_connect_rest"
    return ConnectRestMetrics(
        requests=Counter(
            f"{prefix}_requests_total",
            "REST requests answered, by method, matched route and HTTP status.",
            ["method", "route", "status"],
            registry=registry,
        ),
        latency=Histogram(
            f"{prefix}_request_duration_seconds",
            "Time to answer a REST request (forwarding to the leader included).",
            ["method", "route"],
            buckets=REQUEST_LATENCY_BUCKETS_S,
            registry=registry,
        ),
        forwarded=Counter(
            f"{prefix}_forwarded_requests_total",
            "REST requests this worker forwarded to the leader.",
            registry=registry,
        ),
    )
