"""Distributed mode's stores on a real cluster: configs, task commits, target states, statuses
and source offsets survive a restart (a new store replays its topic); task configs count only
when committed; a non-compacted internal topic is refused; offsets written in an aborted
transaction are never seen (read_committed)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.connect import storage_format as sf
from odradek.connect.distributed.kafka_log import KafkaLogError
from odradek.connect.distributed.stores import ConfigStore, StatusStore, TopicOffsetStore
from odradek.connect.herder import ConnectorTaskId, State, StatusEntry, TargetState
from odradek.connect.worker_config import WorkerConfig
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.connect]


def worker_config(bootstrap: str, prefix: str) -> WorkerConfig:
    return WorkerConfig(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{prefix}-group",
            "config.storage.topic": f"{prefix}-configs",
            "offset.storage.topic": f"{prefix}-offsets",
            "status.storage.topic": f"{prefix}-status",
            "offset.storage.partitions": "3",
            "status.storage.partitions": "2",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        },
        distributed=True,
    )


def test_stores_replay_after_a_restart(connect_cluster, unique):
    config = worker_config(connect_cluster.bootstrap_servers, unique("w"))
    configs, statuses = ConfigStore(config), StatusStore(config, "w1:8083")
    offsets = TopicOffsetStore(config)
    for store in (configs, statuses, offsets):
        store.start()
    try:
        configs.put_connector_config("a-b", {"name": "a-b", "tasks.max": "2"}, TargetState.PAUSED)
        configs.put_task_configs("a-b", [{"t": "0"}, {"t": "1"}])
        # An uncommitted task config (a leader that died mid-write) is not seen.
        configs.log.send([(sf.task_config_key("a-b", 0), sf.properties_value({"t": "new"}))], 10)
        configs.put_connector_config("gone", {"name": "gone"})
        configs.remove_connector_config("gone")
        statuses.generation = 3
        statuses.connector("a-b", StatusEntry(State.RUNNING, "ignored"))
        statuses.task(ConnectorTaskId("a-b", 1), StatusEntry(State.FAILED, "x", trace="boom"))
        offsets.put("a-b", [({"file": "/x"}, {"position": 7}), ({"file": "/y"}, {"position": 1})])
        offsets.put("a-b", [({"file": "/y"}, None)])
        first = configs.read_to_end()
    finally:
        for store in (configs, statuses, offsets):
            store.stop()

    again = ConfigStore(config)
    statuses2, offsets2 = StatusStore(config, "w2:8083"), TopicOffsetStore(config)
    for store in (again, statuses2, offsets2):
        store.start()
    try:
        snapshot = again.snapshot()
        assert snapshot == first
        assert snapshot.connectors == {"a-b": {"name": "a-b", "tasks.max": "2"}}
        assert snapshot.target_state("a-b") is TargetState.PAUSED
        assert snapshot.tasks["a-b"] == ({"t": "0"}, {"t": "1"})
        assert snapshot.task_ids() == [ConnectorTaskId("a-b", 0), ConnectorTaskId("a-b", 1)]
        assert snapshot.offset > 0
        statuses2.read_to_end()
        assert statuses2.get_connector("a-b") == StatusEntry(State.RUNNING, "w1:8083", None, 3)
        task = statuses2.get_task(ConnectorTaskId("a-b", 1))
        assert (task.state, task.trace, task.worker_id) == (State.FAILED, "boom", "w1:8083")
        assert offsets2.all("a-b") == [({"file": "/x"}, {"position": 7})]
        assert offsets2.get("a-b", [{"file": "/x"}, {"file": "/y"}]) == {
            sf.partition_key({"file": "/x"}): {"position": 7}
        }
    finally:
        for store in (again, statuses2, offsets2):
            store.stop()


def test_offsets_of_an_aborted_transaction_are_not_read(connect_cluster, unique):
    config = worker_config(connect_cluster.bootstrap_servers, unique("w"))
    offsets = TopicOffsetStore(config)
    offsets.start()
    try:
        producer = Producer(
            {
                "bootstrap.servers": connect_cluster.bootstrap_servers,
                "transactional.id": unique("tx"),
            }
        )
        producer.init_transactions(30)
        key = sf.offset_key("c", {"f": 1})
        for commit, position in ((True, 2), (False, 1)):  # an aborted write after a committed one
            producer.begin_transaction()
            value = sf.offset_value({"p": position})
            producer.produce(offsets.topic, key=key, value=value, partition=0)
            producer.commit_transaction(30) if commit else producer.abort_transaction(30)
        # A plain write after both, to the same partition: once it is read, so were the
        # transactions' markers (the last stable offset passed them): "c" is final then.
        plain = Producer({"bootstrap.servers": connect_cluster.bootstrap_servers})
        d_key = sf.offset_key("d", {"f": 1})
        plain.produce(offsets.topic, key=d_key, value=b'{"p":0}', partition=0)
        assert plain.flush(30) == 0
        wait_until(
            lambda: offsets.all("d") == [({"f": 1}, {"p": 0})] and offsets.all("c"),
            "the writes read back",
            30,
            poll_s=0.1,
        )
        assert offsets.all("c") == [({"f": 1}, {"p": 2})]
    finally:
        offsets.stop()


def test_a_non_compacted_internal_topic_is_refused(connect_cluster, unique):
    config = worker_config(connect_cluster.bootstrap_servers, unique("w"))
    admin = AdminClient({"bootstrap.servers": connect_cluster.bootstrap_servers})
    topic = config.get("config.storage.topic")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with pytest.raises(KafkaLogError, match="cleanup.policy=delete"):
        ConfigStore(config).log.ensure_topic()
