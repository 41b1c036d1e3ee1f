"""FileStreamSource/Sink on real files: whole lines, byte positions as offsets, resume, fsync."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException, ConnectError, TopicPartition
from odradek.connect.connectors.file import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from odradek.connect.data import STRING
from support.connector_doubles import MemoryOffsets, SourceContext, drain, sink_record


def source_task(path, offsets: MemoryOffsets, **extra: str) -> FileStreamSourceTask:
    props = {"file": str(path), "topic": "lines", **extra}
    task = FileStreamSourceTask()
    task.idle_wait_s = 0.01
    task.initialize(SourceContext(configs=props, offset_storage_reader=offsets))
    task.start(props)
    return task


def test_source_sends_whole_lines_with_byte_positions(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\r\ntwo\nthr")
    offsets = MemoryOffsets()
    task = source_task(path, offsets)
    records = drain(task, offsets)
    assert [r.value for r in records] == ["one", "two"]
    assert [r.source_offset for r in records] == [{"position": 5}, {"position": 9}]
    assert {r.source_partition["filename"] for r in records} == {str(path)}
    assert records[0].topic == "lines" and records[0].value_schema == STRING
    with path.open("ab") as f:  # the partial line is sent once its newline is written
        f.write(b"ee\n")
    assert [r.value for r in drain(task, offsets)] == ["three"]
    task.stop()
    assert task.poll() is None


def test_source_resumes_after_the_last_committed_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    offsets = MemoryOffsets()
    first = source_task(path, offsets, **{"batch.size": "4"})
    batch = first.poll()
    assert len(batch) == 4
    offsets.commit(batch[:3])  # the worker acknowledged three lines, then the task died
    first.stop()
    second = source_task(path, offsets)
    assert [r.value for r in drain(second, offsets)] == [f"line {i}" for i in range(3, 10)]
    second.stop()


def test_source_waits_for_a_missing_file(tmp_path):
    path = tmp_path / "later.txt"
    task = source_task(path, MemoryOffsets())
    assert task.poll() is None
    path.write_text("hello\n")
    assert [r.value for r in task.poll()] == ["hello"]
    task.stop()


def test_source_refuses_an_overlong_line(tmp_path, monkeypatch):
    import odradek.connect.connectors.file as file_module

    monkeypatch.setattr(file_module, "LINE_BYTES_MAX", 10)
    path = tmp_path / "in.txt"
    path.write_text("x" * 50)
    task = source_task(path, MemoryOffsets())
    with pytest.raises(ConnectError, match="longer than 10 bytes"):
        task.poll()


def test_source_connector_has_one_task_and_requires_a_file():
    connector = FileStreamSourceConnector()
    connector.start({"file": "/tmp/x", "topic": "t"})
    assert connector.task_configs(3) == [{"file": "/tmp/x", "topic": "t", "batch.size": "2000"}]
    with pytest.raises(ConfigException) as e:
        FileStreamSourceConnector().start({"topic": "t"})
    assert e.value.name == "file"
    connector.alter_offsets({}, {(("filename", "/tmp/x"),): {"position": 3}})
    with pytest.raises(ConnectError):
        connector.alter_offsets({}, {(("filename", "/tmp/x"),): {"position": -1}})


def test_sink_appends_one_line_per_value(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("existing\n")
    connector = FileStreamSinkConnector()
    connector.start({"file": str(path), "topics": "t"})
    configs = connector.task_configs(2)
    assert configs == [{"file": str(path)}] * 2
    task = FileStreamSinkTask()
    task.start(configs[0])
    values = ["text", b"bytes", None, {"a": 1}, 7]
    task.put([sink_record("t", 0, i, v) for i, v in enumerate(values)])
    task.flush({TopicPartition("t", 0): 5})
    task.stop()
    assert path.read_text() == 'existing\ntext\nbytes\nnull\n{"a":1}\n7\n'
    with pytest.raises(ConnectError, match="stopped"):
        task.put([sink_record("t", 0, 5, "late")])
