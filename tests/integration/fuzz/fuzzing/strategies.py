"""Hypothesis strategies for fuzz cases: requests of every served API and version, then mutated.

A request body is built from its kio schema (``odradek.protocol.fields.layout``) field by field:
each primitive by its Kafka type (integers at and near their bounds, strings, booleans, uuids,
timeouts), arrays of a few items, null where the schema allows it, tagged fields set or left at
their default, nested structs recursively, and ``records`` from ``batches.record_sets``. Fields
that name something in the cluster are drawn from ``Pools`` by their name (``field_hints``): topic
names mostly hit topics that exist and that the target's broker leads, so appends, fetches,
config changes and record deletions reach the logs, and sometimes miss (unknown, invalid, too
long); partitions, offsets, epochs, acks, config keys and values likewise. CreateTopics and
DeleteTopics only name scratch topics, never the ones the invariants watch.

The encoded request (``frames.encode_request``, checked against kio) is then left alone (four
cases in ten), mutated at the field or the byte level or both (``mutations``), or replaced by
random bytes; one case in ten also gets a wrong size prefix (short, long, negative, over the
frame limit), which leaves the rest of the connection's stream unframed (``Case.breaks_stream``).

A ``Round`` (``mixed_rounds``) is a few cases spread over a few connections, each connection
pipelined (all requests sent at once) or sequential; ``shapes`` adds rounds of the two shapes
that cost a broker most for their size, and draws which kind each round is. Nothing drawn
depends on the broker's answers, so a seed (and ``base_time_ms``) reproduces the same cases.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from hypothesis import strategies as st

from fuzzing.batches import RecordSet, record_sets
from fuzzing.frames import INT_RANGES, Frame, encode_request
from fuzzing.mutations import byte_mutations, field_mutations
from odradek.config.topic import CONFIG_KEYS
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.fields import FieldSpec, Kind, layout

__all__ = [
    "Pools",
    "Case",
    "Round",
    "MIXED",
    "body_values",
    "build_entity",
    "cases",
    "entity_values",
    "field_hints",
    "mixed_rounds",
    "wait_ms_of",
    "well_formed_case",
]

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
INT64_MAX = 2**63 - 1
KAFKA_MAX_FRAME_BYTES = 104_857_600  # Kafka's default socket.request.max.bytes
REQUEST_HEADER_MIN_BYTES = 10  # api key, version, correlation id, a null client id
MIXED = "mixed"  # a round's kind: cases of every sort (``mixed_rounds``)
CASES_PER_ROUND_MAX = 8
CONNECTIONS_PER_ROUND_MAX = 4
# How often each API is drawn: Produce and Fetch reach the logs, so they come up more.
API_WEIGHTS = {ApiKey.PRODUCE: 4, ApiKey.FETCH: 2}


@dataclass(frozen=True)
class Pools:
    """What cases aim at: topics that exist (``topics``, with at most ``partitions`` each),
    the partitions the target's broker leads (``led``: most cases go there, so they reach its
    logs), scratch topics that CreateTopics and DeleteTopics may name, brokers, and the run's
    clock."""

    topics: tuple[str, ...]
    led: tuple[tuple[str, int], ...]
    scratch_topics: tuple[str, ...]
    partitions: int
    broker_ids: tuple[int, ...]
    max_frame_bytes: int  # the listener's socket.request.max.bytes
    base_time_ms: int
    share: int = 1  # how often a connection goes to this target, against the others' shares
    # A real TLS ClientHello for this listener: a target that reaches a TLS listener without TLS
    # sends it, mutated, in half its cases (the other half are Kafka requests in the clear).
    tls_hello: bytes | None = None
    # An unauthenticated SASL listener enabling this mechanism: a connection's cases go in the
    # order of the exchange (ApiVersions, SaslHandshake, then the rest), and most connections
    # begin with a well-formed SaslHandshake for it, so what follows is inside the exchange.
    sasl_mechanism: str | None = None
    api_weights: tuple[tuple[int, int], ...] = ()  # (api key, weight): instead of API_WEIGHTS
    # The listener serves every API: ``shapes``' huge arrays and pipelines may go to it.
    work_shapes: bool = False


@dataclass(frozen=True)
class Case:
    """One request as sent (size prefix included), with what the harness needs to judge it."""

    target: int  # index into the harness's targets
    api_key: int
    api_version: int
    frame: bytes
    description: str
    mutated: bool  # anything beyond a well-formed request (its values may still be odd)
    # The size prefix disagrees with the bytes, or is one no frame may have: what follows on
    # the connection is unframed (the broker still answers what came before, as Kafka does).
    breaks_stream: bool
    answer_expected: bool  # a well-formed request that Kafka answers (not Produce with acks=0)
    wait_ms: int  # how long the broker may rightly hold the answer (Fetch max_wait, timeouts)
    produce: tuple[tuple[str, int, RecordSet], ...]  # (topic, partition, records) it carries
    # How long the broker may rightly work on it before its answer, besides ``wait_ms`` (a huge
    # array's elements, an answer queued behind others: ``shapes``); those after it wait too.
    work_s: float = 0.0

    def hex(self) -> str:
        return self.frame.hex()

    def __repr__(self) -> str:  # short: Hypothesis and pytest print cases
        return f"Case({self.description!r}, {len(self.frame)} bytes)"


@dataclass(frozen=True)
class Round:
    """Cases spread over connections; each connection pipelined or not."""

    cases: tuple[Case, ...]
    connection_of: tuple[int, ...]  # for each case, its connection (cases keep their order)
    pipelined: tuple[bool, ...]  # for each connection
    kind: str = "mixed"  # MIXED, or one of ``shapes``' kinds
    timeout_s: float | None = None  # how long the round may take (None: traffic's default)

    def __repr__(self) -> str:
        return f"Round({len(self.cases)} cases over {len(self.pipelined)} connections)"


# -- values ----------------------------------------------------------------------------------


def _weighted(*choices: Any) -> st.SearchStrategy[Any]:
    """One of ``choices``; a value listed twice comes up twice as often."""
    return st.sampled_from(choices)


def _bounds(code: str) -> st.SearchStrategy[int]:
    low, high = INT_RANGES[code]
    return _weighted(0, 1, -1, low, high, low + 1, high - 1) | st.integers(max(low, -5), 100)


def _millis(*choices: int) -> st.SearchStrategy[timedelta]:
    return st.sampled_from(choices).map(lambda ms: timedelta(milliseconds=ms))


_BAD_TOPIC_NAMES = ("", ".", "..", "bad/name", "bad name", "töpic", "x" * 250, "__consumer_offsets")
_CONFIG_VALUES = (
    "compact",
    "delete",
    "compact,delete",
    "lz4",
    "gzip",
    "zstd",
    "snappy",
    "producer",
    "uncompressed",
    "LogAppendTime",
    "CreateTime",
    "0",
    "1",
    "-1",
    "-2",
    "100",
    "1048576",
    "86400000",
    "2147483647",
    "9223372036854775807",
    "9223372036854775808",
    "true",
    "false",
    "0.5",
    "abc",
    "",
    None,
)
_CONFIG_NAMES = (*CONFIG_KEYS, *CONFIG_KEYS, "no.such.config", "log.retention.ms", "")


def _topic_names(pools: Pools, *, existing: bool, scratch: bool) -> st.SearchStrategy[str]:
    choices: list[st.SearchStrategy[str]] = []
    if existing:
        choices += [st.sampled_from([topic for topic, _ in pools.led] or pools.topics)] * 6
        choices += [st.sampled_from(pools.topics)] * 2
    if scratch:
        choices += [st.sampled_from(pools.scratch_topics)] * 3
    choices += [
        st.sampled_from(_BAD_TOPIC_NAMES),
        st.sampled_from(("fuzz-missing-0", "fuzz-missing-1")),  # Metadata auto-creates them
    ]
    return st.one_of(choices)


def field_hints(pools: Pools, api_key: int) -> Mapping[str, st.SearchStrategy[Any]]:
    """Strategies for fields by name (``Struct.field`` first, then ``field``)."""
    creates_or_deletes = api_key in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS)
    topics = _topic_names(
        pools, existing=api_key != ApiKey.DELETE_TOPICS, scratch=creates_or_deletes
    )
    led = [partition for _, partition in pools.led] or [0]
    partitions = (
        st.sampled_from(led)
        | st.sampled_from(led)
        | st.sampled_from(range(pools.partitions))
        | _weighted(-1, pools.partitions + 1, INT32_MAX, INT32_MIN)
    )
    brokers = _weighted(*pools.broker_ids, *pools.broker_ids, -1, 0, INT32_MAX)
    epochs = _weighted(-1, -1, 0, 1, INT32_MAX)
    configs = st.sampled_from(_CONFIG_NAMES)
    return {
        "AlterableConfig.name": configs,
        "CreatableTopicConfig.name": configs,
        "AlterableConfig.value": st.sampled_from(_CONFIG_VALUES),
        "CreatableTopicConfig.value": st.sampled_from(_CONFIG_VALUES),
        "configuration_keys": configs,
        "config_operation": _weighted(0, 1, 2, 3, -1, 4),
        "name": topics,
        "topic": topics,
        "topic_name": topics,
        "topic_names": topics,
        "resource_name": topics | _weighted(*(str(b) for b in pools.broker_ids), "0", "-1", ""),
        "resource_type": _weighted(2, 2, 2, 4, 4, 8, 0, 1, 3, -1, 127),
        "partition": partitions,
        "partition_index": partitions,
        "index": partitions,
        "partitions": partitions,  # ForgottenTopic's array of partition ids
        "acks": _weighted(-1, 1, 1, 0, 2, -2),
        "timeout": _millis(0, 100, 1000, 5000, -1, INT32_MAX),
        "max_wait": _millis(0, 0, 10, 100, 500, -1, INT32_MAX),
        "min_bytes": _weighted(0, 1, 1, 1, 1024, INT32_MAX, -1),
        "max_bytes": _weighted(0, 1, 100, 1 << 20, INT32_MAX, INT32_MAX, -1),
        "partition_max_bytes": _weighted(0, 1, 100, 1 << 20, 1 << 20, INT32_MAX, -1),
        "fetch_offset": _weighted(0, 0, 1, 10, 100, 10_000, -1, -2, INT64_MAX),
        "log_start_offset": _weighted(-1, -1, 0, INT64_MAX),
        "offset": _weighted(-1, 0, 1, 5, 100, 10_000, INT64_MAX, -2),
        "timestamp": _weighted(-1, -2, -3, -4, 0, pools.base_time_ms, INT64_MAX),
        "current_leader_epoch": epochs,
        "last_fetched_epoch": epochs,
        "leader_epoch": epochs,
        "replica_id": _weighted(-1, -1, -1, -2, *pools.broker_ids, INT32_MAX),
        "isolation_level": _weighted(0, 0, 1, 2, -1),
        "session_id": _weighted(0, 0, 1, -1, INT32_MAX),
        "session_epoch": _weighted(-1, -1, 0, 1, INT32_MAX),
        "num_partitions": _weighted(-1, 1, 1, 2, 3, 0, 10_001, INT32_MAX),
        "replication_factor": _weighted(-1, 1, 1, 2, 3, 0, 32767),
        "count": _weighted(1, 2, 3, 4, 6, 0, -1, 10_001, INT32_MAX),
        "broker_ids": brokers,
        # Null where nullable (InitProducerId's idempotent producers) comes from _field.
        "transactional_id": _weighted("fuzz-tx", "fuzz-tx", "fuzz-tx-2", ""),
        "producer_id": _weighted(-1, -1, 0, 1000, INT64_MAX),
        "producer_epoch": _weighted(-1, -1, 0, 32767),
        "transaction_timeout": _millis(-1, 0, 60_000, INT32_MAX),
        "client_software_name": _weighted("odradek-fuzz", "odradek-fuzz", "", "-bad-", "ü"),
        "client_software_version": _weighted("1.0.0", "1.0.0", "", "1.0-"),
        "cluster_id": _weighted(None, None, "wrong-cluster", ""),
        "rack_id": _weighted("", "", "rack-a"),
        "SaslHandshakeRequest.mechanism": _MECHANISMS,  # a SCRAM credential's is an int8
        "SaslAuthenticateRequest.auth_bytes": _auth_bytes(),
    }


# SaslHandshake's and SaslAuthenticate's fields: the mechanisms a listener may enable and some it
# may not, and tokens shaped as the mechanisms' messages (RFC 4616, RFC 5802) with what an
# attacker would put in them: other users, a forged proof, authorization ids, sizes at and over
# ``sasl.server.max.receive.size`` (524288), then bytes at random.
_MECHANISMS = _weighted(
    "SCRAM-SHA-512",
    "SCRAM-SHA-512",
    "SCRAM-SHA-256",
    "PLAIN",
    "GSSAPI",
    "OAUTHBEARER",
    "",
    "É" * 300,
)
_SCRAM_USERS = ("admin", "admin", "nobody", "", "a=b,c", "=2C", "ü" * 200)
_SASL_MAX_RECEIVE = 524_288


def _auth_bytes() -> st.SearchStrategy[bytes]:
    nonce = st.binary(min_size=0, max_size=32).map(lambda b: b.hex())
    first = st.builds(
        lambda gs2, user, r: f"{gs2}n={user},r={r}".encode(),
        _weighted("n,,", "n,,", "y,,", "p=tls-unique,,", "n,a=admin,", "n,a=other,", ""),
        st.sampled_from(_SCRAM_USERS),
        nonce,
    )
    final = st.builds(
        lambda r, proof: f"c=biws,r={r},p={proof}".encode(),
        nonce,
        st.binary(min_size=0, max_size=64).map(lambda b: base64.b64encode(b).decode()),
    )
    plain = st.builds(
        lambda authzid, user, password: f"{authzid}\0{user}\0{password}".encode(),
        _weighted("", "", "admin", "other"),
        st.sampled_from(_SCRAM_USERS),
        _weighted("", "wrong", "admin", "x" * 1000),
    )
    sizes = st.sampled_from((_SASL_MAX_RECEIVE - 64, _SASL_MAX_RECEIVE + 1, 100_000))
    large = st.builds(lambda n: b"n,,n=admin,r=" + b"A" * n, sizes)
    return st.one_of(first, first, final, plain, large, st.just(b""), st.binary(max_size=300))


_INT_CODES = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
}


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INT_CODES:
        return _bounds(_INT_CODES[kafka_type])
    match kafka_type:
        case "bool":
            return st.booleans()
        case "float64":
            return st.floats(allow_nan=False, allow_infinity=False)
        case "timedelta_i32" | "timedelta_i64":
            return _millis(0, 1, 100, 1000, -1, INT32_MAX)
        case "uuid":
            return st.none() | st.uuids()
        case "string":
            return st.text(max_size=20) | _weighted("", "x" * 300)
        case "bytes":
            return st.binary(max_size=40)
    raise AssertionError(f"no strategy for {kafka_type}")


def _field(
    spec: FieldSpec,
    owner: str,
    hints: Mapping[str, st.SearchStrategy[Any]],
    records: st.SearchStrategy[RecordSet],
) -> st.SearchStrategy[Any]:
    hint = hints.get(f"{owner}.{spec.name}", hints.get(spec.name))
    if spec.kind is Kind.RECORDS:
        value = records
    elif spec.kind is Kind.STRUCT:
        assert spec.struct_type is not None
        value = entity_values(spec.struct_type, hints, records)
    elif spec.kind in (Kind.STRUCT_ARRAY, Kind.PRIMITIVE_ARRAY):
        if spec.kind is Kind.STRUCT_ARRAY:
            assert spec.struct_type is not None
            item = entity_values(spec.struct_type, hints, records)
        else:
            item = hint if hint is not None else _primitive(spec.kafka_type or "")
        value = _weighted(1, 1, 1, 2, 2, 3, 0).flatmap(
            lambda n, item=item: st.lists(item, min_size=n, max_size=n).map(tuple)
        )
    else:
        value = hint if hint is not None else _primitive(spec.kafka_type or "")
    if spec.tag is not None:  # a tagged field: mostly left at its default (not written)
        value = st.just(spec.default) | st.just(spec.default) | value
    if spec.nullable and spec.kind is not Kind.RECORDS:
        value = value | value | value | st.none()
    return value


def entity_values(
    entity_type: type[Any],
    hints: Mapping[str, st.SearchStrategy[Any]],
    records: st.SearchStrategy[RecordSet],
) -> st.SearchStrategy[Any]:
    schema = layout(entity_type)
    owner = entity_type.__name__
    return st.fixed_dictionaries(
        {
            spec.name: st.deferred(lambda spec=spec: _field(spec, owner, hints, records))
            for spec in (*schema.fields, *schema.tagged)
        }
    )


@cache  # strategies are built once per schema and target (Pools is frozen)
def body_values(schema: type[Any], api_key: int, pools: Pools) -> st.SearchStrategy[dict[str, Any]]:
    return entity_values(schema, field_hints(pools, api_key), record_sets(pools.base_time_ms))


def build_entity(
    entity_type: type[Any], values: dict[str, Any]
) -> tuple[Any, list[tuple[str, RecordSet]]]:
    """The dataclass from drawn values; ``RecordSet`` values become their bytes, and are
    returned too, in the order they were met (request order)."""
    found: list[tuple[str, RecordSet]] = []
    schema = layout(entity_type)
    kwargs: dict[str, Any] = {}
    for spec in (*schema.fields, *schema.tagged):
        value = values[spec.name]
        if isinstance(value, RecordSet):
            found.append((spec.name, value))
            value = value.data
        elif spec.struct_type is not None and value is not None:
            if spec.kind is Kind.STRUCT:
                value, inner = build_entity(spec.struct_type, value)
                found += inner
            else:
                built = [build_entity(spec.struct_type, item) for item in value]
                value = tuple(entity for entity, _ in built)
                found += [pair for _, inner in built for pair in inner]
        kwargs[spec.name] = value
    return entity_type(**kwargs), found


def _produced(
    body: Any, record_sets_found: list[tuple[str, RecordSet]]
) -> tuple[tuple[str, int, RecordSet], ...]:
    """(topic, partition, record set) of a Produce request, in request order (the order in
    which ``build_entity`` found the record sets)."""
    where = [(t.name, p.index) for t in body.topic_data for p in t.partition_data]
    return tuple(
        (topic, partition, found)
        for (topic, partition), (_, found) in zip(where, record_sets_found, strict=True)
    )


# -- cases and rounds ------------------------------------------------------------------------


def wait_ms_of(body: Any) -> int:
    waits = [
        round(getattr(body, name).total_seconds() * 1000)
        for name in ("max_wait", "timeout")
        if isinstance(getattr(body, name, None), timedelta)
    ]
    return max([0, *waits])


@st.composite
def _request(
    draw: st.DrawFn, api_key: int, served: Mapping[int, tuple[int, int]], pools: Pools
) -> tuple[int, Any, Frame, tuple[tuple[str, int, RecordSet], ...]]:
    """A well-formed request of ``api_key``: its version, body, frame and record sets."""
    low, high = served[api_key]
    version = draw(st.integers(low, high))
    schema = schemas.request_schema(api_key, version)
    body, record_sets_found = build_entity(schema, draw(body_values(schema, api_key, pools)))
    correlation_id = draw(_weighted(1, 7, 2**31 - 1, 0, -1) | st.integers(0, 2**31 - 1))
    client_id = draw(_weighted("odradek-fuzz", "odradek-fuzz", None, "", "ü" * 40))
    frame = encode_request(body, correlation_id, client_id)
    produce = _produced(body, record_sets_found) if api_key == ApiKey.PRODUCE else ()
    return version, body, frame, produce


@st.composite
def well_formed_case(
    draw: st.DrawFn,
    target: int,
    served: Mapping[int, tuple[int, int]],
    pools: Pools,
    api_keys: Sequence[int],
) -> Case:
    """A well-formed request of one of ``api_keys`` (none with a record set), left alone."""
    api_key = draw(st.sampled_from(sorted(api_keys)))
    version, body, frame, _ = draw(_request(api_key, served, pools))
    return Case(
        target=target,
        api_key=api_key,
        api_version=version,
        frame=struct.pack(">i", len(frame.data)) + frame.data,
        description=f"api {ApiKey(api_key).name} v{version}",
        mutated=False,
        breaks_stream=False,
        answer_expected=True,
        wait_ms=wait_ms_of(body),
        produce=(),
    )


@st.composite
def cases(
    draw: st.DrawFn, target: int, served: Mapping[int, tuple[int, int]], pools: Pools
) -> Case:
    """One case for ``target``, which serves ``served`` and aims at ``pools``."""
    if pools.tls_hello is not None and draw(st.booleans()):
        return draw(_tls_hellos(target, pools.tls_hello, served))
    keys = sorted(served)
    weights = dict(pools.api_weights) if pools.api_weights else API_WEIGHTS
    api_key = draw(st.sampled_from([k for k in keys for _ in range(weights.get(k, 1))]))
    version, body, frame, produce = draw(_request(api_key, served, pools))
    acks_zero = api_key == ApiKey.PRODUCE and body.acks == 0

    data, notes = frame.data, [f"api {ApiKey(api_key).name} v{version}"]
    mutation = draw(
        _weighted(
            "none", "none", "none", "none", "field", "field", "byte", "byte", "both", "garbage"
        )
    )
    if mutation in ("field", "both"):
        data, done = draw(field_mutations(frame))
        notes += done
    if mutation in ("byte", "both"):
        data, done = draw(byte_mutations(data, served))
        notes += done
    if mutation == "garbage":
        data = draw(st.binary(max_size=200))
        notes.append("random bytes")
    size = len(data)
    if draw(st.integers(0, 9)) == 0:
        size = draw(
            _weighted(
                len(data) - 1,
                len(data) + 1,
                len(data) + 100,
                0,
                -1,
                9,
                pools.max_frame_bytes,
                pools.max_frame_bytes + 1,
                KAFKA_MAX_FRAME_BYTES,
                INT32_MAX,
                2 * len(data),
            )
        )
        notes.append(f"size prefix {size} for {len(data)} bytes")
    mutated = mutation != "none" or size != len(data)
    for topic, partition, records_set in produce:
        notes.append(f"{topic}[{partition}]: {records_set.kind}")
    return Case(
        target=target,
        api_key=api_key,
        api_version=version,
        frame=struct.pack(">i", size) + data,
        description="; ".join(notes),
        mutated=mutated,
        breaks_stream=(
            size != len(data)
            or mutation == "garbage"
            or not REQUEST_HEADER_MIN_BYTES <= size <= pools.max_frame_bytes
        ),
        answer_expected=not mutated and not acks_zero,
        wait_ms=wait_ms_of(body),
        produce=produce,
    )


@st.composite
def _tls_hellos(
    draw: st.DrawFn, target: int, hello: bytes, served: Mapping[int, tuple[int, int]]
) -> Case:
    """A TLS ClientHello, as sent or cut, flipped, spliced (``byte_mutations``); never owed an
    answer (the listener speaks TLS, and these are not Kafka requests)."""
    data, notes = hello, ["TLS ClientHello"]
    if draw(st.integers(0, 3)):
        data, done = draw(byte_mutations(hello, served))
        notes += done
    return Case(
        target=target,
        api_key=ApiKey.API_VERSIONS,  # what stats count it as; no Kafka request at all
        api_version=0,
        frame=data,
        description="; ".join(notes),
        mutated=True,
        breaks_stream=True,
        answer_expected=False,
        wait_ms=0,
        produce=(),
    )


@st.composite
def mixed_rounds(
    draw: st.DrawFn,
    targets: Sequence[tuple[Mapping[int, tuple[int, int]], Pools]],
) -> Round:
    """A few cases over a few connections (see the module docstring). ``targets`` holds, for
    each target, the APIs it serves and what its cases aim at; a connection goes to one."""
    count = draw(st.integers(1, CASES_PER_ROUND_MAX))
    connections = draw(st.integers(1, min(CONNECTIONS_PER_ROUND_MAX, count)))
    weighted = [i for i, (_, pools) in enumerate(targets) for _ in range(pools.share)]
    target_of = [draw(st.sampled_from(weighted)) for _ in range(connections)]
    connection_of = tuple(draw(st.integers(0, connections - 1)) for _ in range(count))
    drawn = [draw(cases(target_of[c], *targets[target_of[c]])) for c in connection_of]
    for connection in range(connections):
        served, pools = targets[target_of[connection]]
        positions = [i for i, c in enumerate(connection_of) if c == connection]
        if pools.sasl_mechanism is not None and positions:
            ordered = sorted((drawn[i] for i in positions), key=_sasl_rank)
            for i, case in zip(positions, ordered, strict=True):
                drawn[i] = case
            # (not when ODRADEK_FUZZ_APIS leaves SaslHandshake out)
            handshakes = ApiKey.SASL_HANDSHAKE in served
            if handshakes and draw(_weighted(True, True, True, False)):  # not st.integers: 0
                low, high = served[ApiKey.SASL_HANDSHAKE]
                version = draw(st.integers(max(low, 1), high))  # v0's raw tokens: drawn above
                # Its own correlation id: the session sends no frame twice.
                correlation_id = draw(st.integers(0, 2**31 - 1))
                handshake = _handshake(
                    target_of[connection], pools.sasl_mechanism, version, correlation_id
                )
                drawn.insert(positions[0], handshake)
                connection_of = (
                    connection_of[: positions[0]] + (connection,) + connection_of[positions[0] :]
                )
    pipelined = tuple(draw(st.booleans()) for _ in range(connections))
    return Round(tuple(drawn), connection_of, pipelined)


def _handshake(target: int, mechanism: str, version: int, correlation_id: int) -> Case:
    """A well-formed SaslHandshake for ``mechanism``: the exchange's first step."""
    schema = schemas.request_schema(ApiKey.SASL_HANDSHAKE, version)
    data = encode_request(schema(mechanism=mechanism), correlation_id, "odradek-fuzz").data
    return Case(
        target=target,
        api_key=ApiKey.SASL_HANDSHAKE,
        api_version=version,
        frame=struct.pack(">i", len(data)) + data,
        description=f"api SASL_HANDSHAKE v{version} for {mechanism} (first)",
        mutated=False,
        breaks_stream=False,
        answer_expected=True,
        wait_ms=0,
        produce=(),
    )


# ApiVersions, then SaslHandshake, then the rest as drawn: SaslAuthenticate and requests that
# must be refused mixed, so they also come in the middle of an exchange.
_SASL_ORDER = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)


def _sasl_rank(case: Case) -> int:
    return _SASL_ORDER.index(case.api_key) if case.api_key in _SASL_ORDER else len(_SASL_ORDER)
