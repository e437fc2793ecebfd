"""What differs between databases, in one place: the engine, SQL types and the write statements.

SQLAlchemy does most of it (type names, quoting, parameter styles); this module adds what the sink
needs on top. It knows nothing about Kafka, so it can move to a shared JDBC dialect package.

* `transactional_engine`: an engine whose transactions really lock: SQLite starts each with
  `BEGIN IMMEDIATE` (the write lock up front, so two writers serialize instead of failing at commit);
  PostgreSQL and MariaDB sessions end themselves after `idle.transaction.timeout.ms` idle inside a
  transaction, so a frozen task cannot hold the offsets rows' locks for ever.
* `Tables`: finds, creates (`auto.create`) and extends (`auto.evolve`) the target tables.
* `write_statement`: the bulk INSERT, upsert (INSERT .. ON CONFLICT / ON DUPLICATE KEY), UPDATE or
  DELETE for rows of one shape, run with executemany. Into PostgreSQL its parameters are untyped,
  so the server reads each as its column's type (as COPY does).

A column's type and how its values are written come from its schema: see `semantic`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import quoted_name

from eosconnect.api.data import Schema
from eosconnect.api.errors import ConnectException
from eosconnect.connectors.jdbc import create_engine_for
from eosconnect.connectors.jdbc_sink.semantic import column_type

__all__ = ["Tables", "transactional_engine", "write_statement"]

log = logging.getLogger(__name__)


def transactional_engine(values: Mapping[str, Any]) -> sa.Engine:
    """`create_engine_for` (shared with JdbcSource), with SQLite taking its write lock at BEGIN and
    the server ending a session left idle in a transaction (`idle.transaction.timeout.ms`).

    The timeout is the fence against a *frozen* task (SIGSTOP, a paused VM): stopped between two
    statements of its flush it holds the offsets rows' `FOR UPDATE` locks, and the successor's claim
    would wait for them as long as it stays frozen. The server ends such a session (its transaction
    rolls back, its locks go); when the task runs again its next statement fails, the flush's retry
    finds the partition claimed by the successor and leaves it out. MySQL has no such timeout (only
    MariaDB >= 10.3), SQLite none at all (a stopped process keeps the file's write lock)."""
    engine = create_engine_for(values)
    idle_ms = int(values.get("idle.transaction.timeout.ms") or 0)
    if idle_ms and engine.dialect.name == "postgresql":

        @sa.event.listens_for(engine, "connect")
        def _end_idle_transactions(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
            dbapi_connection.commit()

    elif idle_ms and engine.dialect.name in ("mysql", "mariadb"):

        @sa.event.listens_for(engine, "connect")
        def _end_idle_transactions_mariadb(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            try:  # MariaDB >= 10.3 only (whole seconds); MySQL has no such variable
                cursor.execute(f"SET SESSION idle_transaction_timeout = {max(1, -(-idle_ms // 1000))}")
            except Exception as exc:
                log.info("the database has no idle_transaction_timeout (MySQL?), not set: %s", exc)
            finally:
                cursor.close()

    if engine.dialect.name == "sqlite":

        @sa.event.listens_for(engine, "connect")
        def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # pysqlite's own BEGIN handling off: ours below

        @sa.event.listens_for(engine, "begin")
        def _begin_immediate(connection: sa.Connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _key_type(column_type: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    """A primary key column's type: MySQL/MariaDB cannot index TEXT or BLOB without a length, so
    there a string key is VARCHAR(256) and a bytes key VARBINARY(256), as Confluent's MySQL dialect."""
    if isinstance(column_type, sa.Text):
        return column_type.with_variant(sa.String(256), "mysql", "mariadb")
    if isinstance(column_type, sa.LargeBinary):
        return column_type.with_variant(sa.VARBINARY(256), "mysql", "mariadb")
    return column_type


def _split(name: str) -> tuple[str | None, str]:
    schema, dot, table = name.rpartition(".")
    return (schema, table) if dot else (None, name)


class Tables:
    """The target tables as SQLAlchemy `Table`s: reflected, created or evolved on first use."""

    def __init__(self, engine: sa.Engine, *, quote: bool, auto_create: bool, auto_evolve: bool) -> None:
        self.engine, self.quote = engine, quote
        self.auto_create, self.auto_evolve = auto_create, auto_evolve
        self._tables: dict[str, sa.Table] = {}

    def ident(self, name: str) -> str:
        return quoted_name(name, True) if self.quote else name

    def table(self, name: str, columns: Mapping[str, Schema], key: Sequence[str]) -> sa.Table:
        """The table `name` with at least these columns (creating or altering it if allowed)."""
        table = self._tables.get(name)
        if table is None:
            table = self._reflect(name)
            if table is None:
                table = self._create(name, columns, key)
            self._tables[name] = table
        missing = [c for c in columns if c not in table.columns]
        if missing:
            table = self._evolve(table, name, {c: columns[c] for c in missing})
            self._tables[name] = table
        return table

    def known(self, name: str) -> sa.Table:
        """A table `table()` already returned."""
        return self._tables[name]

    def _reflect(self, name: str) -> sa.Table | None:
        schema, table = _split(name)
        if not sa.inspect(self.engine).has_table(table, schema=schema):
            return None
        return sa.Table(self.ident(table), sa.MetaData(), autoload_with=self.engine, schema=schema)

    def _create(self, name: str, columns: Mapping[str, Schema], key: Sequence[str]) -> sa.Table:
        if not self.auto_create:
            raise ConnectException(
                f"table {name!r} does not exist in the database. Create it, or set auto.create=true to have "
                "JdbcSink create it from the records' schema."
            )
        schema, table_name = _split(name)
        dialect = self.engine.dialect.name
        table = sa.Table(
            self.ident(table_name),
            sa.MetaData(),
            *(
                sa.Column(
                    self.ident(col),
                    _key_type(column_type(col_schema, dialect))
                    if col in key
                    else column_type(col_schema, dialect),
                    primary_key=col in key,
                    nullable=col not in key and col_schema.optional,
                    autoincrement=False,
                )
                for col, col_schema in columns.items()
            ),
            schema=schema,
        )
        try:
            with self.engine.begin() as conn:
                table.create(conn, checkfirst=True)
        except sa.exc.DBAPIError:  # another task created it at the same moment: use theirs
            reflected = self._reflect(name)
            if reflected is None:
                raise
            return reflected
        log.info("created table %s with columns %s (primary key %s)", name, list(columns), list(key))
        return table

    def _evolve(self, table: sa.Table, name: str, missing: Mapping[str, Schema]) -> sa.Table:
        if not self.auto_evolve:
            raise ConnectException(
                f"table {name!r} has no column(s) {', '.join(missing)} that the records carry. Add them, "
                "set auto.evolve=true to have JdbcSink add them (nullable), or leave the fields out with "
                "fields.whitelist."
            )
        preparer = self.engine.dialect.identifier_preparer
        with self.engine.begin() as conn:
            for col, col_schema in missing.items():
                type_sql = column_type(col_schema, self.engine.dialect.name).compile(
                    dialect=self.engine.dialect
                )
                conn.exec_driver_sql(
                    f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN "
                    f"{preparer.quote(self.ident(col))} {type_sql} NULL"
                )
        log.info("added nullable columns %s to table %s", list(missing), name)
        reflected = self._reflect(name)
        assert reflected is not None
        return reflected


class _Untyped(sa.types.TypeDecorator[Any]):
    """A parameter SQLAlchemy neither casts nor converts: the value goes to the driver as it is.
    Into PostgreSQL (psycopg sends text as of unknown type) the server then reads it as its target
    column's type, as COPY does: JSON text stays as written, and a text value reaches an inet, enum,
    domain or array column without a cast SQLAlchemy would have to know of."""

    impl = sa.types.NullType
    cache_ok = True


def _param(dialect: str, name: str) -> Any:
    return sa.bindparam(name, type_=_Untyped()) if dialect == "postgresql" else sa.bindparam(name)


def write_statement(
    dialect: str, table: sa.Table, operation: str, key: Sequence[str], values: Sequence[str]
) -> Any:
    """The statement for executemany over rows of this shape: bind names are `k_<key column>` and
    `v_<other column>`; None when there is nothing to do (an UPDATE without non-key columns)."""
    cols = table.columns
    keys = [cols[k] == _param(dialect, f"k_{k}") for k in key]
    if operation == "delete":
        return sa.delete(table).where(*keys)
    if operation == "update":
        if not values:
            return None
        return sa.update(table).where(*keys).values({v: _param(dialect, f"v_{v}") for v in values})
    insert_values = {
        **{k: _param(dialect, f"k_{k}") for k in key},
        **{v: _param(dialect, f"v_{v}") for v in values},
    }
    if operation == "upsert":
        return upsert_statement(dialect, table, key, values, insert_values)
    return sa.insert(table).values(insert_values)


def upsert_statement(
    dialect: str, table: sa.Table, key: Sequence[str], values: Sequence[str], insert_values: Mapping[str, Any]
) -> Any:
    """INSERT .. ON CONFLICT (key) DO UPDATE (PostgreSQL, SQLite) / ON DUPLICATE KEY UPDATE (MySQL)."""
    if dialect in ("postgresql", "sqlite"):
        module: Any
        if dialect == "postgresql":
            from sqlalchemy.dialects import postgresql as module
        else:
            from sqlalchemy.dialects import sqlite as module
        stmt = module.insert(table).values(dict(insert_values))
        if not values:
            return stmt.on_conflict_do_nothing(index_elements=[table.columns[k] for k in key])
        return stmt.on_conflict_do_update(
            index_elements=[table.columns[k] for k in key],
            set_={v: stmt.excluded[v] for v in values},
        )
    if dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql

        stmt = mysql.insert(table).values(dict(insert_values))
        return stmt.on_duplicate_key_update({v: stmt.inserted[v] for v in values or key})
    raise ConnectException(
        f"insert.mode=upsert is not supported on {dialect} databases (PostgreSQL, SQLite, MySQL/MariaDB "
        "are); use insert.mode=insert or update"
    )
