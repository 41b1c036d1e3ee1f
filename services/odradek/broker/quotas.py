"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-599): Kafka's ``ClientQuotaManager``,
``ClientRequestQuotaManager`` and ``ControllerMutationQuotaManager``: produce and fetch bytes,
request handler time, partition mutations.

**Entities and precedence.** A quota is set on an entity: a user (the request's principal
name), a client id, or a user and a client id, each part a name or ``<default>``; names are
stored and matched sanitized, as Kafka's ``Sanitizer`` (URL-encoding) sanitizes them. Each
quota type is looked up on its own, in Kafka's order, the first entity that sets that key winning:

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

The entity found also names the *sensor* the bytes are counted on, as Kafka's quota metric tags:
``(user, client-id)`` for 1, 2, 4, 5; ``(user, "")`` for 3 and 6; ``("", client-id)`` for 7
and 8. So a user quota is shared by all that user's clients, a ``<default>`` client quota is
had by each client id alone. A request no quota applies to is not counted at all.

**Rate.** Kafka's ``Rate`` over ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s): the samples' sum over the time since the oldest live sample
began, that time padded to at least ``window_num - 1`` whole windows (so a first burst is not
measured over a few milliseconds).

**Throttle.** The value is recorded first; if the rate is then over the bound, the throttle is
Kafka's ``QuotaUtils.throttleTime``: ``(rate - bound) / bound * window`` (the padded time
above), i.e. how long the client must stay silent for its rate to fall back to the bound. Kafka
leaves a bandwidth throttle unbounded; Odradek bounds every throttle by
``quota.window.size.seconds * quota.window.num`` (the longest a window remembers anything).
The broker answers at once with ``throttle_time_ms`` and then reads nothing more from the
connection for that long (KIP-219; ``broker.connection``).

**Types served.** ``producer_byte_rate`` (the Produce request's size, Kafka's
``request.sizeInBytes``) and ``consumer_byte_rate`` (the Fetch answer's record bytes; a
throttled fetch is answered empty and its bytes un-recorded, and a fetch never asks for more
than the bound times ``window_num - 1`` windows, as Kafka's ``getMaxValueInQuotaWindow``).
``request_percentage`` is Kafka's share of a request handler thread, 100 being one thread busy
all the time. Odradek has one event loop instead of ``num.io.threads`` threads: what is counted
is the time the request's handler itself runs on the loop (each step of its coroutine, measured
by ``TimedHandler``; time it waits, e.g. for replication or a long-poll, is not counted, as
Kafka counts no purgatory time), so 100 is the whole loop. Its throttle is bounded by one window,
as in Kafka; the answer is not emptied (Kafka empties a Fetch answer throttled by either quota:
Odradek only for ``consumer_byte_rate``). Exempt: the cluster's own requests (the controller's,
ControlledShutdown, WriteTxnMarkers, followers' fetches) and Produce with acks=0.
``controller_mutation_rate`` is Kafka's partition mutations per second of CreateTopics,
CreatePartitions and DeleteTopics: not a ``Rate`` but a token bucket per sensor, strict or
permissive by the request's version (``broker.mutation_quota`` has the rules;
``mutation_quota`` makes one request's quota, ``admin.topics`` records it). Each broker keeps its
own buckets, as for every quota here (``handlers.create_topics`` says why it is counted on the
broker that takes the request).

**Bounds.** At most ``SENSORS_MAX`` sensors are kept (least recently used dropped first, as Kafka
expires sensors unused for an hour); metric series are labelled by the sensor's tags for at most
``METRIC_ENTITIES_MAX`` distinct tag pairs, later ones share the label ``<other>``.

