"""The listener table is checked as Kafka's KafkaConfig does, and always has a control plane."""

from __future__ import annotations

import pytest

from odradek.config.broker import BrokerConfig
from odradek.config.controller import ControllerConfig
from odradek.config.endpoints import Listener, ListenerRole, SecurityProtocol
from odradek.errors import InvalidConfigError

REQUIRED = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/data/0"}
PLAINTEXT = SecurityProtocol.PLAINTEXT


def broker(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({**REQUIRED, **props})


def refused(**props: str) -> str:
    with pytest.raises(InvalidConfigError) as raised:
        broker(**props)
    return str(raised.value)


def test_the_default_table_has_a_client_and_a_control_plane_listener():
    assert broker().listener_table == (
        Listener("PLAINTEXT", PLAINTEXT, "127.0.0.1", 9092, ListenerRole.CLIENT),
        Listener("CONTROL_PLANE", PLAINTEXT, "127.0.0.1", 9091, ListenerRole.CONTROL_PLANE),
    )


def test_listener_names_are_free_when_the_map_names_them():
    config = broker(
        **{
            "listeners": "CLIENT://:9092,EXTERNAL://10.0.0.1:9094,controller://127.0.0.1:9091",
            "advertised.listeners": "CLIENT://b1:9092,EXTERNAL://b1.example.com:19094,"
            "CONTROLLER://127.0.0.1:9091",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,EXTERNAL:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "control.plane.listener.name": "controller",
            "inter.broker.listener.name": "client",
        }
    )
    assert [(x.name, x.role) for x in config.listener_table] == [
        ("CLIENT", ListenerRole.CLIENT),
        ("EXTERNAL", ListenerRole.CLIENT),
        ("CONTROLLER", ListenerRole.CONTROL_PLANE),
    ]
    assert config.effective_inter_broker_listener_name == "CLIENT"
    assert config.security_protocol("EXTERNAL") is PLAINTEXT


def test_every_listener_needs_a_security_protocol():
    message = refused(listeners="CLIENT://:9092,CONTROL_PLANE://:9091")
    assert "No security protocol defined for listener CLIENT" in message
    assert "listener.security.protocol.map, e.g. CLIENT:PLAINTEXT" in message
    message = refused(
        **{"advertised.listeners": "PLAINTEXT://h:9092,CONTROL_PLANE://h:9091,OTHER://h:1"}
    )
    assert "No security protocol defined for listener OTHER" in message


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_listeners_need_a_mechanism_other_than_kafkas_default(protocol):
    message = refused(
        listeners=f"PLAINTEXT://:9092,{protocol}://:9093,CONTROL_PLANE://:9091",
    )
    assert f"listener {protocol} (SASL): SASL mechanism GSSAPI (Kafka's default) is not" in message
    # As the inter-broker listener: internal links do not speak SASL yet.
    message = refused(
        **{
            "listeners": "PLAINTEXT://:9092,CONTROL_PLANE://:9091",
            "listener.security.protocol.map": f"PLAINTEXT:{protocol},CONTROL_PLANE:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
    )
    assert "internal links do not speak SASL yet" in message


def test_a_configuration_without_a_control_plane_listener_says_what_to_set():
    """Kafka's default listeners alone: the broker refuses to start, naming the keys to set."""
    message = refused(listeners="PLAINTEXT://:9092")
    assert message.startswith(
        "control.plane.listener.name is CONTROL_PLANE, but listeners has no CONTROL_PLANE "
        "listener (listeners: PLAINTEXT://:9092)."
    )
    assert "listeners=PLAINTEXT://:9092,CONTROL_PLANE://127.0.0.1:9091" in message
    assert "or set control.plane.listener.name" in message
    message = refused(**{"control.plane.listener.name": "INTERNAL"})
    assert "control.plane.listener.name is INTERNAL, but listeners has no INTERNAL" in message


def test_control_plane_name_must_be_given():
    message = refused(**{"control.plane.listener.name": ""})
    assert "for configuration control.plane.listener.name" in message


def test_named_listeners_must_be_in_the_protocol_map():
    message = refused(
        **{
            "listeners": "PLAINTEXT://:9092,CONTROL_PLANE://:9091",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT",
            "inter.broker.listener.name": "REPLICATION",
        }
    )
    assert message == (
        "Listener with name REPLICATION defined in inter.broker.listener.name not found in "
        "listener.security.protocol.map."
    )


def test_the_inter_broker_listener_must_be_advertised():
    # PLAINTEXT is the inter-broker listener by default, as Kafka derives it.
    message = refused(
        **{
            "listeners": "CLIENT://:9092,CONTROL_PLANE://:9091",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,"
            "CONTROL_PLANE:PLAINTEXT",
        }
    )
    assert message == (
        "inter.broker.listener.name must be a listener name defined in advertised.listeners. "
        "The valid options based on currently configured listeners are CLIENT,CONTROL_PLANE"
    )


def test_advertised_names_are_a_subset_of_the_listeners():
    message = refused(
        **{
            "advertised.listeners": "PLAINTEXT://h:9092,CONTROL_PLANE://h:9091,SSL://h:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL_PLANE:PLAINTEXT,"
            "SSL:PLAINTEXT",
        }
    )
    assert message == (
        "advertised.listeners listener names must be equal to or a subset of the ones defined "
        "in listeners. Found PLAINTEXT,CONTROL_PLANE,SSL. The valid options based on the "
        "current configuration are PLAINTEXT,CONTROL_PLANE"
    )


def test_the_control_plane_listener_must_be_advertised():
    """The controller finds the control plane in the registration: it must be advertised."""
    message = refused(**{"advertised.listeners": "PLAINTEXT://h:9092"})
    assert message == (
        "control.plane.listener.name must be a listener name defined in advertised.listeners. "
        "The valid options based on currently configured listeners are PLAINTEXT"
    )


def test_the_control_plane_is_not_the_inter_broker_listener():
    message = refused(**{"inter.broker.listener.name": "CONTROL_PLANE"})
    assert message == (
        "control.plane.listener.name, when defined, should have a different value from the "
        "inter broker listener name. Currently they both have the value CONTROL_PLANE"
    )


def test_the_controller_names_the_same_control_plane_listener():
    config = ControllerConfig.from_properties(
        {"controller.id": "1000", "zookeeper.connect": "127.0.0.1:2181"}
    )
    assert config.control_plane_listener_name == broker().control_plane_listener_name
    config = ControllerConfig.from_properties(
        {
            "controller.id": "1000",
            "zookeeper.connect": "127.0.0.1:2181",
            "control.plane.listener.name": "controller",
        }
    )
    assert config.control_plane_listener_name == "CONTROLLER"
    with pytest.raises(InvalidConfigError, match="control.plane.listener.name"):
        ControllerConfig.from_properties(
            {
                "controller.id": "1000",
                "zookeeper.connect": "127.0.0.1:2181",
                "control.plane.listener.name": "a b",
            }
        )
