"""Java regular expressions (what Kafka's RegexRouter and TopicNameMatches take) for Python's `re`.

The two dialects agree on nearly everything users write; the differences that come up in connector
configs are named groups, `(?<name>...)` and `\\k<name>` in Java, and the replacement syntax, `$1`,
`${name}` and `\\$` in Java. Both are translated here, so a config copied from a Java worker routes the same.
"""

from __future__ import annotations

import re
from typing import Any

from eosconnect.api.validators import Validator

_REPLACEMENT = re.compile(r"\\(.)|\$(\d+|\{(\w+)\})")


def java_pattern(pattern: str) -> str:
    """`pattern` with Java's named groups and named back-references in Python's syntax."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            named = re.match(r"\\k<(\w+)>", pattern[i:])
            if named and not in_class:
                out.append(f"(?P={named.group(1)})")
                i += len(named.group(0))
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif not in_class and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
            continue
        out.append(char)
        i += 1
    return "".join(out)


def compile_java(pattern: str) -> re.Pattern[str]:
    return re.compile(java_pattern(pattern))


def java_replacement(replacement: str) -> str:
    """Java's `Matcher.replaceFirst` replacement (`$1`, `${name}`, `\\$`) in Python's `re` syntax."""

    def convert(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1).replace("\\", "\\\\")
        return f"\\g<{match.group(3) or match.group(2)}>"

    return _REPLACEMENT.sub(convert, replacement)


class ValidJavaRegex(Validator):
    """The value must compile as a Java regular expression (as translated by `java_pattern`)."""

    def is_valid(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            compile_java(value)
        except re.error:
            return False
        return True

    def expectation(self, type_phrase: str) -> str:
        return "a valid regular expression"

    def suggestion(self) -> str | None:
        return "a Java regular expression such as orders-.*"
