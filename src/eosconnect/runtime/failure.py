"""What a failed task's status trace and log line lead with.

A traceback ends with the exception's text, and readers take its first or last line (the CLI's
status table, a log search). For a database error raised through SQLAlchemy neither line says
anything: the text is the driver's message, the statement, every bound parameter (a whole batch
of rows) and, last, "(Background on this error at: https://sqlalche.me/...)". So the trace of a
task that failed on a database error starts with the database's own words and the statement,
then the full traceback; the log line says the same without the traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from typing import Any

__all__ = ["database_message", "failure_message", "failure_trace"]

#: The longest statement quoted (a multi-row INSERT can be megabytes).
STATEMENT_CHARS = 500


def failure_trace(exc: BaseException) -> str:
    """The status trace of a task that failed with `exc`: its traceback, after the database's message."""
    trace = "".join(traceback.format_exception(exc))
    headline = database_message(exc)
    return f"{headline}\n\n{trace}" if headline else trace


def failure_message(exc: BaseException) -> str:
    """The task's log line for `exc`: the database's message if a database refused, else the error."""
    return database_message(exc) or str(exc)


def database_message(exc: BaseException) -> str | None:
    """The database's words for the SQLAlchemy statement error in `exc` or behind it, with the
    statement; None when no database error is involved. An error that wraps one and already quotes
    the database (a connector's own message) leads as it is."""
    error = _statement_error(exc)
    if error is None:
        return None
    words = _database_words(error)
    if error is exc:
        return words
    outer = f"{type(exc).__name__}: {exc}"
    own = words.splitlines()[0].partition(": ")[2]
    return outer if own and own in outer else f"{outer}\ncaused by {words}"


def _statement_error(exc: BaseException) -> Any:
    errors = sys.modules.get("sqlalchemy.exc")  # not imported: no SQLAlchemy error can exist
    if errors is None:
        return None
    return next((e for e in _chain(exc) if isinstance(e, errors.StatementError)), None)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _database_words(error: Any) -> str:
    """ "<driver's exception class>: <its message>" and "[SQL: <statement>]", without the bound
    parameters (data, and possibly a whole batch) or SQLAlchemy's background link."""
    orig = error.orig
    if orig is not None:
        kind = type(orig)
        module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
        text = f"{module}{kind.__qualname__}: {str(orig).strip()}"
    else:  # raised by SQLAlchemy itself, before the driver had the statement
        text = f"{type(error).__name__}: {error.args[0] if error.args else ''}"
    statement = " ".join(str(error.statement or "").split())
    if statement:
        cut = statement if len(statement) <= STATEMENT_CHARS else statement[:STATEMENT_CHARS] + " ..."
        text += f"\n[SQL: {cut}]"
    return text
