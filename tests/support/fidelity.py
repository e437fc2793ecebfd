"""The type matrix a CDC pipeline is held to, and the cell-by-cell comparison of a target database
with its source.

One copy for the two places that run PostgreSQL -> PostgresCdcSource -> Kafka -> a JDBC sink ->
PostgreSQL and judge the target: the fidelity test (JdbcSink alone, JSON and Avro) and the bench
that puts Debezium's JDBC sink beside JdbcSink on the same topics
(bench/fidelity_vs_debezium_jdbc_sink.py), so both compare the same values the same way.

The matrix: integers to int64 beyond 2^53, numerics with and without scale, floats, text with
unicode and control characters, bytea, dates and timestamps before the epoch and far in the
future, intervals, uuid, json as written and jsonb, arrays, network types, an enum, xml, a range;
NULLs and empty values. `fill_source` writes its snapshot rows, `stream_changes` the inserts,
updates, a delete, an ADD COLUMN and the updates that leave TOASTed values unchanged (under
REPLICA IDENTITY FULL and DEFAULT).

`compare` reads every target cell back cast to the source column's type and compares it as text
with the source cell; a value the source's type does not accept (an interval written as a number,
say) is a difference showing the target's own text, not an error, so one odd column does not hide
the others.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from typing import Any

import psycopg

from support.cdc_soak import cdc_source_config, connect

__all__ = [
    "ADDED",
    "COLUMNS",
    "ENUM",
    "MONTHS",
    "NO_COLUMN",
    "NO_ROW",
    "NO_TABLE",
    "PLACEHOLDER",
    "SNAPSHOT_ROWS",
    "TABLES",
    "TOAST_CHARS",
    "Cell",
    "Column",
    "Comparison",
    "compare",
    "differences",
    "eos_sink_config",
    "fill_source",
    "json_converters",
    "prepare_target",
    "source_config",
    "source_types",
    "stream_changes",
]


@dataclass(frozen=True)
class Column:
    name: str
    ddl: str
    #: SQL literals, one per row (row i takes values[i % len(values)]); the last row is all NULL.
    values: tuple[str, ...]


COLUMNS = (
    Column("c_int2", "smallint", ("-32768", "32767", "0")),
    Column("c_int4", "integer", ("-2147483648", "2147483647", "7")),
    Column("c_int8", "bigint", ("-9223372036854775808", "9223372036854775807", "9007199254740993")),
    Column("c_num", "numeric(12,3)", ("123456789.123", "-0.001", "0.000")),
    Column(
        "c_numv",
        "numeric",
        ("3.14159265358979323846264338327950288", "-0.00000000000000000001", "12345678901234567890", "0"),
    ),
    Column("c_real", "real", ("0.1", "-1.5", "123456.7")),
    Column("c_double", "double precision", ("1.7976931348623157e308", "0.1", "5e-324", "-2.5")),
    Column("c_bool", "boolean", ("true", "false")),
    Column(
        "c_text",
        "text",
        ("''", "'unicode ☃ 𝄞 é ß'", "E'control \\x01\\x1f tab\\t newline\\n'", "E'quotes \\' \" \\\\'"),
    ),
    Column("c_varchar", "varchar(40)", ("'abc'", "' trailing '")),
    Column("c_char", "char(5)", ("'ab'", "'abcde'")),
    Column("c_bytea", "bytea", ("'\\x00ff10'::bytea", "''::bytea", "'\\xdeadbeef'::bytea")),
    Column(
        "c_date", "date", ("'1970-01-01'", "'1900-02-28'", "'9999-12-31'", "'0001-01-01'", "'2000-02-29'")
    ),
    Column("c_time", "time", ("'00:00:00'", "'23:59:59.999999'", "'12:34:56.789'", "'24:00:00'")),
    Column("c_time3", "time(3)", ("'12:34:56.789'", "'00:00:00.001'")),
    Column("c_timetz", "timetz", ("'12:34:56+05:30'", "'00:00:00-08'")),
    Column(
        "c_ts",
        "timestamp",
        (
            "'1969-12-31 23:59:59.999999'",
            "'2262-04-11 23:47:16.854775'",
            "'1900-01-01 00:00:00'",
            "'9999-12-31 23:59:59.999999'",
        ),
    ),
    Column("c_ts3", "timestamp(3)", ("'2024-02-29 12:00:00.123'", "'1950-06-01 00:00:00'")),
    Column(
        "c_tstz",
        "timestamptz",
        ("'2024-06-01 12:00:00.123456+02'", "'1901-12-13 20:45:52+00'", "'9999-12-31 23:59:59.999999+00'"),
    ),
    Column(
        "c_interval", "interval", ("'1 day 02:03:04.5'", "'-00:00:01'", "'00:00:00.000001'", "'100 days'")
    ),
    Column(
        "c_uuid", "uuid", ("'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'")
    ),
    Column("c_json", "json", ('\'{"b": 1,  "a": [1, 2.50]}\'', "'[]'", "'\"text\"'", "'null'")),
    Column("c_jsonb", "jsonb", ('\'{"z": {"y": [true, null]}, "a": "☃"}\'', "'{}'")),
    Column("c_int_arr", "integer[]", ("'{1,2,3}'", "'{}'", "'{NULL,5}'")),
    Column("c_text_arr", "text[]", ('\'{"a,b","c\\"d",NULL,""}\'', "'{}'", "'{x}'")),
    Column("c_inet", "inet", ("'192.168.0.1/24'", "'::1'")),
    Column("c_cidr", "cidr", ("'10.0.0.0/8'",)),
    Column("c_macaddr", "macaddr", ("'08:00:2b:01:02:03'",)),
    Column("c_mood", "mood", ("'happy'", "'sad'")),
    Column("c_xml", "xml", ("'<a b=\"1\">t</a>'",)),
    Column("c_range", "int4range", ("'[1,10)'", "'empty'")),
)
#: Months in an interval: exact with interval.handling.mode=string; with the default (numeric,
#: Debezium's MicroDuration) a month is 30.4375 days, checked by `_months_as_debezium`.
MONTHS = Column("c_interval_ym", "interval", ("'1 year 2 mons 3 days 04:05:06.789'", "'-1 mons'"))
#: Dropped while streaming (the target keeps it; only the source's columns are compared).
DROPPED = "c_range"
#: Added while streaming.
ADDED = (
    Column("c_added", "numeric(8,2)", ("12.50", "-0.01")),
    Column("c_added_text", "text", ("'new'", "''")),
)
TABLES = ("matrix", "toast_full", "toast_default")
SNAPSHOT_ROWS = 4
PLACEHOLDER = "__debezium_unavailable_value"
ENUM = "CREATE TYPE mood AS ENUM ('happy', 'sad')"
STREAMED_ROWS = 4
TOAST_CHARS = 12_800


# ------------------------------------------------------------------------------------- the source
def _literal(column: Column, row: int) -> str:
    return column.values[row % len(column.values)]


def _ddl(columns: tuple[Column, ...]) -> str:
    return ", ".join(f"{c.name} {c.ddl}" for c in columns)


def _create_source_tables(conn: psycopg.Connection[Any]) -> None:
    """The source's DDL (run on the source and on a pre-created target alike)."""
    conn.execute(ENUM)
    conn.execute(f"CREATE TABLE matrix (id integer PRIMARY KEY, {_ddl((*COLUMNS, MONTHS))})")
    for table in ("toast_full", "toast_default"):
        conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, name text, notes text, doc jsonb)")