Time comes from ``clock_ms`` (monotonic milliseconds), injectable. Runs on the broker's event
loop; a metrics scrape only reads.
"""

from __future__ import annotations

import math
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from odradek.broker.mutation_quota import UNBOUNDED, MutationQuota, TokenBucket
from odradek.broker.replication_quota import SampledRate
from odradek.common.clock import monotonic_ms
from odradek.config.broker import BROKER_KEYS

__all__ = [
    "CLIENT_QUOTA_KEYS",
    "CONSUMER_BYTE_RATE",
    "DEFAULT_ENTITY",
    "PRODUCER_BYTE_RATE",
    "ClientQuotas",
    "FetchQuota",
    "QuotaEntity",
    "QuotaRate",
    "QuotaType",
    "TimedHandler",
    "desanitize",
    "sanitize",
]

DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's QuotaConfigs keys of user and client-id entities, with their types.
CLIENT_QUOTA_KEYS: Mapping[str, str] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
NANOS_TO_PERCENTAGE = 100 / 1e9  # Kafka's NanosToPercentagePerSecond: 1 s of one thread = 100
WINDOW_NUM_DEFAULT: int = BROKER_KEYS["quota.window.num"].default
WINDOW_SIZE_S_DEFAULT: int = BROKER_KEYS["quota.window.size.seconds"].default
SENSORS_MAX = 10_000
METRIC_ENTITIES_MAX = 200
OTHER_LABEL = "<other>"


class QuotaType(StrEnum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoding (UTF-8) with ``*`` and space as %2A, %20."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota entity: each part a sanitized name, ``<default>``, or None (not part of it)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity names a user, a client id, or both")

    @property
    def path(self) -> str:
        """Its znode below /config: ``users/alice/clients/app``, ``clients/<default>``, ..."""
        if self.user is None:
            return f"clients/{self.client_id}"
        if self.client_id is None:
            return f"users/{self.user}"
        return f"users/{self.user}/clients/{self.client_id}"

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        """The inverse of ``path``; ValueError for anything else."""
        parts = path.split("/")
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(user=parts[1])
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(client_id=parts[1])
        if (
            len(parts) == 4
            and parts[0] == "users"
            and parts[2] == "clients"
            and parts[1]
            and parts[3]
        ):
            return cls(user=parts[1], client_id=parts[3])
        raise ValueError(f"not a client quota entity path: {path!r}")


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The entities that may set a (sanitized) user's client's quota, first wins, each with
    the sensor tags it gives (see the module)."""
    d = DEFAULT_ENTITY
    return [
        (QuotaEntity(user, client_id), (user, client_id)),
        (QuotaEntity(user, d), (user, client_id)),
        (QuotaEntity(user, None), (user, "")),
        (QuotaEntity(d, client_id), (user, client_id)),
        (QuotaEntity(d, d), (user, client_id)),
        (QuotaEntity(d, None), (user, "")),
        (QuotaEntity(None, client_id), ("", client_id)),
        (QuotaEntity(None, d), ("", client_id)),
    ]


