"""ClusterModel.topics keeps its topic-id index in step with every write (controller.model)."""

from __future__ import annotations

import base64
import uuid

from odradek.controller.model import ClusterModel, TopicTable, topic_uuid
from odradek.zk.paths import TopicAssignment


def topic_id(n: int) -> str:
    return base64.urlsafe_b64encode(uuid.UUID(int=n).bytes).decode().rstrip("=")


def assignment(n: int | None) -> TopicAssignment:
    return TopicAssignment({0: (1, 2)}, None if n is None else topic_id(n))


def test_every_write_keeps_the_id_index():
    topics = TopicTable({"a": assignment(1)})
    topics["b"] = assignment(2)
    topics.update({"c": assignment(3)})
    topics.setdefault("d", assignment(4))
    topics["e"] = assignment(None)  # a version-2 znode: no id
    assert topics.by_id == {uuid.UUID(int=n): name for n, name in enumerate("abcd", 1)}

    topics["a"] = assignment(11)  # deleted and created again: a new id
    topics.pop("b")
    del topics["c"]
    assert topics.pop("gone", None) is None
    assert topics.by_id == {uuid.UUID(int=11): "a", uuid.UUID(int=4): "d"}

    topics.clear()
    assert topics.by_id == {} and dict(topics) == {}


def test_a_model_built_from_a_plain_dict_indexes_it():
    model = ClusterModel(1, 0, topics={"t": assignment(7)})
    assert isinstance(model.topics, TopicTable)
    assert model.topic_id_names() == {uuid.UUID(int=7): "t"}
    assert topic_uuid(topic_id(7)) == uuid.UUID(int=7)
    assert topic_uuid(None) == uuid.UUID(int=0)
