"""The Worker runs source and sink tasks in-process against a real 3-broker cluster: each source
record arrives once and its offset is committed after the ack, a restarted source resumes from
its offsets, a sink's group commits only what the sink flushed, bad records go to the dead letter
queue with Kafka's context headers, pause/resume, bounded stops, exactly-once source batches."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.connect.api import (
    ConfigDef,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TopicPartition,
)
from odradek.connect.herder import ConnectorTaskId, State, TargetState
from odradek.connect.plugins import Plugins
from odradek.connect.runtime.offsets import FileOffsetStore, MemoryOffsetStore
from odradek.connect.runtime.status import MemoryStatusListener
from odradek.connect.runtime.worker import Worker
from odradek.connect.storage_format import partition_key
from odradek.connect.worker_config import WorkerConfig
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.connect]

WAIT_S = 30.0
STEP_S = 0.05
PARTITION = {"source": "counter"}


# ---------------------------------------------------------------- test connectors


class CountingSource(SourceConnector):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return CountingTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class CountingTask(SourceTask):
    """Counts from its stored offset to ``count``, ``batch`` records per poll."""

    committed: dict[str, list[int]] = {}
    polled: dict[str, int] = {}

    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props["count"])
        self.batch = int(props.get("batch", "10"))
        self.block_until_stopped = props.get("ignore.stop") == "true"
        self.fail_at = int(props.get("fail.at", "-1")) % (1 << 62)
        offset = self.context.offset_storage_reader.offset(PARTITION)
        self.next = offset["n"] if offset else 0
        self.stopped = threading.Event()
        self.name = props["name"]

    def poll(self) -> list[SourceRecord] | None:
        if self.block_until_stopped:
            RELEASE.wait(WAIT_S)  # ignores stop(): the worker must give up on it
            return None
        if self.next >= self.fail_at:
            raise RuntimeError(f"broken at {self.next}")
        if self.next >= self.count:
            self.stopped.wait(0.1)
            return None
        end = min(self.next + self.batch, self.count)
        records = [
            SourceRecord(
                topic=self.topic,
                partition=None,
                key_schema=None,
                key=None,
                value_schema=None,
                value=str(n),
                headers=(("n", str(n)),),
                source_partition=PARTITION,
                source_offset={"n": n + 1},
            )
            for n in range(self.next, end)
        ]
        self.next = end
        CountingTask.polled[self.name] = end
        return records

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        CountingTask.committed.setdefault(self.name, []).append(int(record.value))

    def stop(self) -> None:
        self.stopped.set()


RELEASE = threading.Event()


class CollectingSink(SinkConnector):
    def config(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return CollectingTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.volatile: list[SinkRecord] = []
        self.durable: list[SinkRecord] = []
        self.opened: list[TopicPartition] = []
        self.retried = 0


STORES: dict[str, Store] = {}


class CollectingTask(SinkTask):
    """Keeps what ``put`` gives it in memory; ``flush`` makes it durable. ``report.value``: a
    value reported to the errant record reporter; ``retry.once``: the first non-empty put
    raises RetriableError."""

    def start(self, props: Mapping[str, str]) -> None:
        self.store = STORES.setdefault(props["name"], Store())
        self.report_value = props.get("report.value")
        self.retry_once = props.get("retry.once") == "true"
        self.rewind_to = props.get("rewind.to")

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        self.store.opened += partitions
        if self.rewind_to is not None:  # a sink that keeps its own offsets starts there
            for tp in partitions:
                self.context.offset(tp, int(self.rewind_to))

    def put(self, records: Sequence[SinkRecord]) -> None:
        if records and self.retry_once and not self.store.retried:
            self.store.retried += 1
            self.context.timeout(50)
            raise RetriableError("not yet")
        with self.store.lock:
            for r in records:
                if self.report_value is not None and r.value == self.report_value:
                    self.context.errant_record_reporter.report(r, ValueError("refused by sink"))
                else:
                    self.store.volatile.append(r)

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        with self.store.lock:
            self.store.durable += self.store.volatile
            self.store.volatile.clear()

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def bootstrap(connect_cluster: Any) -> str:
    return connect_cluster.bootstrap_servers


def create_topics(bootstrap: str, *topics: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 3) for t in topics])
    for f in futures.values():
        f.result(WAIT_S)


def worker_config(bootstrap: str, tmp_path: Any, **extra: str) -> WorkerConfig:
    return WorkerConfig(
        {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": str(tmp_path / "offsets.json"),
            "offset.flush.interval.ms": "200",
            "task.shutdown.graceful.timeout.ms": "3000",
            "consumer.session.timeout.ms": "6000",
            **extra,
        },
        distributed=False,
    )


def make_worker(config: WorkerConfig, store: Any = None) -> tuple[Worker, MemoryStatusListener]:
    status = MemoryStatusListener()
    store = store or FileOffsetStore(config.offset_storage_file)
    return Worker(config, Plugins(), store, status, worker_id="127.0.0.1:8083"), status


def run(worker: Worker, name: str, config: dict[str, str]) -> list[ConnectorTaskId]:
    config = {"name": name, "tasks.max": "1", **config}
    worker.start_connector(name, config, TargetState.STARTED, lambda: None)
    ids = []
    for i, task_config in enumerate(worker.connector_task_configs(name, 1)):
        task_id = ConnectorTaskId(name, i)
        worker.start_task(task_id, config, task_config, TargetState.STARTED)
        ids.append(task_id)
    return ids


def read_all(bootstrap: str, topic: str, count: int, *, committed: bool = False) -> list[Any]:
    """Every message of ``topic``, once at least ``count`` are there (read_committed if
    asked), to the end: until a read finds nothing more."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    try:
        partitions = wait_until(
            lambda: consumer.list_topics(topic, timeout=WAIT_S).topics[topic].partitions,
            f"{topic} in the metadata",
            WAIT_S,
            poll_s=STEP_S,
        )
        consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(messages) < count and time.monotonic() < deadline:
            messages += [m for m in consumer.consume(100, 0.2) if m.error() is None]
        while time.monotonic() < deadline:  # then to the end: duplicates would show here
            more = [m for m in consumer.consume(500, 0.5) if m.error() is None]
            if not more:
                break
            messages += more
        return messages
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, values: Sequence[bytes], partitions: int = 2) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        producer.produce(topic, value=v, key=str(i).encode(), partition=i % partitions)
    assert producer.flush(WAIT_S) == 0


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int = 2) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed(
            [CKTopicPartition(topic, p) for p in range(partitions)], timeout=WAIT_S
        )
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


