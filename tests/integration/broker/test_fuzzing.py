"""Random and mutated frames against a live broker: it never crashes and keeps serving clients."""

from __future__ import annotations

import importlib
import importlib.util
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.codec import encode_request
from odradek.protocol.schemas import request_schema

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location(
    "in_process_broker", Path(__file__).with_name("conftest.py")
)
real_clients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_clients)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    running = real_clients.RunningBroker(tmp_path_factory.mktemp("fuzz"))
    yield running
    running.close()


def _valid_requests() -> list[bytes]:
    """Real requests (Metadata, Produce with a kafka-python batch) to mutate."""
    from datetime import timedelta

    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1_700_000_000_000, b"k", b"fuzzed value", [])
    metadata = request_schema(3, 9)(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    produce_type = request_schema(0, 9)
    module = importlib.import_module(produce_type.__module__)
    produce = produce_type(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name=real_clients.TOPIC,
                partition_data=(
                    module.PartitionProduceData(index=0, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    return [
        encode_request(metadata, correlation_id=7, client_id="fuzz"),
        encode_request(produce, correlation_id=8, client_id="fuzz"),
    ]


def _exchange(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        try:
            while conn.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            pass


FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(broker, data):
    _exchange(broker.port, data)


@FUZZ
@given(st.binary(min_size=0, max_size=200), st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_frames_with_random_bodies_and_sizes(broker, body, size):
    _exchange(broker.port, struct.pack(">i", size) + body)


@FUZZ
@given(st.data())
def test_mutated_real_requests(broker, data):
    frame = bytearray(data.draw(st.sampled_from(_valid_requests())))
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
    _exchange(broker.port, struct.pack(">i", len(frame)) + bytes(frame))


def test_the_broker_still_serves_real_clients_after_fuzzing(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    producer.send(real_clients.TOPIC, value=b"after the storm", partition=0).get(timeout=10)
    producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(real_clients.TOPIC, 0)
    assert consumer.end_offsets([tp])[tp] >= 1
    consumer.close()
