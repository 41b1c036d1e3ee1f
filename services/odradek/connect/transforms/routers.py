"""Topic routers: ``org.apache.kafka.connect.transforms.TimestampRouter`` and ``RegexRouter``.

TimestampRouter: ``topic.format`` (default ``${topic}-${timestamp}``) with the record's timestamp
formatted in UTC by ``timestamp.format`` (default ``yyyyMMdd``), a Java ``SimpleDateFormat``
pattern: the letters y, M, d, H, h, m, s, S, E, a and quoted literals ('T', '' for a quote) are
understood; another letter is refused at configure time, naming the key. A record without a
timestamp is a ``DataError``.

RegexRouter: ``regex`` must match the whole topic (Java's ``Matcher.matches``); the topic becomes
``replacement`` with Java's group references ``$1``, ``${name}`` and ``\\$`` for a literal ``$``.
A topic that does not match is left as it is. Java's named groups ``(?<name>...)`` are accepted.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping

from odradek.connect.api import ConfigDef, ConfigException, ConfigType, ConnectRecord, Importance
from odradek.connect.config_def import invalid
from odradek.connect.data import DataError

TOPIC_FORMAT = "topic.format"
TIMESTAMP_FORMAT = "timestamp.format"
REGEX = "regex"
REPLACEMENT = "replacement"

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _field(letter: str, count: int) -> Callable[[datetime.datetime], str]:
    def number(get: Callable[[datetime.datetime], int]) -> Callable[[datetime.datetime], str]:
        return lambda t: str(get(t)).zfill(count)

    if letter == "y":
        if count == 2:
            return lambda t: str(t.year % 100).zfill(2)
        return number(lambda t: t.year)
    if letter == "M":
        if count >= 4:
            return lambda t: _MONTHS[t.month - 1]
        if count == 3:
            return lambda t: _MONTHS[t.month - 1][:3]
        return number(lambda t: t.month)
    if letter == "d":
        return number(lambda t: t.day)
    if letter == "H":
        return number(lambda t: t.hour)
    if letter == "h":
        return number(lambda t: (t.hour % 12) or 12)
    if letter == "m":
        return number(lambda t: t.minute)
    if letter == "s":
        return number(lambda t: t.second)
    if letter == "S":
        return number(lambda t: t.microsecond // 1000)
    if letter == "E":
        if count >= 4:
            return lambda t: _DAYS[t.weekday()]
        return lambda t: _DAYS[t.weekday()][:3]
    if letter == "a":
        return lambda t: "AM" if t.hour < 12 else "PM"
    raise KeyError(letter)


def java_date_format(
    pattern: str, key: str = TIMESTAMP_FORMAT
) -> Callable[[datetime.datetime], str]:
    """A formatter for a Java ``SimpleDateFormat`` pattern; ``ConfigException`` names ``key``
    when the pattern uses a letter not understood here or has an unclosed quote."""
    parts: list[Callable[[datetime.datetime], str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end == -1:
                raise invalid(key, pattern, "Unterminated quote")
            literal = pattern[i + 1 : end] or "'"
            parts.append(lambda t, s=literal: s)
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            try:
                parts.append(_field(c, j - i))
            except KeyError:
                raise invalid(
                    key,
                    pattern,
                    f"the pattern letter {c!r} is not supported (use y M d H h m s S E a)",
                ) from None
            i = j
        else:
            parts.append(lambda t, s=c: s)
            i += 1
    return lambda t: "".join(p(t) for p in parts)


class TimestampRouter:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.TimestampRouter"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                TOPIC_FORMAT,
                ConfigType.STRING,
                "${topic}-${timestamp}",
                importance=Importance.HIGH,
                documentation="Format string which can contain ${topic} and ${timestamp} as "
                "placeholders for the topic and timestamp, respectively.",
            )
            .define(
                TIMESTAMP_FORMAT,
                ConfigType.STRING,
                "yyyyMMdd",
                importance=Importance.HIGH,
                validator=lambda name, value: java_date_format(value, name),
                documentation="Format string for the timestamp that is compatible with "
                "java.text.SimpleDateFormat.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        parsed = self.config().parse(props)
        self.topic_format: str = parsed[TOPIC_FORMAT]
        self.formatter = java_date_format(parsed[TIMESTAMP_FORMAT])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataError(f"{self.KAFKA_NAME}: Timestamp missing on record: topic {record.topic}")
        when = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
            milliseconds=record.timestamp
        )
        topic = self.topic_format.replace("${topic}", record.topic).replace(
            "${timestamp}", self.formatter(when)
        )
        return record.with_(topic=topic)

    def close(self) -> None:
        pass


_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


def java_regex(pattern: str, key: str = REGEX) -> re.Pattern[str]:
    try:
        return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as exc:
        raise invalid(key, pattern, f"not a valid regular expression: {exc}") from None


def java_replacement(replacement: str, key: str = REPLACEMENT) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.appendReplacement`` syntax: ``$n``, ``${name}``, ``\\x`` for x."""
    parts: list[Callable[[re.Match[str]], str]] = []
    i = 0
    literal: list[str] = []

    def flush() -> None:
        if literal:
            text = "".join(literal)
            parts.append(lambda m: text)
            literal.clear()

    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 >= len(replacement):
                raise invalid(key, replacement, "character to be escaped is missing")
            literal.append(replacement[i + 1])
            i += 2
        elif c == "$":
            if i + 1 >= len(replacement):
                raise invalid(key, replacement, "Illegal group reference: group index is missing")
            if replacement[i + 1] == "{":
                end = replacement.find("}", i + 2)
                if end == -1:
                    raise invalid(key, replacement, "named capturing group is missing trailing '}'")
                name = replacement[i + 2 : end]
                flush()
                parts.append(lambda m, n=name: m.group(n) or "")
                i = end + 1
            elif replacement[i + 1].isdigit():
                j = i + 1
                while j < len(replacement) and replacement[j].isdigit():
                    j += 1
                digits = replacement[i + 1 : j]
                flush()
                parts.append(lambda m, d=digits: _numbered(m, d))
                i = j
            else:
                raise invalid(key, replacement, "Illegal group reference")
        else:
            literal.append(c)
            i += 1
    flush()
    return lambda m: "".join(p(m) for p in parts)


