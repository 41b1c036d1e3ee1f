"""BrokerConnection against a fake broker on a real socket: pipelining, correlation, failures.

The fake broker is an ``asyncio.start_server`` on 127.0.0.1 that reads requests with the server
side of our codec and answers by hand (``encode_response``), so each test decides exactly which
bytes come back, and when.
"""

from __future__ import annotations

import asyncio
import importlib
import socket
import struct
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from odradek.client.connection import MAX_IN_FLIGHT_REQUESTS, BrokerConnection
from odradek.client.errors import (
    ConnectionClosedError,
    NoCommonVersionError,
    ProtocolError,
    RequestTimeoutError,
)
from odradek.errors import ErrorCode
from odradek.protocol.apis import ApiKey, build_api_versions_response
from odradek.protocol.codec import DecodedRequest, decode_request, encode_response
from odradek.protocol.header import RequestHeader
from odradek.protocol.schemas import request_schema, response_schema

_SIZE = struct.Struct(">i")
SCENARIO_TIMEOUT_S = 10


class FakeBroker:
    """One listening socket; requests arrive on ``received``, answers go out when told."""

    def __init__(self, auto_answer: Callable[[DecodedRequest], Any] | None = None):
        self.auto_answer = auto_answer  # returns a response body, or None for no answer
        self.received: asyncio.Queue[DecodedRequest] = asyncio.Queue()
        self.writer: asyncio.StreamWriter | None = None
        self.served = asyncio.Event()  # the one connection's handler has returned
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self.server is not None
        self.server.close()
        if self.writer is not None:
            # Let the handler end by itself: cancelling it makes 3.11's streams log an error.
            self.writer.close()
            await self.served.wait()

    async def connect(self, **kwargs: Any) -> BrokerConnection:
        return await BrokerConnection.open("127.0.0.1", self.port, client_id="test", **kwargs)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
                request = decode_request(await reader.readexactly(size))
                self.received.put_nowait(request)
                if self.auto_answer is not None:
                    body = self.auto_answer(request)
                    if body is not None:
                        self.answer(request, body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.served.set()

    async def requests(self, count: int) -> list[DecodedRequest]:
        return [await self.received.get() for _ in range(count)]

    def answer(self, request: DecodedRequest, body: Any) -> None:
        self.write_frame(encode_response(request.header, body))

    def write_frame(self, frame: bytes) -> None:
        self.write(_SIZE.pack(len(frame)) + frame)

    def write(self, raw: bytes) -> None:
        assert self.writer is not None
        self.writer.write(raw)


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(SCENARIO_TIMEOUT_S):
            return await scenario()

    return asyncio.run(bounded())


def metadata_request(topic: str) -> Any:
    request_type = request_schema(ApiKey.METADATA, 12)
    topic_type = importlib.import_module(request_type.__module__).MetadataRequestTopic
    return request_type(
        topics=(topic_type(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def metadata_response(cluster_id: str) -> Any:
    """A Metadata v12 answer that says which request it answers, in ``cluster_id``."""
    return response_schema(ApiKey.METADATA, 12)(
        throttle_time=timedelta(0), brokers=(), cluster_id=cluster_id, controller_id=1, topics=()
    )


def echo_topic(request: DecodedRequest) -> Any:
    return metadata_response(request.body.topics[0].name)


def test_fifty_pipelined_requests_are_all_in_flight_and_each_gets_its_own_answer():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            sends = [asyncio.create_task(conn.send(metadata_request(f"t{i}"))) for i in range(50)]
            requests = await broker.requests(50)  # nothing answered yet: all 50 are on the wire
            assert conn.in_flight == 50
            assert [r.header.correlation_id for r in requests] == list(range(50))
            for request in requests:
                broker.answer(request, echo_topic(request))
            responses = await asyncio.gather(*sends)
            assert [r.cluster_id for r in responses] == [f"t{i}" for i in range(50)]
            assert conn.in_flight == 0 and not conn.closed
            await conn.close()

    run(scenario)


def test_a_correlation_id_out_of_order_fails_every_pending_request_and_closes():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            sends = [asyncio.create_task(conn.send(metadata_request(f"t{i}"))) for i in range(3)]
            first, second, _third = await broker.requests(3)
            broker.answer(second, echo_topic(second))
            results = await asyncio.gather(*sends, return_exceptions=True)
            assert all(isinstance(r, ProtocolError) for r in results), results
            assert "correlation id 1 where 0 was expected" in str(results[0])
            assert conn.closed
            with pytest.raises(ConnectionClosedError):
                await conn.send(metadata_request("after"))

    run(scenario)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_SIZE.pack(2**31 - 1), "outside"),  # above max_response_bytes
        (_SIZE.pack(2), "outside"),  # shorter than a correlation id
        (_SIZE.pack(5) + _SIZE.pack(0) + b"\xff", "response 0 .api key 3 v12.: malformed"),
    ],
    ids=["too-large", "too-small", "body-does-not-parse"],
)
def test_bytes_that_answer_no_request_are_a_protocol_error(raw, message):
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            send = asyncio.create_task(conn.send(metadata_request("t")))
            await broker.requests(1)
            broker.write(raw)
            with pytest.raises(ProtocolError, match=message) as failure:
                await send
            assert failure.value.error_code is ErrorCode.corrupt_message
            assert conn.closed

    run(scenario)


def test_a_response_to_no_request_closes_the_connection(caplog):
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            while broker.writer is None:
                await asyncio.sleep(0.01)
            broker.write_frame(encode_response(_header_for(3, 12, 0), metadata_response("x")))
            while not conn.closed:
                await asyncio.sleep(0.01)
            assert "a response (correlation id 0) to no request" in caplog.text
            with pytest.raises(ConnectionClosedError):
                await conn.send(metadata_request("t"))

    run(scenario)


def _header_for(api_key: int, api_version: int, correlation_id: int) -> RequestHeader:
    return RequestHeader(api_key, api_version, correlation_id, "test", 2, 0)


def test_a_timeout_fails_that_request_and_closes_the_connection():
    async def scenario():
        async with FakeBroker() as broker:  # never answers
            conn = await broker.connect(request_timeout_s=5)
            patient = asyncio.create_task(conn.send(metadata_request("patient")))
            with pytest.raises(RequestTimeoutError) as timed_out:
                await conn.send(metadata_request("hasty"), timeout_s=0.1)
            assert timed_out.value.retriable
            assert timed_out.value.error_code is ErrorCode.request_timed_out
            assert conn.closed and conn.in_flight == 0
            with pytest.raises(ConnectionClosedError, match="timed out"):
                await patient

    run(scenario)


def test_the_broker_closing_mid_response_fails_pending_requests_as_retriable():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            sends = [asyncio.create_task(conn.send(metadata_request(f"t{i}"))) for i in range(2)]
            await broker.requests(2)
            broker.write(_SIZE.pack(100) + b"\x00" * 10)  # a response cut short
            assert broker.writer is not None
            broker.writer.close()
            results = await asyncio.gather(*sends, return_exceptions=True)
            assert all(isinstance(r, ConnectionClosedError) for r in results), results
            assert all(r.retriable and r.error_code is ErrorCode.network_exception for r in results)
            assert conn.closed

    run(scenario)


def test_the_in_flight_bound_holds_until_a_response_frees_a_slot():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            count = MAX_IN_FLIGHT_REQUESTS + 1
            sends = [
                asyncio.create_task(conn.send(metadata_request(f"t{i}"))) for i in range(count)
            ]
            requests = await broker.requests(MAX_IN_FLIGHT_REQUESTS)
            await asyncio.sleep(0.2)
            assert broker.received.empty() and conn.in_flight == MAX_IN_FLIGHT_REQUESTS
            broker.answer(requests[0], echo_topic(requests[0]))
            (last,) = await broker.requests(1)  # the slot freed by that answer
            assert last.body.topics[0].name == f"t{count - 1}"
            for request in [*requests[1:], last]:
                broker.answer(request, echo_topic(request))
            responses = await asyncio.gather(*sends)
            assert [r.cluster_id for r in responses] == [f"t{i}" for i in range(count)]
            await conn.close()

    run(scenario)


def test_a_cancelled_request_keeps_the_connection_and_its_answer_is_dropped():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            abandoned = asyncio.create_task(conn.send(metadata_request("abandoned")))
            (first,) = await broker.requests(1)
            abandoned.cancel()
            kept = asyncio.create_task(conn.send(metadata_request("kept")))
            (second,) = await broker.requests(1)
            broker.answer(first, echo_topic(first))
            broker.answer(second, echo_topic(second))
            assert (await kept).cluster_id == "kept"
            assert abandoned.cancelled() and not conn.closed and conn.in_flight == 0
            await conn.close()

    run(scenario)


def test_produce_with_acks_0_gets_no_answer_and_the_next_request_still_matches():
    async def scenario():
        async with FakeBroker(
            auto_answer=lambda r: echo_topic(r) if r.header.api_key == 3 else None
        ) as broker:
            conn = await broker.connect()
            produce_type = request_schema(ApiKey.PRODUCE, 9)
            unanswered = produce_type(
                transactional_id=None, acks=0, timeout=timedelta(seconds=1), topic_data=()
            )
            await conn.send_no_response(unanswered)
            assert (await conn.send(metadata_request("next"))).cluster_id == "next"
            produce, metadata = await broker.requests(2)
            assert (produce.header.correlation_id, metadata.header.correlation_id) == (0, 1)
            with pytest.raises(ValueError, match="acks=0"):
                await conn.send_no_response(metadata_request("answered"))
            await conn.close()

    run(scenario)


def test_close_fails_pending_requests_and_is_idempotent():
    async def scenario():
        async with FakeBroker() as broker:
            conn = await broker.connect()
            pending = asyncio.create_task(conn.send(metadata_request("t")))
            await broker.requests(1)
            await conn.close()
            await conn.close()
            with pytest.raises(ConnectionClosedError, match="closed by the client"):
                await pending
            assert conn.closed

    run(scenario)


def test_connecting_to_a_port_nobody_listens_on_is_a_retriable_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again at once: nobody listens there

    async def scenario():
        with pytest.raises(ConnectionClosedError, match="cannot connect") as failure:
            await BrokerConnection.open("127.0.0.1", port, connect_timeout_s=2)
        assert failure.value.retriable

    run(scenario)


def _api_versions_peer(fallback_names: tuple[int, int] | None, served: dict[int, tuple[int, int]]):
    """Answers ApiVersions above the highest version of ``fallback_names`` with error 35."""
    highest = fallback_names[1] if fallback_names else 0

    def answer(request: DecodedRequest) -> Any:
        if request.header.api_version > highest:
            named = {ApiKey.API_VERSIONS: fallback_names} if fallback_names else {}
            return build_api_versions_response(0, ErrorCode.unsupported_version, versions=named)
        return build_api_versions_response(request.header.api_version, versions=served)

    return answer


@pytest.mark.parametrize(
    ("fallback_names", "asked"),
    [((0, 0), [4, 0]), ((0, 2), [4, 2]), (None, [4, 0])],
    ids=["names-v0", "names-v2", "pre-KIP-511-names-nothing"],
)
def test_negotiate_versions_falls_back_on_error_35_as_kip_511_clients_do(fallback_names, asked):
    served = {ApiKey.API_VERSIONS: (0, asked[-1]), ApiKey.METADATA: (0, 5), ApiKey.PRODUCE: (3, 7)}

    async def scenario():
        async with FakeBroker(auto_answer=_api_versions_peer(fallback_names, served)) as broker:
            conn = await broker.connect()
            with pytest.raises(RuntimeError, match="negotiate_versions"):
                conn.pick_version(ApiKey.METADATA, 12)
            assert await conn.negotiate_versions() == served
            requests = await broker.requests(len(asked))
            assert [r.header.api_version for r in requests] == asked
            assert conn.api_versions == served
            assert conn.pick_version(ApiKey.METADATA, 12) == 5
            assert conn.pick_version(ApiKey.METADATA, 3) == 3
            assert conn.pick_version(ApiKey.PRODUCE, 11) == 7
            with pytest.raises(NoCommonVersionError, match="PRODUCE.*v3-7.*at most v2"):
                conn.pick_version(ApiKey.PRODUCE, 2)
            with pytest.raises(NoCommonVersionError, match="FETCH.*serves no version"):
                conn.pick_version(ApiKey.FETCH, 12)
            await conn.close()

    run(scenario)
