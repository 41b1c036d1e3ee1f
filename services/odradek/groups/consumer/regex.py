"""Subscriptions by regular expression: what is accepted, and the matching.

Kafka matches ``subscribed_topic_regex`` with RE2/J, whose time is linear in the topic name.
Python's ``re`` backtracks: ``(a+)+b`` against a long topic name of ``a``s would hold the
broker's event loop for ages. So a pattern is accepted only if it keeps matching time
polynomial and small:

- constructs RE2 does not have are refused, as Kafka refuses them: backreferences, lookaround,
  conditionals, atomic groups and possessive quantifiers;
- a repetition may not contain another repetition or an alternation (``(a+)+``, ``(a|aa)*``:
  exponential backtracking);
- at most ``MAX_UNBOUNDED`` unbounded repetitions (``.*`` & co.) in the whole pattern, at
  most ``MAX_PATTERN_CHARS`` characters and ``MAX_PARENTHESES`` "(" (escaped or not).

Everything else (anchors, classes, ``foo-.*``, ``(orders|payments)-[0-9]+``) is matched with
``re.fullmatch`` against every topic name not starting with ``__``. A refused pattern is
INVALID_REGULAR_EXPRESSION. Compiled patterns are cached. Pure functions.
"""

from __future__ import annotations

import functools
import re
from typing import Any

try:  # the parser behind re.compile: the one way to see a pattern's structure
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _parse  # type: ignore[attr-defined]
except ImportError:  # Python < 3.11
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _parse  # type: ignore[no-redef]

__all__ = [
    "MAX_PATTERN_CHARS",
    "MAX_UNBOUNDED",
    "MAX_PARENTHESES",
    "RegexError",
    "compile_subscription",
]

MAX_PATTERN_CHARS = 1000
MAX_UNBOUNDED = 4
MAX_PARENTHESES = 50

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT}
_REFUSED = {
    _sre.GROUPREF: "backreferences",
    _sre.GROUPREF_EXISTS: "conditionals",
    _sre.ASSERT: "lookarounds",
    _sre.ASSERT_NOT: "lookarounds",
}
for _name, _what in (("ATOMIC_GROUP", "atomic groups"), ("POSSESSIVE_REPEAT", "possessive")):
    if hasattr(_sre, _name):
        _REFUSED[getattr(_sre, _name)] = _what


class RegexError(ValueError):
    """A pattern that is not valid, or not accepted (see the module's rules)."""


@functools.lru_cache(maxsize=256)
def compile_subscription(pattern: str) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(f"longer than {MAX_PATTERN_CHARS} characters")
    if pattern.count("(") > MAX_PARENTHESES:  # bounds the parser's and _check's recursion
        raise RegexError(f"more than {MAX_PARENTHESES} parentheses")
    try:
        parsed = _parse.parse(pattern)
        compiled = re.compile(pattern)
    except re.error as e:
        raise RegexError(str(e)) from None
    unbounded = _check(list(parsed), inside_repeat=False)
    if unbounded > MAX_UNBOUNDED:
        raise RegexError(f"more than {MAX_UNBOUNDED} unbounded repetitions")
    return compiled


def _check(items: list[Any], *, inside_repeat: bool) -> int:
    """Refuse what the rules refuse; the number of unbounded repetitions."""
    unbounded = 0
    for op, arg in items:
        if op in _REFUSED:
            raise RegexError(f"not supported (RE2 has none): {_REFUSED[op]}")
        if op in _REPEATS:
            low, high, body = arg
            if inside_repeat and high != low:
                raise RegexError("nested repetitions are not supported")
            if high == _sre.MAXREPEAT:
                unbounded += 1
            unbounded += _check(list(body), inside_repeat=inside_repeat or high != low)
        elif op == _sre.BRANCH:
            if inside_repeat:
                raise RegexError("an alternation inside a repetition is not supported")
            for branch in arg[1]:
                unbounded += _check(list(branch), inside_repeat=inside_repeat)
        elif op == _sre.SUBPATTERN:
            unbounded += _check(list(arg[-1]), inside_repeat=inside_repeat)
    return unbounded