class QuotaRate(SampledRate):
    """Kafka's ``Rate`` (see the module): ``SampledRate``'s samples, Kafka's window padding."""

    def window_ms(self, now_ms: float) -> float:
        expire_ms = self.window_num * self.window_size_ms
        starts = [s.start_ms for s in self._samples if now_ms - s.start_ms < expire_ms]
        elapsed_ms = now_ms - min(starts, default=now_ms)
        full_windows = int(elapsed_ms // self.window_size_ms)
        if full_windows < self.window_num - 1:
            elapsed_ms += (self.window_num - 1 - full_windows) * self.window_size_ms
        return elapsed_ms

    def measure(self, now_ms: float) -> float:
        expire_ms = self.window_num * self.window_size_ms
        total = sum(s.value for s in self._samples if now_ms - s.start_ms < expire_ms)
        return total * 1000 / self.window_ms(now_ms)


@dataclass(frozen=True, slots=True)
class Throttle:
    """What one recording decided: the throttle and the sensor it was counted on (or None)."""

    throttle_ms: int
    tags: tuple[str, str] | None = None


class ClientQuotas:
    """Every produce and fetch quota of this broker; see the module."""

    def __init__(
        self,
        *,
        window_num: int = WINDOW_NUM_DEFAULT,
        window_size_s: float = WINDOW_SIZE_S_DEFAULT,
        clock_ms: Callable[[], float] = monotonic_ms,
        metrics: object | None = None,
    ):
        if window_num < 1 or window_size_s <= 0:
            raise ValueError("quotas need at least one window of positive length")
        self.window_num = window_num
        self.window_size_ms = window_size_s * 1000
        self.max_throttle_ms = int(window_num * self.window_size_ms)
        self.clock_ms = clock_ms
        self.metrics = metrics
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._sensors: OrderedDict[tuple[QuotaType, str, str], QuotaRate] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()
        self._labelled: set[tuple[str, str]] = set()

    # -- configuration -----------------------------------------------------------------

    def set_entity(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """The entity's quotas are now those of ``config`` (other keys, e.g. SCRAM, ignored)."""
        quotas = {}
        for key in CLIENT_QUOTA_KEYS:
            if key in config:
                try:
                    quotas[key] = float(config[key])
                except ValueError:
                    continue  # not a number: Kafka would not have written it
        if quotas:
            self._quotas[entity] = quotas
        else:
            self._quotas.pop(entity, None)

    def entities(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._quotas

    @property
    def enabled(self) -> bool:
        return bool(self._quotas)

    def quota(
        self, quota_type: QuotaType, user: str, client_id: str
    ) -> tuple[float, tuple[str, str]] | None:
        """The bound (per second) and sensor tags of a principal's client, None: no quota."""
        if not self._quotas:
            return None
        # Stored entity names are sanitized (ZooKeeper paths): so are both parts looked up.
        for entity, tags in precedence(sanitize(user), sanitize(client_id)):
            bound = self._quotas.get(entity, {}).get(quota_type.value)
            if bound is not None:
                return bound, tags
        return None

    # -- recording ---------------------------------------------------------------------

    def record(self, quota_type: QuotaType, user: str, client_id: str, value: float) -> Throttle:
        """Kafka's ``maybeRecordAndGetThrottleTimeMs``: count ``value``, say how long to wait."""
        if quota_type is QuotaType.CONTROLLER_MUTATION:
            raise ValueError("controller_mutation_rate is a token bucket: use mutation_quota")
        found = self.quota(quota_type, user, client_id)
        if found is None:
            return Throttle(0)
        bound, tags = found
        now_ms = self.clock_ms()
        rate = self._sensor(quota_type, tags)
        rate.record(value, now_ms)
        throttle_ms = self.throttle_ms(rate, bound, now_ms)
        if quota_type is QuotaType.REQUEST:  # Kafka's ClientRequestQuotaManager: one window
            throttle_ms = min(throttle_ms, int(self.window_size_ms))
        self._observe(quota_type, tags, value, throttle_ms)
        return Throttle(throttle_ms, tags)

    def mutation_quota(self, user: str, client_id: str, *, strict: bool) -> MutationQuota:
        """One request's ``controller_mutation_rate`` quota (Kafka's ``newQuotaFor``): strict
        or permissive, ``UNBOUNDED`` if no entity sets the key."""
        found = self.quota(QuotaType.CONTROLLER_MUTATION, user, client_id)
        if found is None:
            return UNBOUNDED
        quota, tags = found
        window_s = self.window_num * self.window_size_ms / 1000
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(quota * window_s, self.clock_ms())
            while len(self._buckets) > SENSORS_MAX:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(tags)

        def observe(mutations: float, throttle_ms: int, tokens: float) -> None:
            self._observe(QuotaType.CONTROLLER_MUTATION, tags, mutations, throttle_ms, tokens)

        return MutationQuota(
            bucket,
            quota=quota,
            window_s=window_s,
            strict=strict,
            clock_ms=self.clock_ms,
            max_throttle_ms=self.max_throttle_ms,
            observe=observe,
        )

    def unrecord(self, quota_type: QuotaType, throttle: Throttle, value: float) -> None:
        """Take back a recorded value (a throttled fetch is answered empty, as in Kafka)."""
        if throttle.tags is not None:
            self._sensor(quota_type, throttle.tags).record(-value, self.clock_ms())

    def throttle_ms(self, rate: QuotaRate, bound: float, now_ms: float) -> int:
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            return self.max_throttle_ms
        throttle = (measured - bound) / bound * rate.window_ms(now_ms)
        return min(int(math.floor(throttle + 0.5)), self.max_throttle_ms)

    def max_value_in_window(self, quota_type: QuotaType, user: str, client_id: str) -> float:
        """Kafka's ``getMaxValueInQuotaWindow``: the most one answer may carry (inf: no quota)."""
        found = self.quota(quota_type, user, client_id)
        if found is None:
            return math.inf
        return found[0] * (self.window_num - 1) * self.window_size_ms / 1000

    def _sensor(self, quota_type: QuotaType, tags: tuple[str, str]) -> QuotaRate:
        key = (quota_type, *tags)
        rate = self._sensors.get(key)
        if rate is None:
            rate = self._sensors[key] = QuotaRate(self.window_num, self.window_size_ms)
            while len(self._sensors) > SENSORS_MAX:
                self._sensors.popitem(last=False)
        else:
            self._sensors.move_to_end(key)
        return rate

    def _observe(
        self,
        quota_type: QuotaType,
        tags: tuple[str, str],
        value: float,
        throttle_ms: int,
        tokens: float | None = None,
    ) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        if tags not in self._labelled:
            if len(self._labelled) >= METRIC_ENTITIES_MAX:
                tags = (OTHER_LABEL, OTHER_LABEL)
            else:
                self._labelled.add(tags)
        user, client_id = desanitize(tags[0]), desanitize(tags[1])
        if tags[0] == OTHER_LABEL:
            user = client_id = OTHER_LABEL
        metrics.observe(quota_type.value, user, client_id, value, throttle_ms)
        if tokens is not None:
            metrics.tokens_left(user, client_id, tokens)


@dataclass(frozen=True, slots=True)
class FetchQuota:
    """A Fetch request's consumer_byte_rate quota, as KafkaApis' ``handleFetchRequest`` applies
    it: followers (``replica_id >= 0``) are exempt."""

    quotas: ClientQuotas | None
    user: str
    client_id: str

    @classmethod
    def of(cls, quotas: ClientQuotas | None, user: str, client_id: str | None) -> FetchQuota:
        return cls(quotas if quotas is not None and quotas.enabled else None, user, client_id or "")

    def max_bytes(self, requested: int, replica_id: int) -> int:
        """The request's max_bytes, at most what the quota's window allows."""
        if self.quotas is None or replica_id >= 0:
            return requested
        allowed = self.quotas.max_value_in_window(QuotaType.FETCH, self.user, self.client_id)
        return requested if allowed >= requested else max(int(allowed), 0)

    def record(self, results: Iterable[Any], replica_id: int) -> int:
        """Count the records' bytes; the throttle (then the answer is empty, the bytes taken
        back), else 0."""
        if self.quotas is None or replica_id >= 0:
            return 0
        size = sum(r.size for r in results if r.records is not None)
        throttle = self.quotas.record(QuotaType.FETCH, self.user, self.client_id, size)
        if throttle.throttle_ms:
            self.quotas.unrecord(QuotaType.FETCH, throttle, size)
        return throttle.throttle_ms


class TimedHandler:
    """Await ``coroutine`` while adding up the time its steps run on the event loop
    (``elapsed_ns``): every ``send``/``throw`` into it is timed, the waits between are not."""

    def __init__(self, coroutine: Any, clock_ns: Callable[[], int] = time.perf_counter_ns):
        self.coroutine = coroutine
        self.clock_ns = clock_ns
        self.elapsed_ns = 0

    def __await__(self) -> Any:
        coroutine, value, error = self.coroutine, None, None
        while True:
            started = self.clock_ns()
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as done:
                self.elapsed_ns += self.clock_ns() - started
                return done.value
            self.elapsed_ns += self.clock_ns() - started
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as e:  # noqa: BLE001 - handed to the coroutine, as await does
                value, error = None, e