# ---------------------------------------------------------------- tests


def test_source_records_arrive_once_and_a_restart_resumes_from_the_offsets(
    bootstrap, tmp_path, unique
):
    topic, name = unique("t"), unique("src")
    create_topics(bootstrap, topic)
    config = worker_config(bootstrap, tmp_path)
    worker, status = make_worker(config)
    connector = {
        "connector.class": f"{__name__}:CountingSource",
        "topic": topic,
        "count": "50",
    }
    [task_id] = run(worker, name, connector)
    store = worker.offset_store
    wait_until(
        lambda: store.get(name, [PARTITION]).get(partition_key(PARTITION)) == {"n": 50},
        "offset 50 stored",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert sorted(CountingTask.committed[name]) == list(range(50))
    assert status.get_task(task_id).state is State.RUNNING
    worker.close()
    assert status.get_task(task_id).state is State.UNASSIGNED
    assert status.get_connector(name).state is State.UNASSIGNED

    # A new worker on the same offsets file carries on from 50.
    worker, status = make_worker(config)
    run(worker, name, {**connector, "count": "80"})
    wait_until(
        lambda: (
            worker.offset_store.get(name, [PARTITION]).get(partition_key(PARTITION)) == {"n": 80}
        ),
        "offset 80 stored",
        WAIT_S,
        poll_s=STEP_S,
    )
    worker.close()
    messages = read_all(bootstrap, topic, 80)
    values = sorted(int(m.value()) for m in messages)
    assert values == list(range(80))  # each once: nothing lost, nothing repeated
    assert all(m.headers() == [("n", m.value())] for m in messages)


def test_a_record_for_a_missing_topic_auto_creates_it_as_kafka_connect_does(
    bootstrap, tmp_path, unique
):
    # The brokers auto-create topics (Kafka's default): the task's producer asks for the topic,
    # and the records arrive, as with Kafka Connect.
    topic, name = unique("auto"), unique("src")
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    [task_id] = run(
        worker,
        name,
        {"connector.class": f"{__name__}:CountingSource", "topic": topic, "count": "5"},
    )
    values = sorted(int(m.value()) for m in read_all(bootstrap, topic, 5))
    assert values == list(range(5))
    assert status.get_task(task_id).state is State.RUNNING
    worker.close()


def test_a_record_for_a_topic_that_cannot_exist_fails_the_task_clearly(bootstrap, tmp_path, unique):
    name = unique("src")
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    [task_id] = run(
        worker,
        name,
        {"connector.class": f"{__name__}:CountingSource", "topic": "no such topic!", "count": "5"},
    )
    entry = wait_until(
        lambda: (e := status.get_task(task_id)) and e.state is State.FAILED and e,
        "task FAILED",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert "'no such topic!' does not exist and was not created" in entry.trace
    assert "Invalid topic" in entry.trace
    assert worker.offset_store.all(name) == []
    worker.close()


def test_a_failing_source_keeps_the_offsets_of_what_was_acknowledged(bootstrap, tmp_path, unique):
    topic, name = unique("t"), unique("src")
    create_topics(bootstrap, topic)
    worker, status = make_worker(
        worker_config(bootstrap, tmp_path, **{"offset.flush.interval.ms": "600000"})
    )
    [task_id] = run(
        worker,
        name,
        {
            "connector.class": f"{__name__}:CountingSource",
            "topic": topic,
            "count": "100",
            "fail.at": "20",
        },
    )
    entry = wait_until(
        lambda: (e := status.get_task(task_id)) and e.state is State.FAILED and e,
        "task FAILED",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert "broken at 20" in entry.trace
    assert worker.offset_store.get(name, [PARTITION]) == {partition_key(PARTITION): {"n": 20}}
    worker.close()


def test_pause_and_resume_a_source(bootstrap, tmp_path, unique):
    topic, name = unique("t"), unique("src")
    create_topics(bootstrap, topic)
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    [task_id] = run(
        worker,
        name,
        {
            "connector.class": f"{__name__}:CountingSource",
            "topic": topic,
            "count": "1000000",
            "batch": "1",
        },
    )
    wait_until(
        lambda: len(CountingTask.committed.get(name, [])) > 5, "some records", WAIT_S, poll_s=STEP_S
    )
    worker.set_target_state(name, TargetState.PAUSED)
    wait_until(
        lambda: status.get_task(task_id).state is State.PAUSED, "task PAUSED", WAIT_S, poll_s=STEP_S
    )
    assert status.get_connector(name).state is State.PAUSED
    wait_until(  # acknowledgements of records sent before the pause come in
        lambda: len(CountingTask.committed[name]) == CountingTask.polled[name],
        "every polled record acknowledged",
        WAIT_S,
        poll_s=STEP_S,
    )
    paused_at = len(CountingTask.committed[name])
    time.sleep(0.3)  # a paused task polls nothing: the count stays where it was
    assert len(CountingTask.committed[name]) == paused_at
    worker.set_target_state(name, TargetState.STARTED)
    wait_until(
        lambda: len(CountingTask.committed[name]) > paused_at + 5,
        "more records",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert status.get_task(task_id).state is State.RUNNING
    started = time.monotonic()
    worker.close()
    assert time.monotonic() - started < 3.0


def test_a_task_that_ignores_stop_is_abandoned_after_the_graceful_timeout(
    bootstrap, tmp_path, unique
):
    topic, name = unique("t"), unique("src")
    create_topics(bootstrap, topic)
    worker, _ = make_worker(
        worker_config(bootstrap, tmp_path, **{"task.shutdown.graceful.timeout.ms": "500"})
    )
    RELEASE.clear()
    [task_id] = run(
        worker,
        name,
        {
            "connector.class": f"{__name__}:CountingSource",
            "topic": topic,
            "count": "1",
            "ignore.stop": "true",
        },
    )
    runner = worker.task_runner(task_id)
    wait_until(lambda: runner.state is State.RUNNING, "task polling", WAIT_S, poll_s=STEP_S)
    started = time.monotonic()
    worker.stop_tasks([task_id])
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 2.0
    assert runner.cancelled and task_id not in worker.tasks
    RELEASE.set()
    assert runner.join(WAIT_S)
    worker.close()


def test_sink_commits_only_what_it_flushed(bootstrap, tmp_path, unique):
    topic, name = unique("t"), unique("sink")
    create_topics(bootstrap, topic)
    produce(bootstrap, topic, [str(i).encode() for i in range(30)])
    connector = {"connector.class": f"{__name__}:CollectingSink", "topics": topic}
    # A first task that never flushes, killed after it has every record in memory.
    worker, _ = make_worker(
        worker_config(bootstrap, tmp_path, **{"offset.flush.interval.ms": "600000"})
    )
    store = STORES[name] = Store()
    [task_id] = run(worker, name, connector)
    wait_until(lambda: len(store.volatile) == 30, "30 records put", WAIT_S, poll_s=STEP_S)
    runner = worker.task_runner(task_id)
    runner.cancel()  # a crash: no commit on the way out
    worker.close()
    assert store.durable == []
    assert group_offsets(bootstrap, f"connect-{name}", topic) == [-1001, -1001]
    store.volatile.clear()

    # The next task gets them all again, retries a put once, flushes and commits.
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    [task_id] = run(worker, name, {**connector, "retry.once": "true"})
    wait_until(lambda: len(store.durable) == 30, "30 records durable", WAIT_S, poll_s=STEP_S)
    wait_until(
        lambda: group_offsets(bootstrap, f"connect-{name}", topic) == [15, 15],
        "offsets committed",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert store.retried == 1
    assert sorted(int(r.value) for r in store.durable) == list(range(30))
    assert {(r.topic, r.partition) for r in store.durable} == {(topic, 0), (topic, 1)}

    # Paused, the sink gets nothing new; resumed, it gets what arrived meanwhile.
    worker.set_target_state(name, TargetState.PAUSED)
    wait_until(
        lambda: status.get_task(task_id).state is State.PAUSED, "task PAUSED", WAIT_S, poll_s=STEP_S
    )
    produce(bootstrap, topic, [b"30", b"31"])
    time.sleep(0.5)
    assert len(store.durable) + len(store.volatile) == 30
    worker.set_target_state(name, TargetState.STARTED)
    wait_until(lambda: len(store.durable) == 32, "32 records durable", WAIT_S, poll_s=STEP_S)
    worker.close()


def test_bad_records_go_to_the_dead_letter_queue_with_context_headers(bootstrap, tmp_path, unique):
    topic, dlq, name = unique("t"), unique("dlq"), unique("sink")
    create_topics(bootstrap, topic, partitions=1)
    values = [b'{"n":0}', b"not json", b'{"n":2}', b'{"n":3}', b"{broken"]
    produce(bootstrap, topic, values, partitions=1)
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    [task_id] = run(
        worker,
        name,
        {
            "connector.class": f"{__name__}:CollectingSink",
            "topics": topic,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.log.enable": "true",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "3",
            "errors.deadletterqueue.context.headers.enable": "true",
            "report.value": "__never__",
        },
    )
    store = wait_until(lambda: STORES.get(name), "sink store", WAIT_S, poll_s=STEP_S)
    wait_until(lambda: len(store.durable) == 3, "3 records durable", WAIT_S, poll_s=STEP_S)
    assert [r.value for r in store.durable] == [{"n": 0}, {"n": 2}, {"n": 3}]
    messages = read_all(bootstrap, dlq, 2)
    assert [m.value() for m in messages] == [b"not json", b"{broken"]
    assert [m.key() for m in messages] == [b"1", b"4"]
    headers = dict(messages[0].headers())
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"1"
    assert headers["__connect.errors.connector.name"] == name.encode()
    assert headers["__connect.errors.task.id"] == b"0"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert b"JsonConverter" in headers["__connect.errors.class.name"]
    assert headers["__connect.errors.exception.message"]
    wait_until(
        lambda: group_offsets(bootstrap, f"connect-{name}", topic, 1) == [5],
        "offsets committed",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert status.get_task(task_id).state is State.RUNNING
    worker.close()


def test_errant_record_reporter_sends_to_the_dlq_or_fails_the_task(bootstrap, tmp_path, unique):
    topic, dlq = unique("t"), unique("dlq")
    create_topics(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, [b"a", b"b", b"c"], partitions=1)
    worker, status = make_worker(worker_config(bootstrap, tmp_path))
    tolerant, strict = unique("tolerant"), unique("strict")
    base = {"connector.class": f"{__name__}:CollectingSink", "topics": topic, "report.value": "b"}
    run(
        worker,
        tolerant,
        {
            **base,
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "3",
            "errors.deadletterqueue.context.headers.enable": "true",
            "rewind.to": "1",
        },
    )
    [strict_id] = run(  # the same topic, through topics.regex
        worker, strict, {**base, "topics": "", "topics.regex": re.escape(topic)}
    )
    [m] = read_all(bootstrap, dlq, 1)
    assert m.value() == b"b"
    assert dict(m.headers())["__connect.errors.stage"] == b"TASK_PUT"
    # "a" was skipped by the rewind in open(), "b" went to the DLQ
    wait_until(
        lambda: [r.value for r in STORES[tolerant].durable] == ["c"],
        "c durable",
        WAIT_S,
        poll_s=STEP_S,
    )
    entry = wait_until(
        lambda: (e := status.get_task(strict_id)) and e.state is State.FAILED and e,
        "strict task FAILED",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert "Tolerance exceeded" in entry.trace
    worker.close()


def test_exactly_once_source_commits_records_and_offsets_in_one_transaction(
    bootstrap, tmp_path, unique
):
    topic, offsets_topic, name = unique("t"), unique("offsets"), unique("src")
    create_topics(bootstrap, topic, offsets_topic)
    config = WorkerConfig(
        {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "group.id": unique("connect"),
            "config.storage.topic": unique("configs"),
            "offset.storage.topic": offsets_topic,
            "status.storage.topic": unique("status"),
            "exactly.once.source.support": "enabled",
        },
        distributed=True,
    )
    worker, _ = make_worker(config, MemoryOffsetStore())
    run(
        worker,
        name,
        {"connector.class": f"{__name__}:CountingSource", "topic": topic, "count": "30"},
    )
    wait_until(
        lambda: len(CountingTask.committed.get(name, [])) == 30,
        "30 records committed",
        WAIT_S,
        poll_s=STEP_S,
    )
    worker.close()
    records = read_all(bootstrap, topic, 30, committed=True)
    assert sorted(int(m.value()) for m in records) == list(range(30))
    offsets = read_all(bootstrap, offsets_topic, 3, committed=True)
    assert [json.loads(m.key()) for m in offsets] == [[name, PARTITION]] * 3
    assert [json.loads(m.value()) for m in offsets] == [{"n": 10}, {"n": 20}, {"n": 30}]


def test_a_newer_producer_fences_an_exactly_once_task_and_records_match_offsets(
    bootstrap, tmp_path, unique
):
    topic, offsets_topic, name, group = unique("t"), unique("offsets"), unique("src"), unique("g")
    create_topics(bootstrap, topic, offsets_topic)
    config = WorkerConfig(
        {
            "bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "group.id": group,
            "config.storage.topic": unique("configs"),
            "offset.storage.topic": offsets_topic,
            "status.storage.topic": unique("status"),
            "exactly.once.source.support": "enabled",
        },
        distributed=True,
    )
    worker, status = make_worker(config, MemoryOffsetStore())
    [task_id] = run(
        worker,
        name,
        {"connector.class": f"{__name__}:CountingSource", "topic": topic, "count": "100000"},
    )
    wait_until(
        lambda: len(CountingTask.committed.get(name, [])) >= 20,
        "some transactions",
        WAIT_S,
        poll_s=STEP_S,
    )
    zombie_killer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{group}-{name}-0"}
    )
    zombie_killer.init_transactions(WAIT_S)  # the task's producer is fenced from now on
    entry = wait_until(
        lambda: (e := status.get_task(task_id)) and e.state is State.FAILED and e,
        "fenced task FAILED",
        WAIT_S,
        poll_s=STEP_S,
    )
    assert "fenced" in entry.trace.lower() or "fatal" in entry.trace.lower()
    worker.close()
    committed_offsets = read_all(bootstrap, offsets_topic, 1, committed=True)
    last = json.loads(committed_offsets[-1].value())["n"]
    records = read_all(bootstrap, topic, last, committed=True)
    # What is visible is exactly what the visible offsets cover: nothing more, nothing less.
    assert sorted(int(m.value()) for m in records) == list(range(last))
