"""Config definitions: what settings a connector, transformation or converter accepts.

Connector configs arrive as `dict[str, str]` (from REST or a properties file). A `ConfigDef`
turns them into typed values, fills defaults, and reports *every* bad setting at once with the
setting's name and how to fix it, because operators fix configs by reading error messages. The
same definition drives REST validation (`validate`, Kafka's ConfigInfos) and docs (`describe`).
Settings the definition does not know are passed through untouched: connectors share one config
map with the runtime (`tasks.max`, `transforms.*`, converter settings, ...).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, ClassVar, Final, cast

from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import Validator, ValidatorLike

__all__ = [
    "NO_DEFAULT",
    "ConfigDef",
    "ConfigKey",
    "ConfigKeyInfo",
    "ConfigType",
    "ConfigValue",
    "Importance",
    "Password",
]


class ConfigType(StrEnum):
    """Kafka Connect's config types; the string values are what the REST API reports."""

    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class _NoDefault(Enum):
    NO_DEFAULT = "NO_DEFAULT"

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault.NO_DEFAULT
"""Marks a setting as required: parsing fails when it is missing."""


class Password:
    """A secret setting. It prints as `[hidden]` so it never leaks into logs, errors or REST output."""

    __slots__ = ("value",)
    HIDDEN: ClassVar[str] = "[hidden]"

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Password({self.HIDDEN!r})"

    def __str__(self) -> str:
        return self.HIDDEN

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash((Password, self.value))


_INT_RE = re.compile(r"[+-]?\d+")
_INT_BOUNDS = {ConfigType.INT: (-(2**31), 2**31 - 1), ConfigType.LONG: (-(2**63), 2**63 - 1)}
_LIST_SPLIT = re.compile(r"\s*,\s*")

_TYPE_PHRASES: Final = {
    ConfigType.STRING: "a string",
    ConfigType.INT: "an integer",
    ConfigType.LONG: "an integer",
    ConfigType.DOUBLE: "a number",
    ConfigType.BOOLEAN: "true or false",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.CLASS: "a class name",
    ConfigType.PASSWORD: "a password string",
}


class _BadType(Exception):
    """Internal: the raw value cannot be read as the setting's type."""


def _parse_type(config_type: ConfigType, value: Any) -> Any:
    """Kafka's `ConfigDef.parseType`: strings are trimmed, then read as the type."""
    text = value.strip() if isinstance(value, str) else None
    match config_type:
        case ConfigType.STRING:
            if text is None:
                raise _BadType
            return text
        case ConfigType.PASSWORD:
            if isinstance(value, Password):
                return value
            if text is None:
                raise _BadType
            return Password(text)
        case ConfigType.INT | ConfigType.LONG:
            if text is not None and _INT_RE.fullmatch(text):
                number = int(text)
            elif isinstance(value, int) and not isinstance(value, bool):
                number = value
            else:
                raise _BadType
            low, high = _INT_BOUNDS[config_type]
            if not low <= number <= high:
                raise _BadType
            return number
        case ConfigType.DOUBLE:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            if not text:
                raise _BadType
            try:
                return float(text)
            except ValueError:
                raise _BadType from None
        case ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise _BadType
        case ConfigType.LIST:
            if isinstance(value, list | tuple):
                return list(value)
            if text is None:
                raise _BadType
            return _LIST_SPLIT.split(text) if text else []
        case ConfigType.CLASS:
            if isinstance(value, type):
                return f"{value.__module__}.{value.__qualname__}"
            if not text or any(ch.isspace() for ch in text):
                raise _BadType
            return text
    raise AssertionError(config_type)  # pragma: no cover