def _insert_matrix_row(conn: psycopg.Connection[Any], row: int, columns: tuple[Column, ...]) -> None:
    nulls = row == SNAPSHOT_ROWS - 1  # one snapshot row of NULLs in every column
    values = ", ".join("NULL" if nulls else _literal(c, row) for c in columns)
    conn.execute(
        f"INSERT INTO matrix (id, {', '.join(c.name for c in columns)}) VALUES ({row + 1}, {values})"
    )


def _big_text(rng: random.Random) -> str:
    """Random letters, so PostgreSQL cannot compress the value under its TOAST threshold."""
    return "".join(rng.choices(string.ascii_letters + string.digits, k=TOAST_CHARS))


def _insert_toasted(conn: psycopg.Connection[Any], table: str, row: int, rng: random.Random) -> None:
    doc = json.dumps({"blob": _big_text(rng)})
    conn.execute(f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", (row, f"name-{row}", _big_text(rng), doc))


def fill_source(url: str) -> None:
    """The source tables with their snapshot rows (`toast_full` under REPLICA IDENTITY FULL)."""
    rng = random.Random(48)
    with connect(url) as conn:
        _create_source_tables(conn)
        conn.execute("ALTER TABLE toast_full REPLICA IDENTITY FULL")
        for row in range(SNAPSHOT_ROWS):
            _insert_matrix_row(conn, row, (*COLUMNS, MONTHS))
        for table in ("toast_full", "toast_default"):
            _insert_toasted(conn, table, 1, rng)


def prepare_target(url: str, pre_created: bool) -> None:
    """A target database: the source's own tables, or (for a sink that creates them) only the enum
    type, so that its text column can be read back as the enum it came from."""
    with connect(url) as conn:
        if pre_created:
            _create_source_tables(conn)
        else:
            conn.execute(ENUM)


def stream_changes(url: str) -> None:
    """Inserts, updates, a delete, an ADD COLUMN and a DROP COLUMN, and updates leaving TOASTed
    values unchanged."""
    rng = random.Random(4848)
    with connect(url) as conn:
        for row in range(SNAPSHOT_ROWS, SNAPSHOT_ROWS + STREAMED_ROWS):
            _insert_matrix_row(conn, row, (*COLUMNS, MONTHS))
        # Row 2 takes row 3's values and row 4 the NULLs: updates of every column
        sets = ", ".join(f"{c.name} = {_literal(c, 2)}" for c in (*COLUMNS, MONTHS))
        conn.execute(f"UPDATE matrix SET {sets} WHERE id = 2")
        conn.execute(f"UPDATE matrix SET {', '.join(f'{c.name} = NULL' for c in COLUMNS)} WHERE id = 5")
        conn.execute("DELETE FROM matrix WHERE id = 3")
        conn.execute(f"ALTER TABLE matrix {', '.join(f'ADD COLUMN {c.name} {c.ddl}' for c in ADDED)}")
        added = ", ".join(f"{c.name} = {c.values[0]}" for c in ADDED)
        conn.execute(f"UPDATE matrix SET {added} WHERE id = 1")
        names = ", ".join(c.name for c in (*COLUMNS, *ADDED))
        values = ", ".join(_literal(c, 1) for c in (*COLUMNS, *ADDED))
        conn.execute(f"INSERT INTO matrix (id, {names}) VALUES (100, {values})")
        # A DROP COLUMN while streaming: the changes after it carry the schema without the column
        conn.execute(f"ALTER TABLE matrix DROP COLUMN {DROPPED}")
        kept = [c for c in (*COLUMNS, *ADDED) if c.name != DROPPED]
        names = ", ".join(c.name for c in kept)
        values = ", ".join(_literal(c, 2) for c in kept)
        conn.execute(f"INSERT INTO matrix (id, {names}) VALUES (101, {values})")
        conn.execute("UPDATE matrix SET c_added_text = 'after the drop' WHERE id = 100")
        for table in ("toast_full", "toast_default"):
            _insert_toasted(conn, table, 2, rng)
            conn.execute(f"UPDATE {table} SET name = 'renamed' WHERE id IN (1, 2)")


# ------------------------------------------------------------------------------------- the connectors
def source_config(url: str, prefix: str, converters: dict[str, str]) -> dict[str, str]:
    """The PostgresCdcSource of the matrix's tables with its default settings, topics
    `<prefix>.public.<table>`."""
    return {
        "name": f"{prefix}-cdc",
        **cdc_source_config(url, prefix),
        "table.include.list": r"public\.(matrix|toast_full|toast_default)",
        **converters,
    }


def json_converters() -> dict[str, str]:
    """Kafka's JsonConverter with schemas, keys and values: what Debezium's users run."""
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    return {
        "key.converter": json_converter,
        "key.converter.schemas.enable": "true",
        "value.converter": json_converter,
        "value.converter.schemas.enable": "true",
    }


def eos_sink_config(name: str, url: str, topics: list[str], converters: dict[str, str]) -> dict[str, str]:
    """JdbcSink as a Debezium user sets up Confluent's JDBC sink behind a CDC source: the change
    event unwrapped, the topic routed to the table's own name, upserts by the key, deletes,
    tables created and evolved."""
    return {
        "name": name,
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": ",".join(topics),
        "connection.url": url,
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "delete.enabled": "true",
        "auto.create": "true",
        "auto.evolve": "true",
        "transforms": "unwrap,route",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": r"[^.]+\.[^.]+\.(.+)",
        "transforms.route.replacement": "$1",
        "consumer.override.session.timeout.ms": "6000",
        **converters,
    }


# ------------------------------------------------------------------------------------- the comparison
@dataclass(frozen=True)
class Cell:
    """One source cell and what the target holds for it."""

    table: str
    row: int
    column: str
    #: The source column's type (format_type), what the target is cast back to.
    kind: str
    source: str | None
    #: The target's value cast to `kind`, as text; its own text where the cast fails; None: NULL
    #: or nothing there (then `note` says what is missing).
    target: str | None
    equal: bool
    note: str = ""


@dataclass
class Comparison:
    cells: list[Cell] = field(default_factory=list)
    #: Target rows whose id the source does not have.
    extra_rows: list[int] = field(default_factory=list)
    #: The target has no such table (every cell is then missing).
    no_table: bool = False


NO_TABLE, NO_COLUMN, NO_ROW = "no target table", "no such target column", "row missing in the target"


def source_types(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    return {
        name: kind
        for name, kind in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (table,),
        )
    }


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]  # type: ignore[index]


