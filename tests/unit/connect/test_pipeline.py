"""A task's pipeline is built from the connector's config as Kafka builds it: connector converters
over the worker's, transforms in order with their predicates, each step through the error
handler, and a missing or unknown class named by its key."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException, SourceRecord
from odradek.connect.plugins import Plugins
from odradek.connect.runtime.errors import ErrorConfig, ErrorContext, ErrorHandler, Stage
from odradek.connect.runtime.pipeline import Pipeline
from odradek.connect.worker_config import WorkerConfig

WORKER = WorkerConfig(
    {
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "offset.storage.file.filename": "/nonexistent/offsets",
    },
    distributed=False,
)

CONFIG = {
    "transforms": "add,drop",
    "transforms.add.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.add.static.field": "src",
    "transforms.add.static.value": "x",
    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.drop.predicate": "isDrop",
    "predicates": "isDrop",
    "predicates.isDrop.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.isDrop.pattern": "drop-.*",
}


def record(topic: str, value: object) -> SourceRecord:
    return SourceRecord(topic, None, None, None, None, value)


def run(pipeline: Pipeline, r: SourceRecord, tolerance_all: bool = False):
    handler = ErrorHandler(ErrorConfig(tolerance_all=tolerance_all), [])
    return pipeline.transform(r, handler, ErrorContext(Stage.TRANSFORMATION, ""))


def test_transforms_in_order_with_predicates():
    p = Pipeline.build(CONFIG, WORKER, Plugins())
    ok, out = run(p, record("keep", {"a": 1}))
    assert ok and out.value == {"a": 1, "src": "x"}
    assert run(p, record("drop-1", {"a": 1})) == (True, None)
    assert p.value_converter.from_connect("t", None, {"a": 1}) == b'{"a":1}'
    p.close()


def test_connector_converters_win_over_the_workers():
    p = Pipeline.build(
        {"value.converter": "org.apache.kafka.connect.storage.StringConverter"},
        WORKER,
        Plugins(),
    )
    assert p.value_converter.from_connect("t", None, "plain") == b"plain"


def test_a_failing_transform_goes_through_tolerance():
    p = Pipeline.build(CONFIG, WORKER, Plugins())
    assert run(p, record("keep", "not a map"), tolerance_all=True) == (False, None)
    with pytest.raises(Exception, match="Tolerance exceeded"):
        run(p, record("keep", "not a map"))


@pytest.mark.parametrize(
    "config,key",
    [
        ({"transforms": "a"}, "transforms.a.type"),
        ({"transforms": "a", "transforms.a.type": "NoSuchTransform"}, "transforms.a.type"),
        ({"value.converter": "NoSuchConverter"}, "value.converter"),
        (
            {**CONFIG, "transforms.drop.predicate": "other"},
            "transforms.drop.predicate",
        ),
    ],
)
def test_bad_plugin_config_names_the_key(config, key):
    with pytest.raises(ConfigException) as e:
        Pipeline.build(config, WORKER, Plugins())
    assert e.value.name == key
