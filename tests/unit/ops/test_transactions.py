"""``odradek transactions``' operations against a double that answers with kio responses: the
requests they send (api, broker, fields) and what they make of the answers and the errors;
and the command's argument checks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from odradek.cli import main
from odradek.client.admin import build, element_type
from odradek.client.errors import ClusterRequestError, UnsupportedByClusterError
from odradek.common.partitions import TopicPartition
from odradek.errors import ErrorCode
from odradek.ops import transactions as txn_ops
from odradek.ops.model import ClusterView
from odradek.protocol import schemas

TP = TopicPartition("t", 0)
NOW_MS = 1_700_000_000_000


def view() -> ClusterView:
    # t-0 led by 2 (replicas 2, 3), t-1 led by 3 (replicas 3, 1)
    base = ClusterView.build({("t", 0): [2, 3], ("t", 1): [3, 1]}, racks=[1, 2, 3])
    return base


def response(api_key: int, version: int, **fields: Any) -> Any:
    return build(schemas.response_schema(api_key, version), **fields)


def nested(api_key: int, version: int, *path: str) -> type[Any]:
    cls = schemas.response_schema(api_key, version)
    for name in path:
        cls = element_type(cls, name)
    return cls


class FakeClient:
    """Answers each (broker, api) from ``answers``; records every request it was sent."""

    def __init__(self, answers: dict[tuple[int | None, int], Any], versions: dict[int, int]):
        self.answers = answers
        self.versions = versions  # api key -> the version the "broker" speaks
        self.sent: list[tuple[int | None, int, Any]] = []
        self.broker_addresses = {1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}

    async def send_any(self, api_key: int, max_version: int, make: Any) -> Any:
        return await self.send_to(None, api_key, max_version, make)

    async def send_to(self, broker_id: int | None, api_key: int, max_version: int, make: Any):
        version = min(max_version, self.versions.get(api_key, max_version))
        request = make(schemas.request_schema(api_key, version))
        self.sent.append((broker_id, api_key, request))
        answer = self.answers[(broker_id, api_key)]
        return answer(request) if callable(answer) else answer


def list_answer(states: list[tuple[str, int, str]], **extra: Any) -> Any:
    state_type = nested(66, 1, "transaction_states")
    return response(
        66,
        1,
        throttle_time=timedelta(0),
        error_code=extra.pop("error_code", ErrorCode.none),
        unknown_state_filters=extra.pop("unknown", ()),
        transaction_states=tuple(
            build(state_type, transactional_id=t, producer_id=p, transaction_state=s)
            for t, p, s in states
        ),
    )


def producers_answer(partitions: dict[int, Any]) -> Any:
    """``{partition: error | [(pid, epoch, coordinator_epoch, start_offset, last_ts), ...]}``."""
    topic_type = nested(61, 0, "topics")
    partition_type = element_type(topic_type, "partitions")
    producer_type = element_type(partition_type, "active_producers")
    built = []
    for index, value in partitions.items():
        error = value if isinstance(value, ErrorCode) else ErrorCode.none
        states = () if isinstance(value, ErrorCode) else value
        built.append(
            build(
                partition_type,
                partition_index=index,
                error_code=error,
                error_message=None,
                active_producers=tuple(
                    build(
                        producer_type,
                        producer_id=pid,
                        producer_epoch=epoch,
                        last_sequence=0,
                        last_timestamp=ts,
                        coordinator_epoch=ce,
                        current_txn_start_offset=start,
                    )
                    for pid, epoch, ce, start, ts in states
                ),
            )
        )
    return response(
        61,
        0,
        throttle_time=timedelta(0),
        topics=(build(topic_type, name="t", partitions=tuple(built)),),
    )


def markers_answer(error: ErrorCode) -> Any:
    result_type = nested(27, 1, "markers")
    topic_type = element_type(result_type, "topics")
    partition_type = element_type(topic_type, "partitions")

    def answer(request: Any) -> Any:
        marker = request.markers[0]
        return response(
            27,
            1,
            markers=(
                build(
                    result_type,
                    producer_id=marker.producer_id,
                    topics=(
                        build(
                            topic_type,
                            name="t",
                            partitions=(
                                build(partition_type, partition_index=0, error_code=error),
                            ),
                        ),
                    ),
                ),
            ),
        )

    return answer


def coordinator_answer(node_id: int, error: ErrorCode = ErrorCode.none) -> Any:
    coordinator_type = nested(10, 4, "coordinators")
    return response(
        10,
        4,
        throttle_time=timedelta(0),
        coordinators=(
            build(
                coordinator_type,
                key="tx",
                node_id=node_id,
                host="h",
                port=9,
                error_code=error,
                error_message=None,
            ),
        ),
    )


def describe_answer(state: str, pid: int, epoch: int, partitions: list[TopicPartition]) -> Any:
    state_type = nested(65, 0, "transaction_states")
    topic_type = element_type(state_type, "topics")
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return response(
        65,
        0,
        throttle_time=timedelta(0),
        transaction_states=(
            build(
                state_type,
                error_code=ErrorCode.none,
                transactional_id="tx",
                transaction_state=state,
                transaction_timeout=timedelta(seconds=60),
                transaction_start_time=datetime.fromtimestamp(NOW_MS / 1000, UTC),
                producer_id=pid,
                producer_epoch=epoch,
                topics=tuple(
                    build(topic_type, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            ),
        ),
    )


# -- list -------------------------------------------------------------------------------------


def test_list_asks_every_broker_with_the_filters_and_merges():
    client = FakeClient(
        {
            (1, 66): list_answer([("a", 10, "Ongoing")]),
            (2, 66): list_answer([]),
            (3, 66): list_answer([("b", 11, "Ongoing"), ("c", 12, "Ongoing")]),
        },
        versions={},
    )
    listed = asyncio.run(
        txn_ops.list_transactions_on(
            client, [3, 1, 2], states=["Ongoing"], producer_ids=[10, 11], duration_ms=5000
        )
    )
    assert [(t.transactional_id, t.coordinator, t.producer_id) for t in listed] == [
        ("a", 1, 10),
        ("b", 3, 11),
        ("c", 3, 12),
    ]
    assert [b for b, _, _ in client.sent] == [1, 2, 3]
    request = client.sent[0][2]
    assert (request.state_filters, request.producer_id_filters, request.duration_filter) == (
        ("Ongoing",),
        (10, 11),
        5000,
    )


def test_a_duration_filter_the_cluster_cannot_apply_is_refused():
    client = FakeClient({(1, 66): list_answer([])}, versions={66: 0})
    with pytest.raises(UnsupportedByClusterError):
        asyncio.run(txn_ops.list_transactions_on(client, [1], duration_ms=1))
    assert asyncio.run(txn_ops.list_transactions_on(client, [1])) == []  # v0 without it is fine


def test_unknown_states_and_errors_are_reported():
    client = FakeClient({(1, 66): list_answer([], unknown=("Bogus",))}, versions={})
    with pytest.raises(txn_ops.UnknownStateFilterError, match="Bogus"):
        asyncio.run(txn_ops.list_transactions_on(client, [1], states=["Bogus"]))
    client = FakeClient(
        {(1, 66): list_answer([], error_code=ErrorCode.coordinator_load_in_progress)}, versions={}
    )
    with pytest.raises(ClusterRequestError) as raised:
        asyncio.run(txn_ops.list_transactions_on(client, [1]))
    assert raised.value.error_code == ErrorCode.coordinator_load_in_progress


# -- describe ---------------------------------------------------------------------------------


def test_describe_finds_the_transaction_coordinator_then_asks_it():
    client = FakeClient(
        {
            (None, 10): coordinator_answer(3),
            (3, 65): describe_answer("Ongoing", 10, 2, [TopicPartition("t", 1), TP]),
        },
        versions={},
    )
    described = asyncio.run(txn_ops.describe_transaction_on(client, "tx"))
    assert client.sent[0][2].key_type == 1  # TRANSACTION, not GROUP
    assert client.sent[0][2].coordinator_keys == ("tx",)
    assert (described.coordinator, described.state, described.producer_id) == (3, "Ongoing", 10)
    assert described.timeout_ms == 60_000 and described.start_time_ms == NOW_MS
    assert described.partitions == (TP, TopicPartition("t", 1))


def test_describe_reports_a_coordinator_that_cannot_be_found():
    client = FakeClient({(None, 10): coordinator_answer(-1, ErrorCode.invalid_request)}, {})
    with pytest.raises(ClusterRequestError, match="no transaction coordinator"):
        asyncio.run(txn_ops.describe_transaction_on(client, "tx"))


# -- abort ------------------------------------------------------------------------------------


def test_abort_finds_the_producer_by_start_offset_and_writes_an_abort_marker_at_the_leader():
    client = FakeClient(
        {
            (2, 61): producers_answer({0: [(10, 1, 5, 40, NOW_MS), (11, 4, -1, 77, NOW_MS)]}),
            (2, 27): markers_answer(ErrorCode.none),
        },
        versions={},
    )
    result = asyncio.run(txn_ops.abort_transaction_on(client, view(), TP, 77))
    assert (result.leader, result.producer_id, result.producer_epoch) == (2, 11, 4)
    assert result.coordinator_epoch == 0  # unknown (-1): the tool writes 0
    ((_, _, describe), (broker, api, write)) = [(b, a, r) for b, a, r in client.sent]
    assert describe.topics[0].partition_indexes == (0,)
    assert (broker, api) == (2, 27)
    marker = write.markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result) == (11, 4, False)
    assert marker.topics[0].name == "t" and marker.topics[0].partition_indexes == (0,)


def test_abort_without_such_a_transaction_writes_nothing():
    client = FakeClient({(2, 61): producers_answer({0: [(10, 1, 5, 40, NOW_MS)]})}, {})
    with pytest.raises(txn_ops.NoSuchTransactionError, match="start at: 40"):
        asyncio.run(txn_ops.abort_transaction_on(client, view(), TP, 77))
    assert [a for _, a, _ in client.sent] == [61]


def test_abort_reports_the_leaders_refusals():
    client = FakeClient({(2, 61): producers_answer({0: ErrorCode.not_leader_or_follower})}, {})
    with pytest.raises(ClusterRequestError) as raised:
        asyncio.run(txn_ops.abort_transaction_on(client, view(), TP, 1))
    assert raised.value.error_code == ErrorCode.not_leader_or_follower
    client = FakeClient(
        {
            (2, 61): producers_answer({0: [(10, 1, 5, 40, NOW_MS)]}),
            (2, 27): markers_answer(ErrorCode.transaction_coordinator_fenced),
        },
        {},
    )
    with pytest.raises(ClusterRequestError) as raised:
        asyncio.run(txn_ops.abort_transaction_on(client, view(), TP, 40))
    assert raised.value.error_code == ErrorCode.transaction_coordinator_fenced
    with pytest.raises(ClusterRequestError) as raised:
        asyncio.run(txn_ops.abort_transaction_on(client, view(), TopicPartition("u", 0), 1))
    assert raised.value.error_code == ErrorCode.unknown_topic_or_partition


# -- find-hanging -----------------------------------------------------------------------------


def test_find_hanging_keeps_old_open_transactions_no_coordinator_is_completing():
    old = NOW_MS - txn_ops.MAX_TRANSACTION_TIMEOUT_MS - 1
    client = FakeClient(
        {
            # Broker 3 holds replicas of t-0 (led by 2) and t-1 (led by 3).
            (2, 61): producers_answer({0: [(10, 1, 0, 5, old), (12, 1, 0, 9, NOW_MS)]}),
            (3, 61): producers_answer({1: [(11, 2, 0, 7, old)]}),
            (1, 66): list_answer([("tx", 11, "Ongoing")]),
            (2, 66): list_answer([]),
            (3, 66): list_answer([]),
            (None, 10): coordinator_answer(1),
            (1, 65): describe_answer("Ongoing", 11, 2, [TopicPartition("t", 1)]),
        },
        versions={},
    )
    hanging = asyncio.run(txn_ops.find_hanging_on(client, view(), 3, now_ms=NOW_MS))
    # 12 is recent; 11's transaction is in progress at its coordinator; 10 is known to none.
    assert [(t.tp, t.producer_id, t.start_offset) for t in hanging] == [(TP, 10, 5)]
    listed = [r for _, a, r in client.sent if a == 66][0]
    assert listed.producer_id_filters == (10, 11)


# -- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["transactions", "describe"],  # no --transactional-id
        ["transactions", "abort", "--topic", "t", "--start-offset", "1"],  # no --partition
        ["transactions", "abort", "--topic", "t", "--partition", "-1", "--start-offset", "1"],
        ["transactions", "list", "--duration-filter", "x"],
        ["transactions", "list", "--producer-id", "-3"],
        ["transactions", "find-hanging"],
        ["transactions", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        [],  # neither a start offset nor a producer
        ["--producer-id", "1", "--producer-epoch", "0"],  # no coordinator epoch
        ["--start-offset", "3", "--producer-id", "1"],  # both ways at once
    ],
)
def test_abort_needs_one_way_to_name_the_transaction(extra, capsys):
    argv = ["transactions", "abort", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"]
    assert main([*argv, "--partition", "0", *extra]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--start-offset" in err


def test_a_transaction_never_started_decodes_with_no_start_time():
    """Kafka fills the non-nullable TransactionStartTimeMs with -1; the reader gives None."""
    from odradek.protocol.codec import InvalidResponseError, decode_response, encode_response
    from odradek.protocol.header import RequestHeader

    answer = describe_answer("Empty", 10, 0, [])
    state = answer.transaction_states[0]
    unset = type(answer)(
        throttle_time=answer.throttle_time,
        transaction_states=(type(state)(**{**_fields(state), "transaction_start_time": None}),),
    )
    header = RequestHeader(65, 0, 1, None, 2, 0)
    frame = encode_response(header, unset)
    decoded = decode_response(65, 0, frame).body.transaction_states[0]
    assert decoded.transaction_start_time is None
    assert txn_ops._epoch_millis(decoded.transaction_start_time) == -1
    minus_two = frame.replace(
        (-1).to_bytes(8, "big", signed=True), (-2).to_bytes(8, "big", signed=True)
    )
    assert minus_two != frame
    with pytest.raises(InvalidResponseError):
        decode_response(65, 0, minus_two)


def _fields(entity: Any) -> dict[str, Any]:
    return {
        name: getattr(entity, name)
        for name in entity.__dataclass_fields__
        if not name.startswith("__")
    }