def _target_column(
    target: psycopg.Connection[Any], table: str, column: str, kind: str
) -> dict[int, tuple[str | None, str]]:
    """{id: (value cast to `kind` as text, note)}; a value that does not cast keeps its own text and
    the note says so. `target` is in autocommit, so a failed cast leaves nothing to roll back."""
    try:
        rows = target.execute(f"SELECT id, CAST(CAST({column} AS text) AS {kind})::text FROM {table}")
        return {int(i): (value, "") for i, value in rows}
    except psycopg.Error:
        pass
    out: dict[int, tuple[str | None, str]] = {}
    for i, text in target.execute(f"SELECT id, CAST({column} AS text) FROM {table}").fetchall():
        try:
            cast = target.execute(f"SELECT CAST(%s::text AS {kind})::text", (text,)).fetchone()
            out[int(i)] = (cast[0] if cast else None, "")
        except psycopg.Error as exc:
            out[int(i)] = (text, f"not a {kind}: {exc.diag.message_primary}")
    return out


def compare(
    source: psycopg.Connection[Any],
    target: psycopg.Connection[Any],
    table: str,
    numeric_intervals: bool = True,
) -> Comparison:
    """Every source cell of `table` (but `id`) beside the target's, cast back to the source
    column's type and compared as text. `numeric_intervals`: the source sent intervals as
    Debezium's MicroDuration (interval.handling.mode=numeric), whose months the target cannot
    get back exactly (`_months_as_debezium`)."""
    types = source_types(source, table)
    columns = [c for c in types if c != "id"]
    wanted = {
        int(row[0]): tuple(row[1:])
        for row in source.execute(f"SELECT id, {', '.join(f'{c}::text' for c in columns)} FROM {table}")
    }
    result = Comparison()

    def missing(note: str, names: list[str], rows: set[int] | dict[int, Any]) -> None:
        for i in sorted(rows):
            for name in names:
                want = wanted[i][columns.index(name)]
                result.cells.append(Cell(table, i, name, types[name], want, None, False, note))

    if not _exists(target, table):
        result.no_table = True
        missing(NO_TABLE, columns, wanted)
        return result
    present = set(source_types(target, table))
    ids = {int(i) for (i,) in target.execute(f"SELECT id FROM {table}")}
    result.extra_rows = sorted(ids - set(wanted))
    missing(NO_COLUMN, [c for c in columns if c not in present], set(wanted) & ids)
    missing(NO_ROW, columns, set(wanted) - ids)
    for name in (c for c in columns if c in present):
        got = _target_column(target, table, name, types[name])
        for i in sorted(set(wanted) & ids):
            # A row the sink wrote between the reads of its ids and of this column
            have, note = got.get(i, (None, "row written while compared"))
            want = wanted[i][columns.index(name)]
            equal = want == have and not note
            if not equal and name == MONTHS.name and numeric_intervals and not note:
                equal = _months_as_debezium(source, i, have)
            result.cells.append(Cell(table, i, name, types[name], want, have, equal, note))
    return result


