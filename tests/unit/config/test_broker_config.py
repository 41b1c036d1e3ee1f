"""Broker configuration keeps Kafka's keys, defaults, precedence and errors, and topic defaults."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from odradek.config.broker import BROKER_KEYS, TOPIC_CONFIG_SYNONYMS, BrokerConfig
from odradek.config.endpoints import Endpoint, HostPort
from odradek.config.topic import CONFIG_KEYS, DEFAULT_TOPIC_CONFIG
from odradek.errors import ErrorCode, InvalidConfigError

REQUIRED = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/data/0"}

# Kafka 3.x's documented broker defaults (ZooKeeper mode), where Odradek keeps them.
KAFKA_DEFAULTS = {
    "zookeeper.session.timeout.ms": "18000",
    "socket.request.max.bytes": "104857600",
    "queued.max.requests": "500",
    "connections.max.idle.ms": "600000",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    "max.connection.creation.rate": "2147483647",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "delete.topic.enable": "true",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
    "controller.socket.timeout.ms": "30000",
    "replica.lag.time.max.ms": "30000",
    # The group coordinator's keys (Kafka 4.0's GroupCoordinatorConfig).
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.commit.timeout.ms": "5000",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.assignors": "uniform,range",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "num.replica.fetchers": "1",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "fetch.max.bytes": "57671680",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.backoff.ms": "1000",
    "replica.socket.timeout.ms": "30000",
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "replication.quota.window.num": "11",
    "replication.quota.window.size.seconds": "1",
    "max.incremental.fetch.session.cache.slots": "1000",
    "message.max.bytes": "1048588",
    "compression.type": "producer",
    "log.segment.bytes": "1073741824",
    "log.roll.hours": "168",
    "log.roll.jitter.hours": "0",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.preallocate": "false",
    "log.segment.delete.delay.ms": "60000",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": "9223372036854775807",
    "log.message.timestamp.after.max.ms": "9223372036854775807",
    "ssl.keystore.type": "JKS",  # Kafka's default; an SSL listener must set PEM
    "ssl.truststore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.principal.mapping.rules": "DEFAULT",
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    "sasl.enabled.mechanisms": "GSSAPI",  # Kafka's default; a SASL listener must set others
    "connection.failed.authentication.delay.ms": "100",
    "sasl.server.max.receive.size": "524288",
    "connections.max.reauth.ms": "0",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "zookeeper.set.acl": "false",
    "zookeeper.ssl.client.enable": "false",
    "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS",
    "zookeeper.ssl.protocol": "TLSv1.2",
}
# Keys Kafka leaves unset (null) by default; their fallbacks apply.
KAFKA_NULL_DEFAULTS = {
    "broker.rack",
    "advertised.listeners",
    "zookeeper.connection.timeout.ms",
    "log.dirs",
    "log.dir",
    "log.roll.ms",
    "log.roll.jitter.ms",
    "log.retention.ms",
    "log.retention.minutes",
    "log.flush.interval.ms",
    "inter.broker.listener.name",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "sasl.mechanism.inter.broker.protocol",  # Kafka's default is GSSAPI; refused when set here
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password",
    "zookeeper.ssl.keystore.type",
    "zookeeper.ssl.truststore.location",
    "zookeeper.ssl.truststore.type",
    "zookeeper.ssl.enabled.protocols",
}
CONTROL_PLANE = Endpoint("CONTROL_PLANE", "127.0.0.1", 9091)


def broker(**props: object) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {**REQUIRED, **{k.replace("_", "."): v for k, v in props.items()}}
    )


def test_defaults_are_kafkas():
    config = BrokerConfig.from_properties(REQUIRED)
    props = config.to_properties()
    for name, value in KAFKA_DEFAULTS.items():
        assert props[name] == value, name
    for name in KAFKA_NULL_DEFAULTS - {"log.dirs"}:
        assert name not in props, name
    assert config.broker_id == 0
    # Not Kafka's (2^31-1): a group of more than 1000 members is refused (issue 23).
    assert props["group.max.size"] == props["group.consumer.max.size"] == "1000"
    # Not Kafka's: a control-plane listener by default, for the controller's requests only.
    assert config.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092), CONTROL_PLANE)
    assert config.control_plane_listener_name == "CONTROL_PLANE"
    assert config.effective_inter_broker_listener_name == "PLAINTEXT"
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "CONTROL_PLANE:PLAINTEXT"
    )
    assert config.odradek_admin_listener == HostPort("127.0.0.1", 9644)
    assert config.max_connections == 1000
    assert config.odradek_connection_max_inflight_requests == 100
    assert config.auto_create_topics_enable is True  # Kafka's default (issue 21 item 13)
    # Kafka's default is -1 (no bound): Odradek bounds request memory by default.
    assert config.queued_max_request_bytes == 256 * 1024 * 1024


def test_every_key_is_documented_and_ours_are_prefixed():
    kafka_names = set(KAFKA_DEFAULTS) | KAFKA_NULL_DEFAULTS
    kafka_names |= {"broker.id", "zookeeper.connect", "listeners", "max.connections"}
    kafka_names |= {"queued.max.request.bytes"}  # Kafka's key, with a finite default here
    kafka_names |= {"auto.create.topics.enable"}  # Kafka's key and default
    kafka_names |= {"group.max.size", "group.consumer.max.size"}  # Kafka's keys, bounded here
    kafka_names |= {"max.broker.partitions"}  # KIP-578's name; derived from the files limit
    kafka_names |= {"listener.security.protocol.map", "control.plane.listener.name"}
    for key in BROKER_KEYS.values():
        assert key.doc, key.name
        assert key.name in kafka_names or key.name.startswith("odradek."), key.name


@pytest.mark.parametrize(
    "key",
    [
        "controlled_shutdown_max_retries",
        "controlled_shutdown_retry_backoff_ms",
        "controller_socket_timeout_ms",
    ],
)
def test_controlled_shutdown_numbers_below_their_bound_are_refused(key):
    with pytest.raises(InvalidConfigError, match=key.replace("_", ".")):
        broker(**{key: -1})
    assert getattr(broker(**{key: 7}), key) == 7


def test_auto_create_topics_enable_is_accepted_either_way():
    assert broker(auto_create_topics_enable="false").auto_create_topics_enable is False
    assert broker(auto_create_topics_enable="true").auto_create_topics_enable is True


def test_a_transaction_log_min_isr_above_its_replication_factor_is_refused():
    """Issue 21 item 14: __transaction_state could never take a write; say so at start-up."""
    with pytest.raises(InvalidConfigError, match=r"min.isr \(3\) is above .*factor \(2\)"):
        broker(transaction_state_log_replication_factor=2, transaction_state_log_min_isr=3)
    assert (
        broker(
            transaction_state_log_replication_factor=1, transaction_state_log_min_isr=1
        ).transaction_state_log_min_isr
        == 1
    )


@pytest.mark.parametrize("pool", [0, 1024])
def test_a_request_memory_pool_smaller_than_the_largest_request_is_refused(pool):
    with pytest.raises(InvalidConfigError, match="queued.max.request.bytes"):
        broker(queued_max_request_bytes=pool)
    assert broker(queued_max_request_bytes=-1).queued_max_request_bytes == -1


def test_a_server_properties_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        textwrap.dedent(
            """\
            # Odradek broker 1
            broker.id=1
            broker.rack = rack-a

            listeners=PLAINTEXT://127.0.0.1:19092,CONTROL_PLANE://127.0.0.1:19091
            advertised.listeners: PLAINTEXT://broker-1:19092,CONTROL_PLANE://broker-1:19091
            log.dirs=/disks/0/odradek,\\
                     /disks/1/odradek
            zookeeper.connect=127.0.0.1:2181,127.0.0.1:2182/odradek
            num.partitions 3
            log.retention.hours=24
            odradek.admin.listener=
            """
        )
    )
    config = BrokerConfig.load(path)
    assert config.broker_id == 1
    assert config.broker_rack == "rack-a"
    assert config.listeners == (
        Endpoint("PLAINTEXT", "127.0.0.1", 19092),
        Endpoint("CONTROL_PLANE", "127.0.0.1", 19091),
    )
    assert config.effective_advertised_listeners == (
        Endpoint("PLAINTEXT", "broker-1", 19092),
        Endpoint("CONTROL_PLANE", "broker-1", 19091),
    )
    assert config.effective_log_dirs == ("/disks/0/odradek", "/disks/1/odradek")
    assert config.zookeeper_connect == "127.0.0.1:2181,127.0.0.1:2182/odradek"
    assert config.num_partitions == 3
    assert config.effective_log_retention_ms == 24 * 3600 * 1000
    assert config.odradek_admin_listener is None


def test_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\nlog.dirs=/a\nnum.partitions=3\n")
    config = BrokerConfig.load(path, {"num.partitions": "6", "broker.id": 2, "log.dirs": "/b"})
    assert (config.num_partitions, config.broker_id, config.log_dirs) == (6, 2, ("/b",))
    assert BrokerConfig.load(overrides={**REQUIRED, "num.partitions": "4"}).num_partitions == 4


def test_an_override_keeps_kafkas_precedence_between_synonyms(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk\nlog.dirs=/a\nlog.retention.ms=1000\n")
    config = BrokerConfig.load(path, {"log.retention.hours": "1"})
    assert config.effective_log_retention_ms == 1000


@pytest.mark.parametrize("name", ["broker.id", "zookeeper.connect", "log.dirs"])
def test_every_required_key_missing_is_named(name):
    props = {k: v for k, v in REQUIRED.items() if k != name}
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.from_properties(props)
    assert (
        str(raised.value) == f'Missing required configuration "{name}" which has no default value.'
    )


def test_log_dir_is_accepted_and_log_dirs_wins():
    props = {k: v for k, v in REQUIRED.items() if k != "log.dirs"}
    assert BrokerConfig.from_properties({**props, "log.dir": "/x"}).effective_log_dirs == ("/x",)
    assert BrokerConfig.from_properties({**props, "log.dir": "/x, /y"}).effective_log_dirs == (
        "/x",
        "/y",
    )
    both = BrokerConfig.from_properties({**REQUIRED, "log.dir": "/x"})
    assert both.effective_log_dirs == ("/data/0",)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "broker.id",
            "-1",
            "Invalid value -1 for configuration broker.id: Value must be at least 0",
        ),
        (
            "broker.id",
            "one",
            "Invalid value one for configuration broker.id: Not a number of type INT",
        ),
        ("num.partitions", "0", "Value must be at least 1"),
        ("default.replication.factor", "0", "Value must be at least 1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("socket.request.max.bytes", "100MB", "Not a number of type INT"),
        ("zookeeper.session.timeout.ms", "2147483648", "Not a number of type INT"),
        ("queued.max.requests", "0", "Value must be at least 1"),
        ("max.connections", "-1", "Value must be at least 0"),
        ("odradek.connection.max.inflight.requests", "0", "Value must be at least 1"),
        ("auto.create.topics.enable", "yes", "Expected value to be either true or false"),
        ("log.segment.bytes", "13", "Value must be at least 14"),
        ("log.roll.hours", "0", "Value must be at least 1"),
        ("log.roll.ms", "0", "Value must be at least 1"),
        ("log.index.size.max.bytes", "3", "Value must be at least 4"),
        ("log.retention.minutes", "1.5", "Not a number of type INT"),
        ("log.cleaner.min.cleanable.ratio", "2", "Value must be no more than 1"),
        (
            "log.cleanup.policy",
            "compact,remove",
            "Invalid value remove for configuration "
            "log.cleanup.policy: String must be one of: compact, delete",
        ),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4"),
        ("log.message.timestamp.type", "createtime", "String must be one of: CreateTime"),
        ("advertised.listeners", "h:9092", "expected NAME://host:port"),
        ("log.dirs", " , ", "at least one directory is required"),
        ("log.dirs", "/a,/b,/a/", "directory /a is listed twice"),
        ("zookeeper.connect", "zk:2181/bad/", "invalid chroot path"),
        ("odradek.admin.listener", "9644", "expected host:port"),
    ],
)
def test_bad_values_get_kafka_style_messages(name, value, message):
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.from_properties({**REQUIRED, name: value})
    assert message in str(raised.value)
    assert f"for configuration {name}" in str(raised.value)
    assert raised.value.error_code is ErrorCode.invalid_config


def test_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=1\n# comment\nnum.partitions=zero\nzookeeper.connect=zk\nlog.dirs=/a\n"
    )
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.load(path)
    assert str(raised.value) == (
        f"{path}:3: Invalid value zero for configuration num.partitions: Not a number of type INT"
    )
    with pytest.raises(InvalidConfigError, match="^override: Invalid value 0 for configuration"):
        BrokerConfig.load(path, {"num.partitions": "0"})


def test_unknown_keys_are_refused_with_file_line_and_a_guess(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\n\nnum.partition=3\n")
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.load(path)
    assert str(raised.value) == (
        f"{path}:3: Unknown broker config name: num.partition (did you mean num.partitions?)"
    )
    with pytest.raises(InvalidConfigError, match="^override: Unknown broker config name: nope$"):
        BrokerConfig.load(overrides={**REQUIRED, "nope": "1"})
    # A topic key in a broker file: the guess points to the broker's name for it.
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig.from_properties({**REQUIRED, "segment.bytes": "1024"})
    assert str(raised.value).endswith("segment.bytes (did you mean log.segment.bytes?)")


def test_unknown_names_are_reported_before_bad_values():
    with pytest.raises(InvalidConfigError, match="Unknown broker config name: x"):
        BrokerConfig.from_properties({"x": "1", "broker.id": "-5"})


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({}, 168 * 3600 * 1000),
        ({"log.retention.hours": "1"}, 3600 * 1000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 5 * 60 * 1000),
        ({"log.retention.minutes": "5", "log.retention.ms": "1234"}, 1234),
        ({"log.retention.hours": "1", "log.retention.ms": "1234"}, 1234),
        ({"log.retention.ms": "-1", "log.retention.hours": "1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-5"}, -1),
        ({"log.retention.ms": "-7"}, -1),
    ],
)
def test_retention_precedence_is_ms_then_minutes_then_hours(props, retention_ms):
    config = BrokerConfig.from_properties({**REQUIRED, **props})
    assert config.effective_log_retention_ms == retention_ms
    assert config.topic_defaults().retention_ms == retention_ms


def test_roll_jitter_flush_and_zookeeper_fallbacks():
    config = broker()
    assert config.effective_log_roll_ms == 168 * 3600 * 1000
    assert config.effective_log_roll_jitter_ms == 0
    assert config.effective_log_flush_interval_ms == 2**63 - 1
    assert config.effective_zookeeper_connection_timeout_ms == 18000
    config = broker(
        log_roll_hours="2",
        log_roll_jitter_hours="1",
        log_flush_scheduler_interval_ms="500",
        zookeeper_session_timeout_ms="6000",
    )
    assert config.effective_log_roll_ms == 2 * 3600 * 1000
    assert config.effective_log_roll_jitter_ms == 3600 * 1000
    assert config.effective_log_flush_interval_ms == 500
    assert config.effective_zookeeper_connection_timeout_ms == 6000
    config = broker(
        log_roll_hours="2",
        log_roll_ms="1000",
        log_roll_jitter_hours="1",
        log_roll_jitter_ms="10",
        log_flush_scheduler_interval_ms="500",
        log_flush_interval_ms="50",
        zookeeper_connection_timeout_ms="3000",
    )
    assert config.effective_log_roll_ms == 1000
    assert config.effective_log_roll_jitter_ms == 10
    assert config.effective_log_flush_interval_ms == 50
    assert config.effective_zookeeper_connection_timeout_ms == 3000


# Broker key, a value to set, the topic key it is the default of, the value the topic gets.
TOPIC_MAPPING = [
    ("log.cleanup.policy", "compact", "cleanup.policy", ("compact",)),
    ("compression.type", "zstd", "compression.type", "zstd"),
    ("log.cleaner.delete.retention.ms", "1000", "delete.retention.ms", 1000),
    ("log.segment.delete.delay.ms", "5", "file.delete.delay.ms", 5),
    ("log.flush.interval.messages", "10", "flush.messages", 10),
    ("log.flush.interval.ms", "20", "flush.ms", 20),
    ("log.flush.scheduler.interval.ms", "30", "flush.ms", 30),
    ("log.index.interval.bytes", "100", "index.interval.bytes", 100),
    ("log.cleaner.max.compaction.lag.ms", "99", "max.compaction.lag.ms", 99),
    ("message.max.bytes", "2000", "max.message.bytes", 2000),
    ("log.message.timestamp.after.max.ms", "7", "message.timestamp.after.max.ms", 7),
    ("log.message.timestamp.before.max.ms", "8", "message.timestamp.before.max.ms", 8),
    ("log.message.timestamp.type", "LogAppendTime", "message.timestamp.type", "LogAppendTime"),
    ("log.cleaner.min.cleanable.ratio", "0.25", "min.cleanable.dirty.ratio", 0.25),
    ("log.cleaner.min.compaction.lag.ms", "9", "min.compaction.lag.ms", 9),
    ("min.insync.replicas", "2", "min.insync.replicas", 2),
    ("log.preallocate", "true", "preallocate", True),
    ("log.retention.bytes", "4096", "retention.bytes", 4096),
    ("log.retention.ms", "1234", "retention.ms", 1234),
    ("log.retention.minutes", "2", "retention.ms", 2 * 60 * 1000),
    ("log.retention.hours", "3", "retention.ms", 3 * 3600 * 1000),
    ("log.segment.bytes", "1024", "segment.bytes", 1024),
    ("log.index.size.max.bytes", "4096", "segment.index.bytes", 4096),
    ("log.roll.jitter.ms", "11", "segment.jitter.ms", 11),
    ("log.roll.jitter.hours", "1", "segment.jitter.ms", 3600 * 1000),
    ("log.roll.ms", "12", "segment.ms", 12),
    ("log.roll.hours", "2", "segment.ms", 2 * 3600 * 1000),
    ("unclean.leader.election.enable", "true", "unclean.leader.election.enable", True),
]


@pytest.mark.parametrize(("broker_key", "value", "topic_key", "expected"), TOPIC_MAPPING)
def test_topic_defaults_map_each_broker_key(broker_key, value, topic_key, expected):
    topic = BrokerConfig.from_properties({**REQUIRED, broker_key: value}).topic_defaults()
    assert getattr(topic, CONFIG_KEYS[topic_key].attr) == expected
    others = {k: v for k, v in topic.to_properties().items() if k != topic_key}
    assert others == {
        k: v for k, v in DEFAULT_TOPIC_CONFIG.to_properties().items() if k != topic_key
    }


# Topic keys that no broker key gives a default to (Kafka's ServerTopicConfigSynonyms).
WITHOUT_BROKER_SYNONYM = {
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
}


def test_the_mapping_covers_every_topic_key_and_every_synonym():
    assert {topic for _, _, topic, _ in TOPIC_MAPPING} == set(CONFIG_KEYS) - WITHOUT_BROKER_SYNONYM
    assert {k for k, names in TOPIC_CONFIG_SYNONYMS.items() if not names} == WITHOUT_BROKER_SYNONYM
    synonyms = {name for names in TOPIC_CONFIG_SYNONYMS.values() for name, _ in names}
    assert {b for b, _, _, _ in TOPIC_MAPPING} == synonyms
    assert broker().topic_defaults() == DEFAULT_TOPIC_CONFIG


def test_topic_rows_share_bounds_and_documentation():
    for topic_key, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        if not synonyms:
            continue
        name, factor = synonyms[0]
        if factor == 1:
            row, topic_row = BROKER_KEYS[name], CONFIG_KEYS[topic_key]
            assert (row.type, row.choices, row.maximum, row.doc) == (
                topic_row.type,
                topic_row.choices,
                topic_row.maximum,
                topic_row.doc,
            )


def test_compaction_lag_conflict_names_the_broker_keys():
    with pytest.raises(InvalidConfigError, match=r"log.cleaner.min.compaction.lag.ms \(10\) > "):
        broker(log_cleaner_min_compaction_lag_ms="10", log_cleaner_max_compaction_lag_ms="5")


def test_advertised_listeners_default_to_listeners_and_must_be_routable():
    config = broker(listeners="PLAINTEXT://:9092,CONTROL_PLANE://:9091")
    assert config.advertised_listeners is None
    assert config.effective_advertised_listeners == (
        Endpoint("PLAINTEXT", "", 9092),
        Endpoint("CONTROL_PLANE", "", 9091),
    )
    for bad in (
        {"listeners": "PLAINTEXT://0.0.0.0:9092,CONTROL_PLANE://b1:9091"},
        {"advertised_listeners": "PLAINTEXT://[::]:1,CONTROL_PLANE://b1:9091"},
    ):
        with pytest.raises(InvalidConfigError, match="cannot use the nonroutable meta-address"):
            broker(**bad)
    config = broker(
        listeners="PLAINTEXT://0.0.0.0:9092,CONTROL_PLANE://0.0.0.0:9091",
        advertised_listeners="PLAINTEXT://b1:9092,CONTROL_PLANE://b1:9091",
    )
    assert config.effective_advertised_listeners == (
        Endpoint("PLAINTEXT", "b1", 9092),
        Endpoint("CONTROL_PLANE", "b1", 9091),
    )


def test_empty_rack_means_no_rack():
    assert broker(broker_rack="  ").broker_rack is None
    assert broker(broker_rack=" r1 ").broker_rack == "r1"


def test_building_by_hand_validates_and_the_result_is_frozen():
    config = BrokerConfig(broker_id="3", zookeeper_connect="zk", log_dirs="/a,/b")
    assert (config.broker_id, config.zookeeper_connect, config.log_dirs) == (
        3,
        "zk:2181",
        ("/a", "/b"),
    )
    assert config.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092), CONTROL_PLANE)
    with pytest.raises(InvalidConfigError, match="broker.id"):
        BrokerConfig(broker_id=-1, zookeeper_connect="zk", log_dirs=("/a",))
    with pytest.raises(InvalidConfigError, match='"log.dirs"'):
        BrokerConfig(broker_id=1, zookeeper_connect="zk")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.broker_id = 4  # type: ignore[misc]
    moved = dataclasses.replace(
        config, listeners="PLAINTEXT://127.0.0.1:0,CONTROL_PLANE://127.0.0.1:0"
    )
    assert moved.effective_advertised_listeners == (
        Endpoint("PLAINTEXT", "127.0.0.1", 0),
        Endpoint("CONTROL_PLANE", "127.0.0.1", 0),
    )
    assert hash(moved) == hash(dataclasses.replace(config, listeners=moved.listeners))


def test_properties_round_trip():
    config = broker(
        broker_rack="r",
        advertised_listeners="PLAINTEXT://[::1]:9092,CONTROL_PLANE://[::1]:9091",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,control_plane:plaintext",
        inter_broker_listener_name="plaintext",
        log_retention_minutes="5",
        log_cleanup_policy="compact,delete",
        odradek_admin_listener="",
    )
    props = config.to_properties()
    assert props["odradek.admin.listener"] == ""
    assert props["advertised.listeners"] == "PLAINTEXT://[::1]:9092,CONTROL_PLANE://[::1]:9091"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert "log.retention.ms" not in props
    assert BrokerConfig.from_properties(props) == config


@pytest.mark.parametrize(
    "overrides",
    [
        {"group.coordinator.rebalance.protocols": "consumer"},
        {"group.min.session.timeout.ms": "10000", "group.max.session.timeout.ms": "9000"},
        {"group.consumer.session.timeout.ms": "70000"},
        {"group.consumer.heartbeat.interval.ms": "20000"},
        {
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "1000",
        },
    ],
)
def test_group_coordinator_settings_that_contradict_each_other_are_refused(overrides):
    with pytest.raises(InvalidConfigError):
        BrokerConfig.from_properties(
            {"broker.id": "0", "zookeeper.connect": "z:2181", "log.dirs": "/d", **overrides}
        )
