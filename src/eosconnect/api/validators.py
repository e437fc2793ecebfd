"""Validators for `ConfigDef.define(..., validator=...)`.

A built-in `Validator` knows what it expects, not just whether a value passes, so `ConfigDef` can
turn a failure into "must be an integer >= 1, got '0'. Set tasks.max to a whole number such as 1."
instead of a bare "invalid value". Plain callables `(name, value) -> None` that raise `ValueError`
are accepted too, for checks that only have a message to give.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from eosconnect.api.errors import ConfigException

__all__ = [
    "CallableValidator",
    "NonEmptyString",
    "Range",
    "ValidList",
    "ValidRegex",
    "ValidString",
    "Validator",
    "ValidatorLike",
]


class Validator(ABC):
    """A check on a parsed (already typed) config value that can describe what it wants."""

    @abstractmethod
    def is_valid(self, value: Any) -> bool:
        """Whether the typed value passes. Never called with None (unset optional settings)."""

    @abstractmethod
    def expectation(self, type_phrase: str) -> str:
        """What a valid value is, completing "must be ...", e.g. "an integer >= 1".

        `type_phrase` is the config type's own wording ("an integer"), to build on or replace.
        """

    def example(self) -> Any | None:
        """A valid value to suggest in error messages, if there is an obvious one."""
        return None

    def suggestion(self) -> str | None:
        """A full replacement for the "Set x to ..." advice; None lets the config type phrase it."""
        return None

    def recommended_values(self) -> list[Any]:
        """The closed set of valid values, for UIs and REST validation (empty when open-ended)."""
        return []

    def __call__(self, name: str, value: Any) -> None:
        """Kafka's `ensureValid`: lets a validator be used on its own, outside a `ConfigDef`."""
        if value is not None and not self.is_valid(value):
            raise ConfigException.for_field(name, f"must be {self.expectation('a value')}, got {value!r}.")

    @staticmethod
    def of(check: Callable[[Any], bool], expectation: str, example: Any | None = None) -> CallableValidator:
        """Wrap a predicate, e.g. `Validator.of(lambda v: v % 2 == 0, "an even number", 2)`."""
        return CallableValidator(check, expectation, example)


ValidatorLike: TypeAlias = Validator | Callable[[str, Any], None]
"""A `Validator`, or any callable `(name, value)` that raises `ValueError` with the problem."""


@dataclass(frozen=True)
class Range(Validator):
    """Numeric bounds, inclusive at both ends (either may be open)."""

    min: int | float | None = None
    max: int | float | None = None

    @classmethod
    def at_least(cls, minimum: int | float) -> Range:
        return cls(min=minimum)

    @classmethod
    def at_most(cls, maximum: int | float) -> Range:
        return cls(max=maximum)

    @classmethod
    def between(cls, minimum: int | float, maximum: int | float) -> Range:
        if minimum > maximum:
            raise ValueError(f"Range.between({minimum}, {maximum}): the minimum is above the maximum")
        return cls(min=minimum, max=maximum)

    def is_valid(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def expectation(self, type_phrase: str) -> str:
        if self.min is not None and self.max is not None:
            return f"{type_phrase} between {self.min} and {self.max}"
        if self.min is not None:
            return f"{type_phrase} >= {self.min}"
        if self.max is not None:
            return f"{type_phrase} <= {self.max}"
        return type_phrase

    def example(self) -> Any | None:
        return self.min if self.min is not None else self.max


@dataclass(frozen=True, init=False)
class ValidString(Validator):
    """The value must be one of a fixed set of strings (Kafka's `ValidString.in`)."""

    values: tuple[str, ...]
    case_sensitive: bool = True

    def __init__(self, values: Iterable[str], case_sensitive: bool = True) -> None:
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "case_sensitive", case_sensitive)
        if not self.values:
            raise ValueError("ValidString needs at least one allowed value")

    @classmethod
    def in_(cls, *values: str, case_sensitive: bool = True) -> ValidString:
        return cls(values, case_sensitive=case_sensitive)

    def is_valid(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if self.case_sensitive:
            return value in self.values
        return value.lower() in {v.lower() for v in self.values}

    def expectation(self, type_phrase: str) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def example(self) -> Any | None:
        return self.values[0]

    def suggestion(self) -> str | None:
        return "one of " + ", ".join(self.values)

    def recommended_values(self) -> list[Any]:
        return list(self.values)


@dataclass(frozen=True, init=False)
class ValidList(Validator):
    """Every item of a LIST value must be one of a fixed set of strings (Kafka's `ValidList.in`)."""

    values: tuple[str, ...]

    def __init__(self, values: Iterable[str]) -> None:
        object.__setattr__(self, "values", tuple(values))

    @classmethod
    def in_(cls, *values: str) -> ValidList:
        return cls(values)

    def is_valid(self, value: Any) -> bool:
        return isinstance(value, list) and all(item in self.values for item in value)

    def expectation(self, type_phrase: str) -> str:
        return "a comma-separated list of values from " + ", ".join(repr(v) for v in self.values)

    def suggestion(self) -> str | None:
        return "a comma-separated list of values from " + ", ".join(self.values)

    def recommended_values(self) -> list[Any]:
        return list(self.values)


class NonEmptyString(Validator):
    """The value must contain something other than whitespace."""

    def is_valid(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value.strip())

    def expectation(self, type_phrase: str) -> str:
        return "a non-empty string"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NonEmptyString)

    def __hash__(self) -> int:
        return hash(NonEmptyString)


class ValidRegex(Validator):
    """The value must compile as a Python regular expression."""

    def is_valid(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            re.compile(value)
        except re.error:
            return False
        return True

    def expectation(self, type_phrase: str) -> str:
        return "a valid regular expression"

    def suggestion(self) -> str | None:
        return "a Python regular expression such as orders-.*"


@dataclass(frozen=True)
class CallableValidator(Validator):
    """A predicate plus the words to describe it; made by `Validator.of`."""

    check: Callable[[Any], bool]
    wanted: str
    example_value: Any | None = None

    def is_valid(self, value: Any) -> bool:
        try:
            return bool(self.check(value))
        except (TypeError, ValueError):
            return False

    def expectation(self, type_phrase: str) -> str:
        return self.wanted

    def example(self) -> Any | None:
        return self.example_value
