"""What the connector asks PostgreSQL's catalog (over an ordinary psycopg connection): the up-front
checks (wal_level, the REPLICATION privilege, the publication), the publication itself, the
captured tables, and each table's columns, nullability and primary key."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.debezium.filters import TableFilter
from eosconnect.connectors.postgres_cdc.config import AutoCreate, CdcConfig
from eosconnect.connectors.postgres_cdc.pgoutput import Column
from eosconnect.connectors.postgres_cdc.refusal import ConnectionRefused, refusal

__all__ = [
    "TableMeta",
    "check",
    "connect",
    "ensure_publication",
    "published_tables",
    "table_meta",
    "type_names",
]

#: PostgreSQL's FirstNormalObjectId: oids below it are built in, the same in every database.
FIRST_NORMAL_OID = 16384
_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


def connect(config: CdcConfig) -> Any:
    """An autocommit psycopg (3) connection for catalog queries; `ConnectionRefused` (naming the
    setting) when PostgreSQL answered and refused it, psycopg's error when it did not answer."""
    import psycopg

    try:
        return psycopg.connect(config.dsn(), autocommit=True)
    except psycopg.OperationalError as exc:
        found = refusal(exc, config)
        if found is not None:
            raise ConnectionRefused(found) from exc
        raise


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{_ident(schema)}.{_ident(table)}"


def user_tables(conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT schemaname, tablename FROM pg_tables WHERE schemaname <> ALL(%s) ORDER BY 1, 2",
        (list(_SYSTEM_SCHEMAS),),
    ).fetchall()
    return [(s, t) for s, t in rows if tables(s, t)]


def publication_exists(conn: Any, name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone() is not None


def check(config: CdcConfig) -> dict[str, list[str]]:
    """The up-front checks; each failure names the setting concerned and the fix."""
    import psycopg

    try:
        conn = connect(config)
    except ConnectionRefused as exc:
        return {exc.refusal.setting: [exc.refusal.message]}
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"database.hostname": [f"cannot connect to {config.describe()}: {reason}"]}
    errors: dict[str, list[str]] = config.signal_problems()
    with conn:
        wal_level = conn.execute("SHOW wal_level").fetchone()[0]
        if wal_level != "logical":
            errors.setdefault("database.hostname", []).append(
                f"PostgreSQL runs with wal_level={wal_level}; logical replication needs wal_level=logical. "
                "Run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL."
            )
        user = config["database.user"]
        role = conn.execute(
            "SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        replication, superuser = bool(role and role[0]), bool(role and role[1])
        if not (replication or superuser):
            errors.setdefault("database.user", []).append(
                f"role {user!r} has no REPLICATION privilege, needed to read the replication slot. "
                f"Run ALTER ROLE {_ident(user)} REPLICATION; (or use a role that has it)."
            )
        name, mode = config["publication.name"], AutoCreate(config["publication.autocreate.mode"])
        exists = publication_exists(conn, name)
        if not exists and mode is AutoCreate.DISABLED:
            errors.setdefault("publication.name", []).append(
                f"publication {name!r} does not exist and publication.autocreate.mode=disabled. Create it "
                f"(CREATE PUBLICATION {_ident(name)} FOR TABLE ...;) or set publication.autocreate.mode to "
                "filtered or all_tables."
            )
        if not exists and mode is AutoCreate.ALL_TABLES and not superuser:
            errors.setdefault("publication.autocreate.mode", []).append(
                f"creating publication {name!r} FOR ALL TABLES needs a superuser; role {user!r} is not one. "
                "Create the publication yourself, or set publication.autocreate.mode=filtered (the role "
                "must then own the tables and have CREATE on the database)."
            )
        tables = user_tables(conn, config.tables)
        signal = config.signal_table
        if signal is not None and not _table_exists(conn, *signal):
            errors.setdefault("signal.data.collection", []).append(
                f"signal table {qualified(*signal)} does not exist. Create it: CREATE TABLE "
                f"{qualified(*signal)} (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data "
                "VARCHAR(2048));"
            )
        if mode is AutoCreate.FILTERED and not tables:
            errors.setdefault("table.include.list", []).append(
                "no table matches table.include.list/table.exclude.list, so the publication would be "
                "empty. Give <schema>.<table> patterns such as public\\.orders."
            )
        if mode is AutoCreate.FILTERED and not superuser:
            problems = filtered_privilege_problems(conn, config, tables, exists)
            if problems:
                errors.setdefault("publication.autocreate.mode", []).extend(problems)
    return errors


def filtered_privilege_problems(
    conn: Any, config: CdcConfig, tables: list[tuple[str, str]], exists: bool
) -> list[str]:
    """What the role lacks to create the publication, or set its tables, for
    publication.autocreate.mode=filtered: PostgreSQL wants the CREATE privilege on the database to
    create one, ownership of the publication to change it, and ownership of every table put in it."""
    name, user = config["publication.name"], config["database.user"]
    instead = (
        f"or create the publication yourself as a role that may (CREATE PUBLICATION {_ident(name)} FOR "
        "TABLE ...;) and set publication.autocreate.mode=disabled."
    )
    problems: list[str] = []
    if not exists and not _one(conn, "SELECT has_database_privilege(current_database(), 'CREATE')"):
        database = _one(conn, "SELECT current_database()")
        problems.append(
            f"publication.autocreate.mode=filtered creates publication {name!r}, which needs the CREATE "
            f"privilege on database {database!r}; role {user!r} lacks it. Run GRANT CREATE ON DATABASE "
            f"{_ident(database)} TO {_ident(user)}; {instead}"
        )
    if exists and not _one(
        conn, "SELECT pg_has_role(pubowner, 'USAGE') FROM pg_publication WHERE pubname = %s", name
    ):
        problems.append(
            f"publication.autocreate.mode=filtered sets the tables of publication {name!r}, which needs "
            f"role {user!r} to own it; it does not. Run ALTER PUBLICATION {_ident(name)} OWNER TO "
            f"{_ident(user)}; or set publication.autocreate.mode=disabled and keep its tables yourself."
        )
    wanted = set(tables)
    foreign = [
        qualified(s, t)
        for s, t, owns in conn.execute(_OWNERSHIP, (list(_SYSTEM_SCHEMAS),)).fetchall()
        if (s, t) in wanted and not owns
    ]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        problems.append(
            f"publication.autocreate.mode=filtered puts the captured tables in publication {name!r}, which "
            f"needs role {user!r} to own them; it does not own {shown}. Run ALTER TABLE ... OWNER TO "
            f"{_ident(user)}; for them, narrow table.include.list, {instead}"
        )
    return problems


#: Each table, and whether the role has its owner's privileges (owns it, or is a member of its owner).
_OWNERSHIP = (
    "SELECT schemaname, tablename, pg_has_role(tableowner, 'USAGE') FROM pg_tables "
    "WHERE schemaname <> ALL(%s) ORDER BY 1, 2"
)


def _one(conn: Any, query: str, *params: Any) -> Any:
    return conn.execute(query, params or None).fetchone()[0]


def ensure_publication(conn: Any, config: CdcConfig) -> None:
    """Create the publication (or set its tables, for `filtered`) as publication.autocreate.mode says.

    Validation checks the privileges this needs, but they can be revoked (or tables added) in
    between: a refusal then fails the task with what validation would have said."""
    import psycopg

    name, mode = config["publication.name"], AutoCreate(config["publication.autocreate.mode"])
    exists = publication_exists(conn, name)
    tables = user_tables(conn, config.tables) if mode is AutoCreate.FILTERED else []
    signal = config.signal_table
    if tables and signal is not None and signal not in tables and _table_exists(conn, *signal):
        tables.append(signal)  # its rows (signals, watermarks) come through the stream
    try:
        if mode is AutoCreate.ALL_TABLES and not exists:
            conn.execute(f"CREATE PUBLICATION {_ident(name)} FOR ALL TABLES")
        elif mode is AutoCreate.FILTERED:
            listed = ", ".join(qualified(s, t) for s, t in tables)
            verb = (
                f"ALTER PUBLICATION {_ident(name)} SET TABLE"
                if exists
                else f"CREATE PUBLICATION {_ident(name)} FOR TABLE"
            )
            conn.execute(f"{verb} {listed}")
    except psycopg.errors.InsufficientPrivilege as exc:
        problems = filtered_privilege_problems(conn, config, tables, exists) if tables else []
        raise ConnectException(
            f"publication.autocreate.mode={mode.value}: PostgreSQL refused to set up publication {name!r} "
            f"({str(exc).strip()}). {' '.join(problems)}".strip()
        ) from exc


def published_tables(conn: Any, config: CdcConfig) -> list[tuple[str, str]]:
    """The captured tables: the publication's, narrowed by the include/exclude lists, in the order
    Debezium snapshots them: by the first table.include.list pattern each matches, then by name."""
    rows = conn.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s ORDER BY 1, 2",
        (config["publication.name"],),
    ).fetchall()
    tables, signal = config.tables, config.signal_table
    captured = ((s, t) for s, t in rows if tables(s, t) and (s, t) != signal)
    return sorted(captured, key=lambda st: tables.rank(*st))