def _to_string(value: Any) -> str | None:
    """A typed value as it would be written in a properties file (used for REST and docs)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def _show(raw: Any, config_type: ConfigType) -> str:
    """The offending value for an error message; secrets are never echoed."""
    if config_type is ConfigType.PASSWORD or isinstance(raw, Password):
        return repr(Password.HIDDEN)
    return repr(raw)


def _raw_for_display(raw: Any, config_type: ConfigType) -> Any:
    if config_type is ConfigType.PASSWORD and isinstance(raw, str):
        return Password(raw)
    return raw


@dataclass(frozen=True)
class ConfigKey:
    """One defined setting."""

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    documentation: str
    validator: ValidatorLike | None
    group: str | None = None
    display_name: str | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def expectation(self) -> str:
        phrase = _TYPE_PHRASES[self.type]
        return self.validator.expectation(phrase) if isinstance(self.validator, Validator) else phrase

    def suggestion(self) -> str:
        """How to phrase the fix after "Set <name> to ..."."""
        validator = self.validator if isinstance(self.validator, Validator) else None
        if validator is not None and (text := validator.suggestion()) is not None:
            return text
        example = validator.example() if validator is not None else None
        if example is None and self.default not in (NO_DEFAULT, None, []):
            example = _to_string(self.default)
        match self.type:
            case ConfigType.INT | ConfigType.LONG:
                return f"a whole number such as {example if example is not None else 1}"
            case ConfigType.DOUBLE:
                return f"a number such as {example if example is not None else 1.0}"
            case ConfigType.BOOLEAN:
                return "true or false"
            case ConfigType.LIST:
                return f"a comma-separated list such as {example if example is not None else 'a,b'}"
            case ConfigType.CLASS:
                return (
                    f"a class name such as {example if example is not None else 'mypackage.module.MyClass'}"
                )
            case ConfigType.PASSWORD:
                return "the secret value"
        if validator is not None:
            return validator.expectation("a string")
        return f"a string such as {example!r}" if example is not None else "a string"

    def recommended_values(self) -> list[Any]:
        return self.validator.recommended_values() if isinstance(self.validator, Validator) else []


@dataclass
class ConfigValue:
    """The validation result for one setting; the shape of Kafka Connect's REST `ConfigValueInfo`."""

    name: str
    value: Any
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True


@dataclass(frozen=True)
class ConfigKeyInfo:
    """A setting's definition as docs and the REST API show it (Kafka's `ConfigKeyInfo`)."""

    name: str
    type: ConfigType
    default_value: str | None
    required: bool
    importance: Importance
    documentation: str
    group: str | None
    display_name: str
    recommended_values: list[Any]


