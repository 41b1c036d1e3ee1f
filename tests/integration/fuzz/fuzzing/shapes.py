"""The two request shapes of issue 23 that cost a broker the most for their size, as rounds of
their own: a huge array of tiny elements, and many tiny requests pipelined on one connection.

``rounds`` draws each round's kind: mostly a mixed round (``strategies.mixed_rounds``), and one
in ``SHAPE_ROUND_EVERY`` each of

- ``HUGE_ARRAYS``: one well-formed request of any API and version the target serves (one that
  has an array; half of these cases aim at ``HUGE_ARRAY_BOUNDED_APIS``), with one of its arrays
  (at the top, or inside a single top-level element) filled up to a size budget
  (``HUGE_ARRAY_BUDGETS_BYTES``, 32 KiB to 1 MB: both sides of the off-loop codec's 64 KiB)
  with copies of one tiny element: every field at its zero value (empty names, no nested
  items), or one element drawn as the mixed rounds draw them. The copies are one object, so the
  writer's repeat path encodes a million of them fast (``odradek.protocol.codec``). Record sets
  stay out of them: a repeated element never carries one. APIs not yet proven bounded get the
  smallest budget only, so one that still holds the loop costs the run little, and its figures
  are reported, not judged;
- ``PIPELINED``: ``PIPELINED_COUNTS`` requests (at most ``PIPELINED_REQUESTS_MAX``), copies of
  one to three well-formed tiny requests of ``PIPELINED_APIS`` with their own correlation ids,
  written at once on one connection and only then read, every answer owed in order.

Both go only to targets whose ``Pools.work_shapes`` is set (listeners that serve every API),
and only what the seed draws decides them, so they replay as the rest does. What the session
asserts about them (the broker's loop lag, its memory and open files) is ``invariants``'.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from fuzzing.strategies import (
    MIXED,
    REQUEST_HEADER_MIN_BYTES,
    Case,
    Pools,
    Round,
    body_values,
    build_entity,
    entity_values,
    field_hints,
    mixed_rounds,
    wait_ms_of,
    well_formed_case,
)
from odradek.protocol import schemas
from odradek.protocol.apis import ApiKey
from odradek.protocol.codec import encode_request
from odradek.protocol.fields import FieldSpec, Kind, layout

__all__ = [
    "HUGE_ARRAYS",
    "PIPELINED",
    "HUGE_ARRAY_BOUNDED_APIS",
    "PIPELINED_APIS",
    "rounds",
    "shaped_round",
]

HUGE_ARRAYS, PIPELINED = "huge arrays", "pipelined"  # the kinds of round added here
SHAPE_ROUND_EVERY = 12  # one round in 12 is a huge array, one in 12 a pipeline
# The APIs whose handlers work through huge arrays in time slices, each proven against a broker
# process by its worst 1 MB shape (tests/integration/cluster/test_request_work_bounds.py SHAPES):
# the broker's own loop lag is asserted for these. Add an API here once it has a shape there.
HUGE_ARRAY_BOUNDED_APIS = frozenset(
    {
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_TRANSACTIONS,
        ApiKey.FIND_COORDINATOR,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.LIST_OFFSETS,
        ApiKey.DELETE_TOPICS,
        ApiKey.METADATA,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
    }
)
HUGE_ARRAY_BUDGETS_BYTES = (32 * 1024, 128 * 1024, 256 * 1024, 1_000_000)
UNPROVEN_BUDGET_BYTES = HUGE_ARRAY_BUDGETS_BYTES[0]
# How long the broker may rightly work on a huge array, per MB, on top of the usual grace: the
# slowest bounded shape took 5.0 s at 1 MB on the development VM (ListOffsets, docs/security.md).
HUGE_ARRAY_WORK_S_PER_MB = 8.0
HUGE_ROUND_TIMEOUT_S = 16.0
# Tiny read-only requests, answered at once (nothing waits): what a pipeline is made of.
PIPELINED_APIS = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.METADATA,
        ApiKey.FIND_COORDINATOR,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.LIST_OFFSETS,
        ApiKey.DESCRIBE_CLUSTER,
    }
)
PIPELINED_COUNTS = (100, 300, 1000)
PIPELINED_REQUESTS_MAX = max(PIPELINED_COUNTS)
PIPELINED_WORK_S = 0.005  # what one more answer ahead in the queue may add to a wait
PIPELINED_ROUND_TIMEOUT_S = 16.0
PIPELINE_TEMPLATES_MAX = 3


def _zero(spec: FieldSpec) -> Any:
    """The tiniest value a field can take on the wire (never null where it may not be)."""
    if spec.tag is not None:
        return spec.default
    if spec.kind is Kind.RECORDS:
        return None if spec.nullable else b""
    if spec.kind in (Kind.STRUCT_ARRAY, Kind.PRIMITIVE_ARRAY):
        return ()
    if spec.kind is Kind.STRUCT:
        assert spec.struct_type is not None
        return _zero_entity(spec.struct_type)
    match spec.kafka_type:
        case "string":
            return ""
        case "bytes":
            return b""
        case "bool":
            return False
        case "float64":
            return 0.0
        case "uuid":
            return uuid.UUID(int=0)
        case "timedelta_i32" | "timedelta_i64":
            return timedelta(0)
    return 0


def _zero_entity(entity_type: type[Any]) -> Any:
    schema = layout(entity_type)
    return entity_type(**{s.name: _zero(s) for s in (*schema.fields, *schema.tagged)})


def _holds_records(entity_type: type[Any]) -> bool:
    for spec in (*layout(entity_type).fields, *layout(entity_type).tagged):
        if spec.kind is Kind.RECORDS:
            return True
        if spec.struct_type is not None and _holds_records(spec.struct_type):
            return True
    return False


def _arrays(schema: type[Any]) -> list[tuple[FieldSpec, FieldSpec | None]]:
    """Where a huge array can go: each top-level array, and each array inside a top-level
    struct array's element (then the top-level array holds that one element)."""
    found: list[tuple[FieldSpec, FieldSpec | None]] = []
    for spec in layout(schema).fields:
        if spec.kind not in (Kind.STRUCT_ARRAY, Kind.PRIMITIVE_ARRAY):
            continue
        found.append((spec, None))
        if spec.struct_type is not None:
            inner = layout(spec.struct_type).fields
            found += [
                (spec, s) for s in inner if s.kind in (Kind.STRUCT_ARRAY, Kind.PRIMITIVE_ARRAY)
            ]
    return found


