"""A task that failed on a database error says the database's words first (runtime/failure.py), not
SQLAlchemy's closing "(Background on this error at: https://sqlalche.me/...)" line."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from eosconnect.api.errors import ConnectException
from eosconnect.runtime.failure import failure_message, failure_trace


def refused_insert() -> sa.exc.DBAPIError:
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE events (k INTEGER PRIMARY KEY)")
            conn.exec_driver_sql("INSERT INTO events VALUES (1)")
            conn.exec_driver_sql("INSERT INTO events VALUES (?)", (1,))
    except sa.exc.DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("the insert must fail")


def test_the_trace_leads_with_the_database_message_and_the_statement() -> None:
    error = refused_insert()
    assert str(error).splitlines()[-1].startswith("(Background on this error at: https://sqlalche.me")
    trace = failure_trace(error)
    headline, _, rest = trace.partition("\n\n")
    assert headline == (
        "sqlite3.IntegrityError: UNIQUE constraint failed: events.k\n[SQL: INSERT INTO events VALUES (?)]"
    )
    assert "sqlalche.me" not in headline and "parameters" not in headline
    assert rest.startswith("Traceback (most recent call last):"), "the full traceback follows"
    assert failure_message(error) == headline


def test_an_error_that_wraps_one_and_quotes_the_database_leads_as_it_is() -> None:
    """JdbcSource's own message (what it was doing, the database's first line) already says it."""
    error = refused_insert()
    try:
        raise ConnectException(
            f"database error while polling table 'events': {str(error).splitlines()[0]}"
        ) from error
    except ConnectException as exc:
        wrapped = exc
    assert failure_message(wrapped).startswith(
        "ConnectException: database error while polling table 'events'"
    )
    assert "\ncaused by" not in failure_message(wrapped)
    try:
        raise ConnectException("writing the batch failed") from error
    except ConnectException as exc:
        vague = exc
    assert failure_message(vague) == (
        "ConnectException: writing the batch failed\ncaused by sqlite3.IntegrityError: UNIQUE constraint "
        "failed: events.k\n[SQL: INSERT INTO events VALUES (?)]"
    )


def test_other_errors_keep_their_traceback_and_message() -> None:
    with pytest.raises(ValueError) as raised:
        raise ValueError("boom")
    assert failure_trace(raised.value).startswith("Traceback (most recent call last):")
    assert failure_message(raised.value) == "boom"