class ConfigDef:
    """A set of setting definitions, built with chained `define` calls.

    Example::

        CONFIG = (
            ConfigDef()
            .define("topic", ConfigType.STRING, importance=Importance.HIGH, documentation="Where to write.")
            .define("batch.size", ConfigType.INT, 100, validator=Range.between(1, 10_000))
        )
        settings = CONFIG.parse(props)   # raises ConfigException naming every bad setting
    """

    def __init__(self, base: ConfigDef | None = None) -> None:
        self._keys: dict[str, ConfigKey] = dict(base._keys) if base is not None else {}

    def define(
        self,
        name: str,
        type: ConfigType | str,
        default: Any = NO_DEFAULT,
        importance: Importance | str = Importance.MEDIUM,
        documentation: str = "",
        validator: ValidatorLike | type[Validator] | None = None,
        *,
        group: str | None = None,
        display_name: str | None = None,
    ) -> ConfigDef:
        """Add a setting and return `self` so definitions chain.

        The default is parsed and validated here, so a broken definition fails when the connector
        module is imported rather than when an operator first leaves the setting out.
        """
        if name in self._keys:
            raise ValueError(f"config {name!r} is defined twice")
        config_type = ConfigType(type.upper()) if isinstance(type, str) else ConfigType(type)
        if not isinstance(importance, Importance | str):
            raise TypeError(
                f"define({name!r}): importance must be an Importance, got {importance!r}; note the argument "
                "order is (name, type, default, importance, documentation, validator)"
            )
        if not isinstance(documentation, str):
            raise TypeError(f"define({name!r}): documentation must be a str, got {documentation!r}")
        checker: ValidatorLike | None
        if inspect.isclass(validator) and issubclass(validator, Validator):
            checker = validator()
        elif validator is None or callable(validator):
            checker = cast("ValidatorLike | None", validator)
        else:
            raise TypeError(
                f"define({name!r}): validator must be a Validator or a callable, got {validator!r}"
            )
        key = ConfigKey(
            name=name,
            type=config_type,
            default=NO_DEFAULT,
            importance=Importance(importance.upper()) if isinstance(importance, str) else importance,
            documentation=documentation,
            validator=checker,
            group=group,
            display_name=display_name,
        )
        if default is None:
            key = dataclasses.replace(key, default=None)
        elif default is not NO_DEFAULT:
            parsed, errors = self._evaluate_key(key, default, name)
            if errors:
                raise ConfigException(f"invalid default for {name!r}: {errors[0]}")
            key = dataclasses.replace(key, default=parsed)
        self._keys[name] = key
        return self

    # -- introspection -------------------------------------------------------------------------

    @property
    def keys(self) -> Mapping[str, ConfigKey]:
        return dict(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new definition with both sets of settings, e.g. the runtime's plus a connector's."""
        merged = ConfigDef(self)
        for key in other:
            if key.name in merged._keys and merged._keys[key.name] != key:
                raise ValueError(f"config {key.name!r} is defined differently in both ConfigDefs")
            merged._keys[key.name] = key
        return merged

    def describe(self) -> list[ConfigKeyInfo]:
        """Every setting's definition, in definition order."""
        return [
            ConfigKeyInfo(
                name=key.name,
                type=key.type,
                default_value=None if key.required else _to_string(key.default),
                required=key.required,
                importance=key.importance,
                documentation=key.documentation,
                group=key.group,
                display_name=key.display_name or key.name,
                recommended_values=key.recommended_values(),
            )
            for key in self._keys.values()
        ]

    # -- parsing -------------------------------------------------------------------------------

    def validate_then(
        self, props: Mapping[str, Any], cross_checks: Callable[[Mapping[str, Any]], Mapping[str, list[str]]]
    ) -> list[ConfigValue]:
        """`validate`, then, only if every setting is valid alone, `cross_checks(props)` (checks
        across settings, or against the system the connector talks to), whose errors are attached
        to the settings they name: what a connector's `validate` usually is."""
        results = self.validate(props)
        if any(r.errors for r in results):
            return results
        errors = cross_checks(props)
        for result in results:
            result.errors.extend(errors.get(result.name, []))
        return results

    def validate(self, props: Mapping[str, Any], *, prefix: str = "") -> list[ConfigValue]:
        """One `ConfigValue` per defined setting, with its problems in `errors` (never raises).

        `prefix` is prepended to names in the results and messages: a transformation's settings
        are validated as `transforms.<alias>.<name>` so the operator knows which line to change.
        """
        results = []
        for key in self._keys.values():
            full_name = prefix + key.name
            raw = props.get(key.name)
            value, errors = self._evaluate_key(key, raw, full_name)
            results.append(
                ConfigValue(
                    name=full_name,
                    value=value if not errors else _raw_for_display(raw, key.type),
                    recommended_values=key.recommended_values(),
                    errors=errors,
                )
            )
        return results

    def parse(self, props: Mapping[str, Any], *, prefix: str = "") -> dict[str, Any]:
        """Typed values for every defined setting (defaults filled) plus unknown settings as given.

        Raises `ConfigException` listing every invalid or missing setting at once.
        """
        results = self.validate(props, prefix=prefix)
        errors = {result.name: result.errors for result in results if result.errors}
        if errors:
            raise ConfigException(errors=errors)
        parsed = {key.name: result.value for key, result in zip(self._keys.values(), results, strict=True)}
        parsed.update((k, v) for k, v in props.items() if k not in self._keys)
        return parsed

    @staticmethod
    def _evaluate_key(key: ConfigKey, raw: Any, full_name: str) -> tuple[Any, list[str]]:
        if raw is None:
            if key.required:
                message = f"is required and has no default. Set {full_name} to {key.suggestion()}."
                if key.documentation:
                    message += f" About {full_name}: {key.documentation.strip()}"
                return None, [message]
            return key.default, []
        fix = f"Set {full_name} to {key.suggestion()}."
        try:
            value = _parse_type(key.type, raw)
        except _BadType:
            return None, [f"must be {key.expectation()}, got {_show(raw, key.type)}. {fix}"]
        if key.validator is None or value is None:
            return value, []
        if isinstance(key.validator, Validator):
            if key.validator.is_valid(value):
                return value, []
            return None, [f"must be {key.expectation()}, got {_show(raw, key.type)}. {fix}"]
        try:
            key.validator(full_name, value)
        except ConfigException as exc:
            messages = [m for msgs in exc.errors.values() for m in msgs] or [str(exc)]
            return None, messages
        except (ValueError, TypeError) as exc:
            return None, [str(exc) or f"{_show(raw, key.type)} is not accepted."]
        return value, []
