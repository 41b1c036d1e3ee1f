"""Source offsets: the file store survives a reopen and never leaves a half-written file, and a
partition's offset is committable only once every earlier record of it is acknowledged."""

from __future__ import annotations

import json
import os

import pytest

from odradek.connect.runtime.offsets import (
    FileOffsetStore,
    OffsetStoreError,
    StoreOffsetReader,
    SubmittedOffsets,
)
from odradek.connect.storage_format import partition_key


def test_file_store_round_trip_and_reset(tmp_path):
    path = tmp_path / "offsets.json"
    store = FileOffsetStore(str(path))
    store.put("c", [({"file": "/a"}, {"position": 3}), ({"file": "/b"}, {"position": 9})])
    store.put("other", [({"file": "/a"}, {"position": 1})])
    reopened = FileOffsetStore(str(path))
    assert reopened.get("c", [{"file": "/a"}, {"file": "/zz"}]) == {
        partition_key({"file": "/a"}): {"position": 3}
    }
    assert sorted(p["file"] for p, _ in reopened.all("c")) == ["/a", "/b"]
    reopened.put("c", [({"file": "/a"}, None)])
    assert FileOffsetStore(str(path)).all("c") == [({"file": "/b"}, {"position": 9})]
    body = json.loads(path.read_text())
    assert ['["c",{"file":"/b"}]', '{"position":9}'] in body["offsets"]
    assert [f for f in os.listdir(tmp_path) if f.startswith(".offsets-")] == []


def test_file_store_keeps_old_content_when_a_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "offsets.json"
    store = FileOffsetStore(str(path))
    store.put("c", [({"p": 1}, {"o": 1})])

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        store.put("c", [({"p": 1}, {"o": 2})])
    monkeypatch.undo()
    assert store.get("c", [{"p": 1}]) == {partition_key({"p": 1}): {"o": 1}}
    assert FileOffsetStore(str(path)).get("c", [{"p": 1}]) == {partition_key({"p": 1}): {"o": 1}}
    assert [f for f in os.listdir(tmp_path) if f.startswith(".offsets-")] == []


def test_file_store_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "offsets.json"
    path.write_text("not json")
    with pytest.raises(OffsetStoreError):
        FileOffsetStore(str(path))


def test_reader_reads_the_connectors_offsets(tmp_path):
    store = FileOffsetStore(str(tmp_path / "o"))
    store.put("c", [({"b": 1, "a": 2}, {"o": 5})])
    reader = StoreOffsetReader(store, "c")
    assert reader.offset({"a": 2, "b": 1}) == {"o": 5}
    assert reader.offset({"a": 3}) is None
    assert StoreOffsetReader(store, "d").offset({"a": 2, "b": 1}) is None


def test_submitted_offsets_commit_only_an_acknowledged_prefix():
    s = SubmittedOffsets()
    a1 = s.submit({"p": "a"}, {"o": 1})
    a2 = s.submit({"p": "a"}, {"o": 2})
    b1 = s.submit({"p": "b"}, {"o": 1})
    a3 = s.submit({"p": "a"}, {"o": 3})
    s.ack(a2)
    s.ack(b1)
    assert s.committable() == [({"p": "b"}, {"o": 1})]  # a2 waits for a1
    s.ack(a1)
    assert s.committable() == [({"p": "a"}, {"o": 2})]
    assert s.in_flight == 1
    s.ack(a3)
    assert s.committable() == [({"p": "a"}, {"o": 3})]
    assert s.committable() == [] and s.in_flight == 0
