"""Properties files are read as java.util.Properties reads them, with file and line in errors."""

from __future__ import annotations

import pytest

from odradek.config.broker import BrokerConfig
from odradek.config.properties import (
    PROPERTIES_FILE_MAX_BYTES,
    Property,
    parse_overrides,
    parse_properties,
)
from odradek.errors import InvalidConfigError


def entries(text: str) -> dict[str, str]:
    return {p.key: p.value for p in parse_properties(text)}


def test_comments_blank_lines_and_line_numbers():
    text = "# a comment\n\n   ! another\nbroker.id=1\n  \t\nlog.dirs=/data\n"
    assert parse_properties(text) == [
        Property("broker.id", "1", 4),
        Property("log.dirs", "/data", 6),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "key=value",
        "key = value",
        "key:value",
        "key : value",
        "key value",
        "key\tvalue",
        "   key=value",
        "key   =   value",
    ],
)
def test_separators_as_java_allows(line):
    assert entries(line) == {"key": "value"}


def test_only_the_first_separator_splits_and_the_value_keeps_the_rest():
    assert entries("listeners=PLAINTEXT://h:9092") == {"listeners": "PLAINTEXT://h:9092"}
    assert entries("a==b") == {"a": "=b"}
    assert entries("a: b:c") == {"a": "b:c"}
    assert entries("a = b c  ") == {"a": "b c  "}  # Java keeps trailing blanks; parsers trim


def test_a_hash_after_the_start_of_a_line_is_part_of_the_value():
    assert entries("a=1 # not a comment") == {"a": "1 # not a comment"}


def test_keys_without_values_and_duplicates():
    assert entries("empty=\nalone\n") == {"empty": "", "alone": ""}
    assert parse_properties("a=1\na=2\n") == [Property("a", "1", 1), Property("a", "2", 2)]
    assert entries("a=1\na=2\n") == {"a": "2"}


def test_escapes():
    assert entries(r"a\=b=c") == {"a=b": "c"}
    assert entries(r"a\:b\ c=d") == {"a:b c": "d"}
    assert entries(r"path=C:\\data\\kafka") == {"path": "C:\\data\\kafka"}
    assert entries(r"t=x\ty\nz") == {"t": "x\ty\nz"}
    assert entries(r"u=caf\u00e9") == {"u": "café"}
    assert entries(r"other=\q") == {"other": "q"}


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(InvalidConfigError, match=r"^x\.properties:2: malformed \\uxxxx escape"):
        parse_properties("a=1\nb=\\u12g4\n", "x.properties")


def test_continuation_lines():
    text = "log.dirs=/a,\\\n    /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == [Property("log.dirs", "/a,/b,/c", 1), Property("next", "1", 4)]
    # An even number of backslashes is an escaped backslash, not a continuation.
    assert entries("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    # A comment does not continue; a backslash on the last line is dropped.
    assert entries("# c \\\na=1\nb=2\\") == {"a": "1", "b": "2"}


def test_line_endings():
    assert entries("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_overrides():
    assert parse_overrides(["broker.id=3", "listeners=PLAINTEXT://h:1", "a= b=c"]) == {
        "broker.id": "3",
        "listeners": "PLAINTEXT://h:1",
        "a": " b=c",
    }
    assert parse_overrides(["a=1", "a=2"]) == {"a": "2"}
    for bad in ("broker.id", "=3"):
        with pytest.raises(InvalidConfigError, match="expected key=value"):
            parse_overrides([bad])


def test_unreadable_and_oversized_files(tmp_path):
    with pytest.raises(InvalidConfigError, match="missing.properties: cannot read"):
        BrokerConfig.load(tmp_path / "missing.properties")
    big = tmp_path / "big.properties"
    big.write_bytes(b"#" * (PROPERTIES_FILE_MAX_BYTES + 1))
    with pytest.raises(InvalidConfigError, match="larger than"):
        BrokerConfig.load(big)
    binary = tmp_path / "binary.properties"
    binary.write_bytes(b"a=\xff\n")
    with pytest.raises(InvalidConfigError, match="not UTF-8"):
        BrokerConfig.load(binary)
