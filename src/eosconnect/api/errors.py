"""Exceptions that connectors raise and the runtime understands.

The hierarchy mirrors Kafka Connect's so that operators and authors coming from Java recognise it,
and so the runtime can decide by type alone: a `RetriableException` from `poll()` or `put()` means
"call me again", anything else fails the task. `ConfigException` and `DataException` are also
`ValueError`s, because that is what they are to ordinary Python code (a bad value was passed in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "ConfigException",
    "ConnectException",
    "ConnectorClassNotFound",
    "DataException",
    "RetriableException",
    "TransactionRequestConflict",
]


class ConnectException(Exception):
    """Base of every error the runtime treats as a connector/task failure with a readable message."""


class RetriableException(ConnectException):
    """A transient failure: the runtime retries the same call instead of failing the task."""


class DataException(ConnectException, ValueError):
    """A record or value cannot be converted, transformed or stored as asked."""


class ConfigException(ConnectException, ValueError):
    """One or more configuration settings are wrong.

    `errors` maps each bad setting to its problems, so a REST validate call can attach them to the
    right field, while `str(exc)` lists every problem at once: fixing configs one error per attempt
    is the most common operator complaint about Kafka Connect.
    """

    def __init__(self, message: str | None = None, *, errors: Mapping[str, Sequence[str]] | None = None):
        self.errors: dict[str, list[str]] = {
            name: list(msgs) for name, msgs in (errors or {}).items() if msgs
        }
        super().__init__(message if message is not None else self.format_errors(self.errors))

    @classmethod
    def for_field(cls, name: str, problem: str) -> ConfigException:
        """An exception about a single setting, formatted like a multi-field one."""
        return cls(errors={name: [problem]})

    @staticmethod
    def format_errors(errors: Mapping[str, Sequence[str]]) -> str:
        lines = [f'"{name}": {msg}' for name, msgs in errors.items() for msg in msgs]
        if not lines:
            return "Invalid configuration."
        if len(lines) == 1:
            return f"Invalid configuration: {lines[0]}"
        header = f"Invalid configuration, {len(lines)} problems to fix:"
        return "\n  ".join([header, *lines])


class ConnectorClassNotFound(ConfigException):
    """`connector.class` names nothing that can be loaded (neither a short name nor a Python path)."""


class TransactionRequestConflict(ConnectException):
    """A task asked to both commit and abort the same transaction; the runtime must fail the task."""
