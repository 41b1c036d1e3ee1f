"""A worker's config providers (env, file, directory) resolve ``${provider:[path:]key}`` as
Kafka's do, and refuse what names no value, an unknown class and an unknown parameter by key."""

from __future__ import annotations

import pytest

from odradek.connect.api import ConfigException
from odradek.connect.config_providers import DIRECTORY, ENV, FILE, resolve
from odradek.connect.worker_config import WorkerConfig

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="connect" password="${env:CONNECT_PASSWORD}";'
)
DIST = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
}
ENV_PROVIDER = {"config.providers": "env", "config.providers.env.class": ENV}


def test_without_providers_nothing_is_replaced():
    props = {"sasl.jaas.config": JAAS}
    assert resolve(props, {"CONNECT_PASSWORD": "pw"}) == props


def test_env_variable_in_the_jaas_config():
    props = {**ENV_PROVIDER, "sasl.jaas.config": JAAS}
    out = resolve(props, {"CONNECT_PASSWORD": "s3cret"})
    assert out["sasl.jaas.config"].endswith('password="s3cret";')
    assert out["config.providers.env.class"] == ENV


def test_an_unset_variable_is_refused_naming_the_key_not_a_value():
    props = {**ENV_PROVIDER, "sasl.jaas.config": JAAS}
    with pytest.raises(ConfigException) as e:
        resolve(props, {})
    assert e.value.name == "sasl.jaas.config"
    assert "CONNECT_PASSWORD" in e.value.message


def test_allowlist_pattern_limits_the_variables():
    props = {
        **ENV_PROVIDER,
        "config.providers.env.param.allowlist.pattern": "CONNECT_.*",
        "a": "${env:CONNECT_PASSWORD}",
        "b": "${env:HOME}",
    }
    with pytest.raises(ConfigException) as e:
        resolve(props, {"CONNECT_PASSWORD": "x", "HOME": "/root"})
    assert e.value.name == "b"
    del props["b"]
    assert resolve(props, {"CONNECT_PASSWORD": "x"})["a"] == "x"


def test_env_takes_no_path():
    with pytest.raises(ConfigException, match="path is not supported"):
        resolve({**ENV_PROVIDER, "a": "${env:/etc:X}"}, {"X": "1"})


def test_an_undeclared_provider_is_left_as_written():
    props = {**ENV_PROVIDER, "a": "${vault:secret/x:pw}"}
    assert resolve(props, {})["a"] == "${vault:secret/x:pw}"


def test_file_and_directory_providers(tmp_path):
    (tmp_path / "creds.properties").write_text("user=connect\npassword=pw1\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "password").write_text("pw2")
    props = {
        "config.providers": "file,dir",
        "config.providers.file.class": FILE,
        "config.providers.dir.class": DIRECTORY,
        "a": f"${{file:{tmp_path}/creds.properties:password}}",
        "b": f"x-${{dir:{secret}:password}}-y",
    }
    out = resolve(props, {})
    assert (out["a"], out["b"]) == ("pw1", "x-pw2-y")
    with pytest.raises(ConfigException) as e:
        resolve({**props, "b": f"${{dir:{secret}:../creds.properties}}"}, {})
    assert e.value.name == "b"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"config.providers": "env"}, "config.providers.env.class"),
        (
            {"config.providers": "v", "config.providers.v.class": "com.example.Vault"},
            "config.providers.v.class",
        ),
        ({**ENV_PROVIDER, "config.providers.env.param.x": "1"}, "config.providers.env.param.x"),
        ({**ENV_PROVIDER, "config.providers.other.class": FILE}, "config.providers.other.class"),
        ({**ENV_PROVIDER, "config.providers.env.klass": ENV}, "config.providers.env.klass"),
    ],
)
def test_bad_provider_keys_are_refused_by_name(props, key):
    with pytest.raises(ConfigException) as e:
        resolve(props, {})
    assert e.value.name == key


def test_the_worker_uses_the_resolved_values():
    props = {
        **DIST,
        **ENV_PROVIDER,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
    }
    config = WorkerConfig(props, distributed=True, environ={"CONNECT_PASSWORD": "s3cret"})
    assert config.security_settings()["sasl.password"] == "s3cret"
    assert config.producer_config()["sasl.password"] == "s3cret"
    with pytest.raises(ConfigException) as e:
        WorkerConfig(props, distributed=True, environ={})
    assert e.value.name == "sasl.jaas.config"
