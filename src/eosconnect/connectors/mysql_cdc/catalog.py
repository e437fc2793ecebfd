"""What `MySqlCdcSource` asks the server outside the binlog: the up-front checks (binlog settings,
each with the statement that fixes it), the captured tables and their columns as the catalog has
them now (the snapshot's schema), and the server's flavour (MySQL or MariaDB: GTID formats differ)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eosconnect.connectors.mysql_cdc.config import MySqlCdcConfig
from eosconnect.connectors.mysql_cdc.types import ColumnInfo

__all__ = ["Server", "TableMeta", "captured_tables", "check", "connect", "quote", "table_meta"]

_SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")

#: The server variables change data capture needs, and the statements that set them (a restart
#: keeps them only in the server's option file: [mysqld] binlog_format=ROW ...).
REQUIRED = {
    "binlog_format": ("ROW", "SET GLOBAL binlog_format = 'ROW';"),
    "binlog_row_image": ("FULL", "SET GLOBAL binlog_row_image = 'FULL';"),
    "binlog_row_metadata": ("FULL", "SET GLOBAL binlog_row_metadata = 'FULL';"),
}


def connect(config: MySqlCdcConfig, **extra: Any) -> Any:
    """A PyMySQL connection in UTC (TIMESTAMP values read as the binlog holds them)."""
    import pymysql

    conn = pymysql.connect(
        **config.connection(), autocommit=True, init_command="SET time_zone = '+00:00'", **extra
    )
    return conn


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Server:
    """The server's flavour and id."""

    version: str
    server_id: int

    @property
    def mariadb(self) -> bool:
        return "mariadb" in self.version.lower()

    @classmethod
    def of(cls, conn: Any) -> Server:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@server_id")
            version, server_id = cur.fetchone()
        return cls(str(version), int(server_id))


def _variables(conn: Any) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
            "('log_bin', 'binlog_format', 'binlog_row_image', 'binlog_row_metadata')"
        )
        return {str(name).lower(): str(value) for name, value in cur.fetchall()}


def check(config: MySqlCdcConfig) -> dict[str, list[str]]:
    """The up-front checks; each failure names the setting concerned and the fix."""
    import pymysql

    try:
        conn = connect(config)
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        if code == 1045:
            return {
                "database.password": [
                    f"{config.describe()} refused user {config['database.user']!r} ({exc.args[-1]}). Set "
                    "database.user and database.password to a user of that server."
                ]
            }
        return {"database.hostname": [f"cannot connect to {config.describe()}: {exc.args[-1]}"]}
    errors: dict[str, list[str]] = {}
    try:
        variables = _variables(conn)
        if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
            errors.setdefault("database.hostname", []).append(
                f"{config.describe()} keeps no binary log (log_bin=OFF). Start the server with "
                "log_bin (and server_id) in its option file: [mysqld] log_bin=mysql-bin server_id=1."
            )
        for name, (wanted, statement) in REQUIRED.items():
            value = variables.get(name)
            if value is not None and value.upper() != wanted:
                errors.setdefault("database.hostname", []).append(
                    f"{config.describe()} runs with {name}={value}; change data capture needs "
                    f"{name}={wanted}. "
                    f"Run {statement} (and put {name}={wanted} in the option file's [mysqld] section "
                    "so a restart keeps it)."
                )
            if value is None and name == "binlog_row_metadata":
                errors.setdefault("database.hostname", []).append(
                    f"{config.describe()} has no binlog_row_metadata (MySQL before 8.0.14, MariaDB before "
                    "10.5): rows cannot be decoded with the schema they were written with. Upgrade the "
                    "server."
                )
        with conn.cursor() as cur:
            cur.execute("SHOW GRANTS")
            grants = " ".join(str(row[0]).upper() for row in cur.fetchall())
        if (
            "ALL PRIVILEGES ON *.*" not in grants
            and not all(p in grants for p in ("REPLICATION SLAVE", "REPLICATION CLIENT"))
            and "BINLOG MONITOR" not in grants
        ):
            user = config["database.user"]
            errors.setdefault("database.user", []).append(
                f"user {user!r} lacks the replication privileges the binlog reader needs. Run GRANT "
                f"REPLICATION SLAVE, REPLICATION CLIENT, RELOAD, SELECT ON *.* TO '{user}'@'%';"
            )
        if not captured_tables(conn, config):
            errors.setdefault("table.include.list", []).append(
                "no table matches database.include.list/table.include.list (and their exclude lists). Give "
                "<database>.<table> patterns such as inventory\\.orders."
            )
    finally:
        conn.close()
    return errors


def captured_tables(conn: Any, config: MySqlCdcConfig) -> list[tuple[str, str]]:
    """(database, table) of every base table the filters select, in include-list order then by name."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            f"AND TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(_SYSTEM_DATABASES))})",
            _SYSTEM_DATABASES,
        )
        found = [(str(db), str(table)) for db, table in cur.fetchall()]
    tables = config.tables
    return sorted((t for t in found if config.captured(*t)), key=lambda t: tables.rank(*t))


@dataclass(frozen=True)
class TableMeta:
    """A table's columns (in ordinal order) and primary key, as the catalog has them now."""

    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...]


_KINDS = {
    "tinyint": "tinyint", "smallint": "smallint", "mediumint": "mediumint", "int": "int",
    "integer": "int", "bigint": "bigint", "float": "float", "double": "double", "real": "double",
    "decimal": "decimal", "numeric": "decimal", "char": "text", "varchar": "text", "tinytext": "text",
    "text": "text", "mediumtext": "text", "longtext": "text", "binary": "bytes", "varbinary": "bytes",
    "tinyblob": "bytes", "blob": "bytes", "mediumblob": "bytes", "longblob": "bytes", "date": "date",
    "datetime": "datetime", "timestamp": "timestamp", "time": "time", "year": "year", "enum": "enum",
    "set": "set", "bit": "bit", "json": "json",
}  # fmt: skip
_MEMBER = re.compile(r"'((?:[^']|'')*)'")


def _members(column_type: str) -> tuple[str, ...]:
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(m.replace("''", "'") for m in _MEMBER.findall(inner))


def table_meta(conn: Any, db: str, table: str) -> TableMeta:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
            "DATETIME_PRECISION, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        key = tuple(str(r[0]) for r in cur.fetchall())
    columns = []
    for name, data_type, column_type, nullable, precision, scale, fsp, _key in rows:
        kind = _KINDS.get(str(data_type).lower(), "geometry")
        column_type = str(column_type)
        columns.append(
            ColumnInfo(
                str(name),
                kind,
                nullable=nullable == "YES",
                unsigned="unsigned" in column_type.lower(),
                precision=int(precision or 0) if kind in ("decimal", "bit") else 0,
                scale=int(scale or 0) if kind == "decimal" else 0,
                fsp=int(fsp or 0),
                bits=int(precision or 0) if kind == "bit" else 0,
                values=_members(column_type) if kind in ("enum", "set") else (),
            )
        )
    return TableMeta(tuple(columns), key)