def _numbered(m: re.Match[str], digits: str) -> str:
    """Java takes as many digits as still name an existing group; the rest are literal."""
    n = int(digits[0])
    used = 1
    while used < len(digits) and n * 10 + int(digits[used]) <= m.re.groups:
        n = n * 10 + int(digits[used])
        used += 1
    if n > m.re.groups:
        raise DataError(f"No group {n} in the regex {m.re.pattern!r}")
    return (m.group(n) or "") + digits[used:]


class RegexRouter:
    KAFKA_NAME = "org.apache.kafka.connect.transforms.RegexRouter"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                REGEX,
                ConfigType.STRING,
                importance=Importance.HIGH,
                validator=lambda name, value: java_regex(value, name),
                documentation="Regular expression to use for matching.",
            )
            .define(
                REPLACEMENT,
                ConfigType.STRING,
                importance=Importance.HIGH,
                documentation="Replacement string.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        parsed = self.config().parse(props)
        self.regex = java_regex(parsed[REGEX])
        self.replace = java_replacement(parsed[REPLACEMENT])
        for number in re.findall(r"\$(\d)", parsed[REPLACEMENT]):
            if int(number) > self.regex.groups:
                raise ConfigException(
                    REPLACEMENT,
                    f"Invalid value {parsed[REPLACEMENT]} for configuration {REPLACEMENT}: "
                    f"No group {number} in the regex {parsed[REGEX]}",
                )

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        return record.with_(topic=self.replace(m))

    def close(self) -> None:
        pass