def _table_exists(conn: Any, schema: str, table: str) -> bool:
    query = "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s"
    return conn.execute(query, (schema, table)).fetchone() is not None


def type_names(conn: Any, oids: Iterable[int]) -> dict[int, str]:
    """The names of the types extensions define among `oids` (hstore: its oid differs per database)."""
    wanted = sorted({oid for oid in oids if oid >= FIRST_NORMAL_OID})
    if not wanted:
        return {}
    rows = conn.execute("SELECT oid::int8, typname FROM pg_type WHERE oid = ANY(%s)", (wanted,)).fetchall()
    return {int(r[0]): r[1] for r in rows}


@dataclass(frozen=True)
class TableMeta:
    oid: int
    schema: str
    table: str
    columns: tuple[Column, ...]
    nullable: dict[str, bool]
    primary_key: tuple[str, ...]


def table_meta(conn: Any, schema: str, table: str) -> TableMeta:
    """A table's current columns (as pgoutput lists them: not dropped, not generated), nullability
    and primary key."""
    oid = conn.execute("SELECT %s::regclass::oid", (qualified(schema, table),)).fetchone()[0]
    rows = conn.execute(
        "SELECT attname, atttypid, atttypmod, attnotnull FROM pg_attribute WHERE attrelid = %s "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (oid,),
    ).fetchall()
    _, key = relation_meta(conn, oid)
    return TableMeta(
        oid,
        schema,
        table,
        tuple(Column(r[0], r[1], r[2], False) for r in rows),
        {r[0]: not r[3] for r in rows},
        key,
    )


def relation_meta(conn: Any, oid: int) -> tuple[dict[str, bool], tuple[str, ...]]:
    """Nullability and primary key of the relation a pgoutput Relation message describes."""
    rows = conn.execute(
        "SELECT attname, attnotnull FROM pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
        (oid,),
    ).fetchall()
    key = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary "
        "ORDER BY array_position(i.indkey::int2[], a.attnum)",
        (oid,),
    ).fetchall()
    return {r[0]: not r[1] for r in rows}, tuple(r[0] for r in key)
