"""Kafka's sasl.jaas.config syntax: one login module, its flag and options, quoted or not."""

from __future__ import annotations

import pytest

from odradek.security.jaas import JaasSyntaxError, parse

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_kafkas_example_parses():
    entry = parse(f'{PLAIN} required user_alice="alice-secret" user_bob=bob-secret;')
    assert entry.login_module == PLAIN
    assert entry.control_flag == "required"
    assert dict(entry.options) == {"user_alice": "alice-secret", "user_bob": "bob-secret"}


def test_quotes_escapes_comments_and_whitespace():
    text = f'// users\n{PLAIN}\n  REQUIRED /* flag */ user_a="p;w=\\"x\\" \\\\y" ;  '
    entry = parse(text)
    assert entry.control_flag == "required"
    assert entry.options["user_a"] == 'p;w="x" \\y'


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"{PLAIN} required user_a=x", "missing ';'"),
        (f"{PLAIN} mandatory;", "invalid control flag"),
        (f"{PLAIN} required user_a=;", "has no value"),
        (f"{PLAIN} required user_a x;", "needs '='"),
        (f"{PLAIN} required user_a=x user_a=y;", "given twice"),
        (f"{PLAIN} required; {PLAIN} required;", "contains 2 login modules, should be 1"),
        ("", "contains 0 login modules"),
        (f"{PLAIN} required user_a=p@ss;", "unexpected character '@'"),
    ],
)
def test_what_kafka_refuses_is_refused(text, words):
    with pytest.raises(JaasSyntaxError, match=None) as raised:
        parse(text)
    assert words in str(raised.value)


def test_errors_and_repr_never_show_a_password():
    entry = parse(f'{PLAIN} required user_alice="s3cret";')
    assert "s3cret" not in repr(entry)
    with pytest.raises(JaasSyntaxError) as raised:
        parse(f'{PLAIN} required user_alice="s3cret" user_alice="s3cret";')
    assert "s3cret" not in str(raised.value)
