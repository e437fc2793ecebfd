"""JdbcSource's database access outside the task's polling: engines, reflecting tables, and the
checks validation runs against the database (the connection part shared with JdbcSink)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import Password
from eosconnect.api.errors import ConfigException
from eosconnect.connectors.jdbc.config import CONFIG_DEF, Mode, cross_field_errors, table_names

__all__ = [
    "VALIDATION_CONNECT_TIMEOUT_S",
    "check_config",
    "connection_errors",
    "connection_lost",
    "create_engine_for",
    "database_errors",
    "reflect_table",
    "safe_url",
    "sqlite_file",
]

#: Seconds validation waits for a database to answer a connection: without it, validating a URL
#: at a port that never answers (not a database) took the driver's default, over two minutes.
VALIDATION_CONNECT_TIMEOUT_S = 10


def create_engine_for(values: Mapping[str, Any], connect_timeout_s: int | None = None) -> Any:
    """An SQLAlchemy engine for the parsed settings (user/password settings override the URL's);
    `connect_timeout_s` bounds connecting where the driver takes a timeout (PostgreSQL, MySQL).

    PyMySQL's `connect_timeout` bounds only the TCP connect: a port that accepts and then says
    nothing held it for ever in the server greeting, so its reads are bounded the same way."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    url = make_url(values["connection.url"])
    if values.get("connection.user"):
        url = url.set(username=values["connection.user"])
    password = values.get("connection.password")
    if isinstance(password, Password) and password.value:
        url = url.set(password=password.value)
    connect_args: dict[str, Any] = {}
    if connect_timeout_s is not None and url.get_backend_name() in ("postgresql", "mysql", "mariadb"):
        connect_args["connect_timeout"] = connect_timeout_s
        if url.get_driver_name() == "pymysql":
            connect_args["read_timeout"] = connect_timeout_s
            connect_args["write_timeout"] = connect_timeout_s
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def connection_lost(exc: Any) -> bool:
    """Whether a SQLAlchemy `DBAPIError` means the connection is gone (worth a retry on a new one),
    whatever the driver called it: an OperationalError, or any error after which SQLAlchemy found
    the connection closed (psycopg reports PostgreSQL ending a session idle in its transaction,
    `idle_in_transaction_session_timeout`, as an InternalError: IdleInTransactionSessionTimeout)."""
    from sqlalchemy.exc import OperationalError

    return isinstance(exc, OperationalError) or bool(getattr(exc, "connection_invalidated", False))


def sqlite_file(url_text: str) -> str | None:
    """The file a `sqlite:///<path>` URL names (None: not SQLite, or an in-memory database)."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(url_text)
    except Exception:
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return url.database


def safe_url(values: Mapping[str, Any]) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(values["connection.url"]).render_as_string(hide_password=True)
    except Exception:
        return "<invalid url>"


def _split_table(name: str) -> tuple[str | None, str]:
    schema, dot, table = name.rpartition(".")
    return (schema, table) if dot else (None, name)


def reflect_table(engine: Any, name: str) -> Any:
    from sqlalchemy import MetaData, Table

    schema, table = _split_table(name)
    return Table(table, MetaData(), autoload_with=engine, schema=schema)


def connection_errors(values: Mapping[str, Any], *, new_sqlite_file_ok: bool = False) -> dict[str, list[str]]:
    """Whether the connection settings reach the database (shared with JdbcSink): {} if so.

    Validation never creates the SQLite file a config names: a missing one is an error, or, with
    `new_sqlite_file_ok` (a sink, whose task creates it), fine when its directory exists."""
    from sqlalchemy.exc import SQLAlchemyError

    database_file = sqlite_file(values["connection.url"])
    if database_file is not None and not os.path.isfile(database_file):
        if not new_sqlite_file_ok:
            return {"connection.url": [f"the SQLite database file {database_file} does not exist"]}
        if not os.path.isdir(os.path.dirname(os.path.abspath(database_file))):
            return {
                "connection.url": [
                    f"cannot connect to {safe_url(values)}: the directory of the SQLite database file "
                    f"{database_file} does not exist"
                ]
            }
        return {}
    try:
        engine = create_engine_for(values, connect_timeout_s=VALIDATION_CONNECT_TIMEOUT_S)
    except Exception as exc:
        return {"connection.url": [f"cannot create a database engine for {safe_url(values)}: {exc}"]}
    began = time.monotonic()
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        reason = str(exc).splitlines()[0]
        if _timed_out(reason, time.monotonic() - began):
            reason = (
                f"no answer within the {VALIDATION_CONNECT_TIMEOUT_S} s connect timeout of validation "
                f"(is a database listening at that address?): {reason}"
            )
        return {"connection.url": [f"cannot connect to {safe_url(values)}: {reason}"]}
    finally:
        engine.dispose()
    return {}


def _timed_out(reason: str, elapsed_s: float) -> bool:
    """Whether a failed connect gave up on a silent peer (the drivers word it differently)."""
    text = reason.lower()
    return "timeout" in text or "timed out" in text or elapsed_s >= 0.8 * VALIDATION_CONNECT_TIMEOUT_S


def database_errors(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Connect, and check that every table and the mode's columns exist."""
    from sqlalchemy import types as sqltypes
    from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

    errors = connection_errors(values)
    if errors:
        return errors
    engine = create_engine_for(values, connect_timeout_s=VALIDATION_CONNECT_TIMEOUT_S)
    try:
        mode = Mode(values["mode"])
        for name in table_names(values):
            try:
                table = reflect_table(engine, name)
            except NoSuchTableError:
                errors.setdefault("tables", []).append(
                    f"table {name!r} does not exist in {safe_url(values)}. "
                    "Create it or remove it from tables."
                )
                continue
            except SQLAlchemyError as exc:
                errors.setdefault("tables", []).append(f"cannot read table {name!r}: {exc}")
                continue
            columns = [c.name for c in table.columns]
            for setting, used in (
                (
                    "incrementing.column.name",
                    mode.uses_incrementing or bool(values["incrementing.column.name"]),
                ),
                ("timestamp.column.name", mode.uses_timestamp),
            ):
                column = values[setting]
                if not used or not column:
                    continue
                if column not in table.columns:
                    errors.setdefault(setting, []).append(
                        f"table {name!r} has no column {column!r} (its columns: {', '.join(columns)}). "
                        f"Set {setting} to one of them."
                    )
                elif setting == "incrementing.column.name" and not isinstance(
                    table.columns[column].type, sqltypes.Integer | sqltypes.Numeric
                ):
                    errors.setdefault(setting, []).append(
                        f"column {column!r} of table {name!r} is {table.columns[column].type}, not an "
                        "integer column; the incrementing column must be a strictly increasing number."
                    )
    finally:
        engine.dispose()
    return errors


def check_config(config: Mapping[str, str], *, database: bool = True) -> dict[str, Any]:
    """Parse and check a JdbcSource config; raise one `ConfigException` naming every bad setting."""
    values = CONFIG_DEF.parse(config)
    errors = cross_field_errors(values)
    if not errors and database:
        errors = database_errors(values)
    if errors:
        raise ConfigException(errors=errors)
    return values
