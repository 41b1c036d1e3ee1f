"""``ssl.principal.mapping.rules``: a client certificate's distinguished name to a user name, as
Kafka's ``SslPrincipalMapper`` (KIP-371).

Rules are separated by commas and tried in order; the first that applies gives the name, and a
name no rule applies to is an error (``NoMatchingRule``: Kafka fails the connection's
authentication). A rule is ``DEFAULT`` (the distinguished name as it is, RFC 2253 as Java's
``X500Principal.getName()`` prints it) or ``RULE:pattern/replacement/`` with an optional ``L``
or ``U`` after the last slash to lower- or upper-case the result; a ``/`` or ``\\`` inside the
pattern or the replacement is escaped with ``\\``. A RULE applies when its pattern matches the
whole name; the result is the name with every match of the pattern replaced (Java's
``replaceAll``), ``$1`` ... naming the pattern's groups (a ``$n`` past the last group stays
literal, as Kafka escapes it). Patterns are Python regular expressions, which agree with Java's
for what such rules use (groups, classes, quantifiers, anchors).

Example: ``RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`` maps
``CN=alice,OU=ServiceUsers,O=Example`` to ``alice`` and any other name to itself.

Pure: values and functions, any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NoMatchingRule", "PrincipalMapper", "Rule", "parse_rules"]

# Kafka's RULE_PATTERN and RULE_SPLITTER, as they are.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    """No rule applies to a distinguished name."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule; ``pattern`` None is DEFAULT."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when this rule does not apply."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        result = self.pattern.sub(self._python_replacement(), distinguished_name)
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def _python_replacement(self) -> str:
        """Java's replacement syntax (``$n``, ``\\x`` for a literal x) in ``re.sub``'s."""
        groups = self.pattern.groups if self.pattern is not None else 0
        out: list[str] = []
        i, text = 0, self.replacement
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1].replace("\\", "\\\\"))
                i += 2
                continue
            match = _BACK_REFERENCE.match(text, i) if c == "$" else None
            if match is not None and int(match[1]) <= groups:
                out.append(f"\\g<{int(match[1])}>")
                i = match.end()
                continue
            out.append("\\\\" if c == "\\" else c)
            i += 1
        return "".join(out)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "L" if self.to_lower_case else "U" if self.to_upper_case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{case}"


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``ssl.principal.mapping.rules``; ``ValueError`` names an invalid one."""
    rules: list[Rule] = []
    for match in _SPLITTER.finditer(text.strip()):
        rule = match[1]
        parsed = _PARSER.match(rule)
        if parsed is None:
            raise ValueError(f"Invalid rule: {rule}")
        if parsed.end() != len(rule):
            raise ValueError(
                f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end() :]}`"
            )
        if parsed[1] is not None:
            rules.append(Rule())
        elif parsed[2] is not None:
            try:
                pattern = re.compile(parsed[2])
            except re.error as e:
                raise ValueError(f"Invalid rule: `{rule}`: {e}") from e
            rules.append(Rule(pattern, parsed[4], parsed[6] == "L", parsed[6] == "U"))
        elif parsed[7]:
            raise ValueError(f"Invalid rule: `{rule}`")  # neither DEFAULT nor RULE:...
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    rules: tuple[Rule, ...]

    @classmethod
    def from_rules(cls, text: str) -> PrincipalMapper:
        return cls(parse_rules(text))

    def name(self, distinguished_name: str) -> str:
        """The user name of ``distinguished_name``; raises ``NoMatchingRule``."""
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(
            f"No rules apply to {distinguished_name}, rules [{', '.join(map(str, self.rules))}]"
        )
