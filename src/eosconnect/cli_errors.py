"""Errors on the command line: one line on stderr, an exit status, and the traceback only on request.

Every `eosconnect` command (the worker, `mirror-maker`, the REST client, `verify`, `topics`, `kafka`)
runs under `CliGroup`, the Typer group class that catches what a command lets escape and turns it
into one line, so no command needs a try/except of its own:

- `UserError` (raise it anywhere, with the setting or file named and the fix) and the library
  errors that mean the same (a `ConfigException`, a file that cannot be read, bad JSON, a REST
  error answer) print `Error: <message>` and exit with status 2 (1 for a request the server
  refused, as the REST client has always done);
- anything else is a bug: one line naming the exception, exit status 1.

`--debug` anywhere on the command line (or `EOSCONNECT_DEBUG=1`) prints the traceback as well, and
the traceback is always logged at DEBUG level, so a worker run with `--log-level DEBUG` has it in
its log.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
import typer.core

__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "CliGroup",
    "OperationFailed",
    "PlainHelpCommand",
    "UserError",
    "describe_error",
    "error_text",
]

log = logging.getLogger("eosconnect.cli")

#: A mistake in what the user gave: a setting, a file, an option, an address.
EXIT_USAGE = 2
#: The operation failed: a server refused the request, or an unexpected error.
EXIT_FAILED = 1
DEBUG_FLAG = "--debug"
#: Click's own exception base (usage errors and the like print themselves), as Typer ships it.
_CLICK_EXCEPTION: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)
_PASS_THROUGH = (typer.Exit, typer.Abort, _CLICK_EXCEPTION, KeyboardInterrupt)


#: How a nested KafkaError prints: `KafkaError{code=X,val=N,str="..."}`.
_KAFKA_ERROR = re.compile(r'KafkaError\{code=[^,{}]*,val=-?\d+,str="([^"]*)"\}')


class UserError(Exception):
    """A mistake the user can fix: the message names what is wrong and the fix, in one line."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class OperationFailed(Exception):
    """An operation failed and the error's text already says what and why (a REST client's non-2xx
    answer, say): printed as it is, exit 1. Errors of the layers above subclass it, so this module
    needs to know none of them."""


def _debug_requested() -> bool:
    return os.environ.get("EOSCONNECT_DEBUG", "").strip().lower() in ("1", "true", "yes")


def error_text(exc: BaseException) -> str:
    """An exception's message on one line; Kafka client errors as their texts
    (`KafkaError{code=..., str="topic 'x': KafkaError{..., str="Broker: Unknown topic"}"}` becomes
    "topic 'x': Broker: Unknown topic")."""
    from confluent_kafka import KafkaError, KafkaException

    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    text = error.str() if isinstance(error, KafkaError) else str(exc)
    while (plain := _KAFKA_ERROR.sub(r"\1", text)) != text:  # innermost first
        text = plain
    return " ".join(line.strip() for line in text.strip().splitlines())


def describe_error(exc: BaseException) -> tuple[str, int]:
    """The one line to print for `exc` and the exit status."""
    from confluent_kafka import KafkaException

    from eosconnect.api.errors import ConfigException

    if isinstance(exc, UserError):
        return str(exc), exc.exit_code
    if isinstance(exc, OperationFailed):
        return str(exc), EXIT_FAILED
    if isinstance(exc, KafkaException):
        return f"Kafka: {error_text(exc)}", EXIT_FAILED
    if isinstance(exc, ConfigException):
        return " ".join(line.strip() for line in str(exc).splitlines()), EXIT_USAGE
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc}", EXIT_USAGE
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", EXIT_USAGE
    first = (str(exc).strip().splitlines() or [""])[0]
    return (
        f"unexpected {type(exc).__name__}: {first} (run again with {DEBUG_FLAG} for the traceback)",
        EXIT_FAILED,
    )


class CliGroup(typer.core.TyperGroup):
    """Typer's group, with errors reported as one line (see the module's docstring)."""

    debug = False

    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if DEBUG_FLAG in argv:
            CliGroup.debug = True
            argv.remove(DEBUG_FLAG)
        return super().main(argv, *rest, **kwargs)

    # Typer passes its own Context; the base class declares Click's, which newer Typer vendors privately
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            message, code = describe_error(exc)
            log.debug("the command failed", exc_info=True)
            if CliGroup.debug or _debug_requested():
                traceback.print_exc(file=sys.stderr)
            one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
            typer.secho(f"Error: {one_line}", err=True, fg="red")
            raise typer.Exit(code) from None


class PlainHelpCommand(typer.core.TyperCommand):
    """A command whose `--help` is click's plain text: for commands with many options, whose names
    Typer's rich panel cuts short (`--records-per-t…`) in an 80-column terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None
