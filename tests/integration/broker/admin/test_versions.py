"""Every served version of the eight admin APIs is answered, and the answer decodes.

Requests are built from kio's schema of each version and sent over a socket; the responses are
read with the protocol layer's client half, so a field a version lacks or adds cannot break the
handler's encoding unnoticed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from odradek.broker.handlers.build import build, element_type
from odradek.protocol import schemas
from odradek.protocol.apis import SUPPORTED_VERSIONS, ApiKey

pytestmark = pytest.mark.integration

TIMEOUT = timedelta(seconds=10)


def versions(api_key: ApiKey) -> range:
    lowest, highest = SUPPORTED_VERSIONS[api_key]
    return range(lowest, highest + 1)


def request(api_key: ApiKey, version: int, **values: Any) -> Any:
    return build(schemas.request_schema(api_key, version), **values)


def nested(api_key: ApiKey, version: int, *path: str) -> type[Any]:
    cls = schemas.request_schema(api_key, version)
    for name in path:
        cls = element_type(cls, name)
    return cls


def create_topics(version: int, name: str) -> Any:
    topic = nested(ApiKey.CREATE_TOPICS, version, "topics")
    config = nested(ApiKey.CREATE_TOPICS, version, "topics", "configs")
    return request(
        ApiKey.CREATE_TOPICS,
        version,
        topics=(
            build(
                topic,
                name=name,
                num_partitions=2,
                replication_factor=1,
                assignments=(),
                configs=(build(config, name="retention.ms", value="1000"),),
            ),
        ),
        timeout=timedelta(0),  # answer once written: no controller gives it leaders here
        validate_only=False,
    )


@pytest.fixture
def client(make_broker, raw_client):
    broker = make_broker(1)
    broker.host_partitions("hosted", 1)
    return raw_client(broker.bootstrap)


def test_every_version_of_every_admin_api(client, zk):
    for version in versions(ApiKey.CREATE_TOPICS):
        [topic] = client.send(create_topics(version, f"v{version}")).topics
        assert (topic.name, topic.error_code.value) == (f"v{version}", 0)
        if version >= 5:
            assert (topic.num_partitions, topic.replication_factor) == (2, 1)
            assert {c.name: c.value for c in topic.configs}["retention.ms"] == "1000"
        if version >= 7:
            assert topic.topic_id is not None and topic.topic_id.int != 0
    assert zk.kids("/brokers/topics") == [f"v{v}" for v in versions(ApiKey.CREATE_TOPICS)]

    for version in versions(ApiKey.CREATE_PARTITIONS):
        topic = nested(ApiKey.CREATE_PARTITIONS, version, "topics")
        [result] = client.send(
            request(
                ApiKey.CREATE_PARTITIONS,
                version,
                topics=(build(topic, name="v2", count=3 + version, assignments=None),),
                timeout=TIMEOUT,
                validate_only=False,
            )
        ).results
        assert (result.name, result.error_code.value) == ("v2", 0)
    assert (
        len(zk.json("/brokers/topics/v2")["partitions"])
        == 3 + versions(ApiKey.CREATE_PARTITIONS).stop - 1
    )

    for version in versions(ApiKey.DESCRIBE_CONFIGS):
        resource = nested(ApiKey.DESCRIBE_CONFIGS, version, "resources")
        [result] = client.send(
            request(
                ApiKey.DESCRIBE_CONFIGS,
                version,
                resources=(
                    build(
                        resource,
                        resource_type=2,
                        resource_name="v2",
                        configuration_keys=("retention.ms",),
                    ),
                ),
                include_synonyms=True,
                include_documentation=True,
            )
        ).results
        assert result.error_code.value == 0
        [config] = result.configs
        assert (config.name, config.value, config.config_source) == ("retention.ms", "1000", 1)
        if version >= 3:
            assert config.config_type == 5 and config.documentation

    for version in versions(ApiKey.ALTER_CONFIGS):
        resource = nested(ApiKey.ALTER_CONFIGS, version, "resources")
        entry = nested(ApiKey.ALTER_CONFIGS, version, "resources", "configs")
        [result] = client.send(
            request(
                ApiKey.ALTER_CONFIGS,
                version,
                resources=(
                    build(
                        resource,
                        resource_type=2,
                        resource_name="v2",
                        configs=(build(entry, name="segment.ms", value=str(1000 + version)),),
                    ),
                ),
                validate_only=False,
            )
        ).responses
        assert (result.resource_name, result.error_code.value) == ("v2", 0)
        assert zk.json("/config/topics/v2")["config"] == {"segment.ms": str(1000 + version)}

    for version in versions(ApiKey.INCREMENTAL_ALTER_CONFIGS):
        resource = nested(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, "resources")
        entry = nested(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, "resources", "configs")
        [result] = client.send(
            request(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                version,
                resources=(
                    build(
                        resource,
                        resource_type=2,
                        resource_name="v2",
                        configs=(
                            build(entry, name="flush.ms", config_operation=0, value=str(version)),
                        ),
                    ),
                ),
                validate_only=False,
            )
        ).responses
        assert result.error_code.value == 0
        assert zk.json("/config/topics/v2")["config"]["flush.ms"] == str(version)

    for version in versions(ApiKey.DELETE_RECORDS):
        topic = nested(ApiKey.DELETE_RECORDS, version, "topics")
        partition = nested(ApiKey.DELETE_RECORDS, version, "topics", "partitions")
        [topic_result] = client.send(
            request(
                ApiKey.DELETE_RECORDS,
                version,
                topics=(
                    build(
                        topic,
                        name="hosted",
                        partitions=(build(partition, partition_index=0, offset=-1),),
                    ),
                ),
                timeout=TIMEOUT,
            )
        ).topics
        [result] = topic_result.partitions
        assert (result.error_code.value, result.low_watermark) == (0, 0)

    seen = set()
    for version in versions(ApiKey.INIT_PRODUCER_ID):
        response = client.send(
            request(
                ApiKey.INIT_PRODUCER_ID,
                version,
                transactional_id=None,
                transaction_timeout=TIMEOUT,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        assert (response.error_code.value, response.producer_epoch) == (0, 0)
        seen.add(response.producer_id)
    assert len(seen) == len(versions(ApiKey.INIT_PRODUCER_ID))

    for version in versions(ApiKey.DELETE_TOPICS):
        name = f"v{version + 1}"
        if version >= 6:
            state = nested(ApiKey.DELETE_TOPICS, version, "topics")
            body = request(
                ApiKey.DELETE_TOPICS,
                version,
                topics=(build(state, name=name, topic_id=None),),
                timeout=TIMEOUT,
            )
        else:
            body = request(ApiKey.DELETE_TOPICS, version, topic_names=(name,), timeout=TIMEOUT)
        [result] = client.send(body).responses
        assert (result.name, result.error_code.value) == (name, 0)
    assert zk.kids("/admin/delete_topics") == sorted(
        f"v{v + 1}" for v in versions(ApiKey.DELETE_TOPICS)
    )
