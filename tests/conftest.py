"""Shared fixtures: record batches built by a Kafka client library we did not write, a disk
that fails on demand (``disk``), and ``unique`` names for the tiers that share a cluster."""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from odradek.config.topic import TopicConfig
from odradek.storage.log import Log
from support.faulty_disk import FaultyFileOps
from support.kafka_batches import kafka_python_batch

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

KeyValue = tuple[bytes | None, bytes | None]


def build_batch(
    records: Sequence[KeyValue],
    *,
    codec: int = 0,
    timestamp_ms: int | Sequence[int] | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One magic-2 batch from kafka-python's ``DefaultRecordBatchBuilder``, offsets 0..n-1."""
    now = int(time.time() * 1000)

    def timestamp(i: int) -> int:
        if isinstance(timestamp_ms, Sequence):
            return timestamp_ms[i]
        return now if timestamp_ms is None else timestamp_ms

    return bytes(
        kafka_python_batch(
            ((i, timestamp(i), key, value, headers) for i, (key, value) in enumerate(records)),
            codec=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


@pytest.fixture
def kafka_batch() -> Callable[..., bytes]:
    """``kafka_batch([(key, value), ...], codec=3, timestamp_ms=...)`` -> batch bytes."""
    return build_batch


@pytest.fixture
def disk() -> FaultyFileOps:
    """Storage's file operations over the real disk, failing, recorded or held on demand: pass
    it as ``file_ops`` (``make_log(file_ops=disk)``, ``LogManager(..., file_ops=disk)``)."""
    return FaultyFileOps()


@pytest.fixture
def make_log(tmp_path: Path) -> Callable[..., Log]:
    """``make_log(**topic_config_attrs)`` opens a Log in a fresh partition directory
    (``clock=`` and ``file_ops=`` go to the Log)."""
    opened: list[Log] = []

    def make(
        name: str = "topic-0",
        clock: Callable[[], int] | None = None,
        file_ops: FaultyFileOps | None = None,
        **config,
    ) -> Log:
        kwargs: dict[str, object] = {} if clock is None else {"clock": clock}
        if file_ops is not None:
            kwargs["file_ops"] = file_ops
        log = Log(tmp_path / name, TopicConfig(**config), **kwargs)
        opened.append(log)
        return log

    yield make
    for log in opened:
        with contextlib.suppress(Exception):  # already closed or deleted by the test
            log.close()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique("topic")`` -> a name no other test uses (topics, connectors, groups): the tiers
    that share one cluster between tests keep their data apart this way."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", request.node.name)[:60]

    def make(what: str) -> str:
        return f"{base}-{what}-{uuid.uuid4().hex[:6]}"

    return make