@st.composite
def _element(draw: st.DrawFn, spec: FieldSpec, pools: Pools, api_key: int) -> tuple[Any, str]:
    """One tiny element for the array ``spec``, and what it is."""
    hints = field_hints(pools, api_key)
    if spec.kind is Kind.PRIMITIVE_ARRAY:
        hint = hints.get(spec.name)
        if hint is not None and draw(st.booleans()):
            value = draw(hint)
            return value, f"{value!r:.40}"
        return _zero(dataclasses.replace(spec, kind=Kind.PRIMITIVE, tag=None)), "zero"
    assert spec.struct_type is not None
    if _holds_records(spec.struct_type) or not draw(st.booleans()):
        return _zero_entity(spec.struct_type), "zero"
    values = draw(entity_values(spec.struct_type, hints, st.nothing()))
    element, _ = build_entity(spec.struct_type, values)
    return element, "drawn"


def _filled(container: Any, spec: FieldSpec, element: Any, count: int) -> Any:
    return dataclasses.replace(container, **{spec.name: (element,) * count})


@st.composite
def huge_array_case(
    draw: st.DrawFn, target: int, served: Mapping[int, tuple[int, int]], pools: Pools
) -> Case | None:
    """See the module docstring; None when no served API has an array."""
    candidates = [
        (api_key, version)
        for api_key, (low, high) in sorted(served.items())
        for version in range(low, high + 1)
        if _arrays(schemas.request_schema(api_key, version))
    ]
    if not candidates:
        return None
    # Half of them aim at the APIs proven bounded, which are few among those served.
    bounded = [c for c in candidates if c[0] in HUGE_ARRAY_BOUNDED_APIS]
    if bounded and draw(st.booleans()):
        candidates = bounded
    api_key, version = draw(st.sampled_from(candidates))
    schema = schemas.request_schema(api_key, version)
    outer, inner = draw(st.sampled_from(_arrays(schema)))
    bounded = api_key in HUGE_ARRAY_BOUNDED_APIS
    budget = draw(st.sampled_from(HUGE_ARRAY_BUDGETS_BYTES)) if bounded else UNPROVEN_BUDGET_BYTES
    values = draw(body_values(schema, api_key, pools))
    values[outer.name] = ()  # no record set survives: Produce's only array is replaced
    body, found = build_entity(schema, values)
    assert not found, "a huge-array case carries no record set"
    where = outer.name
    if inner is None:
        element, what = draw(_element(outer, pools, api_key))

        def request(count: int) -> Any:
            return _filled(body, outer, element, count)
    else:
        element, what = draw(_element(inner, pools, api_key))
        parent, _ = draw(_element(outer, pools, api_key))
        where = f"{outer.name}[0].{inner.name}"

        def request(count: int) -> Any:
            filled = _filled(parent, inner, element, count)
            return dataclasses.replace(body, **{outer.name: (filled,)})

    correlation_id = draw(st.integers(0, 2**31 - 1))
    one, two = (len(encode_request(request(n), correlation_id, "odradek-fuzz")) for n in (1, 2))
    count = max(1, (budget - one) // max(1, two - one) + 1)
    data = encode_request(request(count), correlation_id, "odradek-fuzz")
    acks_zero = api_key == ApiKey.PRODUCE and body.acks == 0
    return Case(
        target=target,
        api_key=api_key,
        api_version=version,
        frame=struct.pack(">i", len(data)) + data,
        description=(
            f"api {ApiKey(api_key).name} v{version}; huge array: {where} x {count:,} "
            f"({what} element), {len(data):,} bytes"
        ),
        mutated=False,
        breaks_stream=len(data) > pools.max_frame_bytes or len(data) < REQUEST_HEADER_MIN_BYTES,
        answer_expected=not acks_zero and len(data) <= pools.max_frame_bytes,
        wait_ms=wait_ms_of(body),
        produce=(),
        work_s=HUGE_ARRAY_WORK_S_PER_MB * len(data) / 1_000_000,
    )


def _with_correlation_id(case: Case, correlation_id: int, note: str) -> Case:
    frame = case.frame[:8] + struct.pack(">i", correlation_id) + case.frame[12:]
    return dataclasses.replace(
        case, frame=frame, description=f"{case.description}; {note}", work_s=PIPELINED_WORK_S
    )


@st.composite
def pipelined_cases(
    draw: st.DrawFn, target: int, served: Mapping[int, tuple[int, int]], pools: Pools
) -> tuple[Case, ...]:
    """See the module docstring."""
    keys = sorted(k for k in served if k in PIPELINED_APIS)
    templates = [
        draw(well_formed_case(target, served, pools, keys))
        for _ in range(draw(st.integers(1, PIPELINE_TEMPLATES_MAX)))
    ]
    count = draw(st.sampled_from(PIPELINED_COUNTS))
    first_id = draw(st.integers(0, 2**31 - 1 - PIPELINED_REQUESTS_MAX))
    return tuple(
        _with_correlation_id(
            templates[i % len(templates)], first_id + i, f"pipelined {i + 1} of {count}"
        )
        for i in range(count)
    )


@st.composite
def rounds(
    draw: st.DrawFn, targets: Sequence[tuple[Mapping[int, tuple[int, int]], Pools]]
) -> Round:
    """A mixed round, or one of the shapes above (see the module docstring)."""
    kind = draw(st.sampled_from([MIXED] * (SHAPE_ROUND_EVERY - 2) + [HUGE_ARRAYS, PIPELINED]))
    if kind != MIXED:
        round_ = draw(shaped_round(targets, kind))
        if round_ is not None:
            return round_
    return draw(mixed_rounds(targets))


@st.composite
def shaped_round(
    draw: st.DrawFn, targets: Sequence[tuple[Mapping[int, tuple[int, int]], Pools]], kind: str
) -> Round | None:
    """A round of ``kind`` (``HUGE_ARRAYS`` or ``PIPELINED``) to a target whose
    ``Pools.work_shapes`` is set; None when no target is (or none serves an API with an array)."""
    shaped = [i for i, (_, pools) in enumerate(targets) if pools.work_shapes]
    if not shaped:
        return None
    target = draw(st.sampled_from(shaped))
    served, pools = targets[target]
    if kind == HUGE_ARRAYS:
        case = draw(huge_array_case(target, served, pools))
        if case is None:
            return None
        return Round((case,), (0,), (True,), kind=HUGE_ARRAYS, timeout_s=HUGE_ROUND_TIMEOUT_S)
    cases = draw(pipelined_cases(target, served, pools))
    return Round(
        cases, (0,) * len(cases), (True,), kind=PIPELINED, timeout_s=PIPELINED_ROUND_TIMEOUT_S
    )
