"""A librdkafka error a command words itself still reads "cannot reach" if no broker answered."""

import argparse

from confluent_kafka import KafkaError, KafkaException

from odradek.commands.common import CommandError, run_command


def _wrapped(code: int) -> None:
    cause = KafkaException(KafkaError(code, "Failed while waiting for controller"))
    raise CommandError("cannot describe topic orders: ...") from cause


def test_a_wrapped_timeout_names_the_bootstrap_address(capsys):
    handler = run_command("topics describe", lambda args: _wrapped(KafkaError._TIMED_OUT))
    assert handler(argparse.Namespace(bootstrap_server="127.0.0.1:9")) == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("odradek topics describe: error: cannot reach a broker at 127.0.0.1:9 (")


def test_a_wrapped_broker_error_keeps_the_commands_words(capsys):
    handler = run_command(
        "topics describe", lambda args: _wrapped(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    )
    assert handler(argparse.Namespace(bootstrap_server="127.0.0.1:9")) == 1
    assert capsys.readouterr().err.strip() == (
        "odradek topics describe: error: cannot describe topic orders: ..."
    )