def differences(
    source: psycopg.Connection[Any],
    target: psycopg.Connection[Any],
    table: str,
    numeric_intervals: bool = True,
) -> list[str]:
    """Every cell of `table` whose target value, cast back to the source column's type, is not the
    source's (compared as text); rows missing or extra; columns missing in the target."""
    found = compare(source, target, table, numeric_intervals)
    if found.no_table:
        return [f"{table}: no target table"]
    absent = [c for c in found.cells if c.note in (NO_COLUMN, NO_ROW)]
    problems = sorted({f"{table}.{c.column}: no such target column" for c in absent if c.note == NO_COLUMN})
    problems += sorted({f"{table} id={c.row}: missing in the target" for c in absent if c.note == NO_ROW})
    problems += [f"{table} id={i}: not in the source" for i in found.extra_rows]
    for c in found.cells:
        if not c.equal and c.note not in (NO_COLUMN, NO_ROW):
            extra = f" ({c.note})" if c.note else ""
            problems.append(f"{table} id={c.row} {c.column}: source {c.source!r}, target {c.target!r}{extra}")
    return problems


def _months_as_debezium(source: psycopg.Connection[Any], row: int, target_text: str | None) -> bool:
    """With interval.handling.mode=numeric an interval with months arrives as Debezium's
    MicroDuration reads it: a month counted as 365.25 / 12 days (so the target differs from the
    source, as it does behind Debezium's own connector)."""
    if target_text is None:
        return False
    parts = source.execute(
        "SELECT extract(year FROM v), extract(month FROM v), extract(day FROM v), "
        "extract(hour FROM v) * 3600 + extract(minute FROM v) * 60 + extract(second FROM v), "
        "extract(epoch FROM %s::interval) FROM (SELECT c_interval_ym AS v FROM matrix WHERE id = %s) AS r",
        (target_text, row),
    ).fetchone()
    assert parts is not None
    if any(p is None for p in parts):  # the source cell is NULL
        return False
    years, months, days, clock, got = (float(p) for p in parts)
    expected = ((years * 12 + months) * 365.25 / 12 + days) * 86_400 + clock
    return abs(got - expected) < 1e-6
