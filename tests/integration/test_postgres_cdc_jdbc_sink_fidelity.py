"""Every value of a database pipeline arrives as it left: PostgreSQL -> PostgresCdcSource -> Kafka ->
JdbcSink -> PostgreSQL, compared cell by cell.

The pipeline is the one Debezium users run: the CDC source with its default settings (and, in the
registry runs, its other interval and time modes), `ExtractNewRecordState` and a `RegexRouter` on
the sink, `insert.mode=upsert`, `pk.mode=record_key`, `delete.enabled`, `auto.create` and
`auto.evolve`; once with the JsonConverter (schemas on), once each with the Avro and JSON Schema
converters and the real registry. Two sinks read each topic: one into tables pre-created with the
source's own DDL, one into an empty database whose tables the sink creates. Once both caught up,
each target cell is read back cast to the source column's type and compared as text with the
source cell: a type matrix (integers to int64 beyond 2^53, numerics with and without scale, floats,
text with unicode and control characters, bytea, dates and timestamps before the epoch and far in
the future, intervals, uuid, json as written and jsonb, arrays, network types, an enum, xml, a
range; NULLs and empty values), through a snapshot, streamed inserts and updates, a delete and an
ADD COLUMN while streaming, and TOASTed values left unchanged by an update under REPLICA IDENTITY
FULL and DEFAULT.
"""

from __future__ import annotations

import json
import random
import string
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from support.cdc_soak import cdc_source_config, connect
from support.postgres import new_database, postgres  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


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
#: Debezium's MicroDuration) a month is 30.4375 days, checked by `micro_duration_seconds`.
MONTHS = Column("c_interval_ym", "interval", ("'1 year 2 mons 3 days 04:05:06.789'", "'-1 mons'"))
#: Added while streaming.
ADDED = (
    Column("c_added", "numeric(8,2)", ("12.50", "-0.01")),
    Column("c_added_text", "text", ("'new'", "''")),
)
SNAPSHOT_ROWS = 4
PLACEHOLDER = "__debezium_unavailable_value"
ENUM = "CREATE TYPE mood AS ENUM ('happy', 'sad')"
STREAMED_ROWS = 4
TOAST_CHARS = 12_800


def _literal(column: Column, row: int) -> str:
    return column.values[row % len(column.values)]


def _ddl(columns: tuple[Column, ...]) -> str:
    return ", ".join(f"{c.name} {c.ddl}" for c in columns)


def _create_source_tables(conn: psycopg.Connection[Any]) -> None:
    """The source's DDL (run on the source and on the pre-created target alike)."""
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


def _source_types(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    return {
        name: kind
        for name, kind in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (table,),
        )
    }


def _cells(conn: psycopg.Connection[Any], table: str, select: list[str]) -> dict[int, tuple[Any, ...]]:
    return {row[0]: tuple(row[1:]) for row in conn.execute(f"SELECT id, {', '.join(select)} FROM {table}")}


def differences(source: psycopg.Connection[Any], target: psycopg.Connection[Any], table: str) -> list[str]:
    """Every cell of `table` whose target value, cast back to the source column's type, is not the
    source's (compared as text); rows missing or extra; columns missing in the target."""
    types = _source_types(source, table)
    columns = [c for c in types if c != "id"]
    present = set(_source_types(target, table)) if _exists(target, table) else set()
    if not present:
        return [f"{table}: no target table"]
    found = [c for c in columns if c in present]
    problems = [f"{table}.{c}: no such target column" for c in columns if c not in present]
    wanted = _cells(source, table, [f"{c}::text" for c in found])
    got = _cells(target, table, [f"CAST(CAST({c} AS text) AS {types[c]})::text" for c in found])
    problems += [f"{table} id={i}: missing in the target" for i in sorted(set(wanted) - set(got))]
    problems += [f"{table} id={i}: not in the source" for i in sorted(set(got) - set(wanted))]
    for i in sorted(set(wanted) & set(got)):
        for name, want, have in zip(found, wanted[i], got[i], strict=True):
            if want != have and not (name == MONTHS.name and _months_as_debezium(source, i, have)):
                problems.append(f"{table} id={i} {name}: source {want!r}, target {have!r}")
    return problems


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]  # type: ignore[index]


#: This run's: whether intervals travel as MicroDuration (numeric) or exactly (string).
_NUMERIC_INTERVALS: list[bool] = [True]


def _months_as_debezium(source: psycopg.Connection[Any], row: int, target_text: str | None) -> bool:
    """With interval.handling.mode=numeric an interval with months arrives as Debezium's
    MicroDuration reads it: a month counted as 365.25 / 12 days (so the target differs from the
    source, as it does behind Debezium's own connector); exact otherwise."""
    if not _NUMERIC_INTERVALS[0] or target_text is None:
        return False
    parts = source.execute(
        "SELECT extract(year FROM v), extract(month FROM v), extract(day FROM v), "
        "extract(hour FROM v) * 3600 + extract(minute FROM v) * 60 + extract(second FROM v), "
        "extract(epoch FROM %s::interval) FROM (SELECT c_interval_ym AS v FROM matrix WHERE id = %s) AS r",
        (target_text, row),
    ).fetchone()
    assert parts is not None
    years, months, days, clock, got = (float(p) for p in parts)
    expected = ((years * 12 + months) * 365.25 / 12 + days) * 86_400 + clock
    return abs(got - expected) < 1e-6


@dataclass
class Pipeline:
    source_url: str
    targets: dict[str, str]  # "pre-created" / "auto-created" -> URL

    def connect(self, url: str) -> psycopg.Connection[Any]:
        conn = connect(url)
        conn.execute("SET TimeZone = 'UTC'")
        return conn

    def differences(self) -> list[str]:
        out: list[str] = []
        with self.connect(self.source_url) as source:
            for kind, url in self.targets.items():
                with self.connect(url) as target:
                    for table in ("matrix", "toast_full", "toast_default"):
                        out += [f"{kind}: {p}" for p in differences(source, target, table)]
        return out


@pytest.fixture
def pipeline_dbs(postgres: str) -> Iterator[Pipeline]:  # noqa: F811 - the imported fixture
    source = new_database(postgres)
    pre, auto = new_database(postgres), new_database(postgres)
    rng = random.Random(48)
    with connect(source) as conn:
        _create_source_tables(conn)
        conn.execute("ALTER TABLE toast_full REPLICA IDENTITY FULL")
        for row in range(SNAPSHOT_ROWS):
            _insert_matrix_row(conn, row, (*COLUMNS, MONTHS))
        for table in ("toast_full", "toast_default"):
            _insert_toasted(conn, table, 1, rng)
    with connect(pre) as conn:
        _create_source_tables(conn)
    with connect(auto) as conn:  # only for reading the text column back as the enum it came from
        conn.execute(ENUM)
    yield Pipeline(source, {"pre-created": pre, "auto-created": auto})
    with connect(source) as conn:  # a slot left behind would keep WAL forever
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active")


def _stream_changes(url: str) -> None:
    """Inserts, updates, a delete, an ADD COLUMN, and updates leaving TOASTed values unchanged."""
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
        for table in ("toast_full", "toast_default"):
            _insert_toasted(conn, table, 2, rng)
            conn.execute(f"UPDATE {table} SET name = 'renamed' WHERE id IN (1, 2)")


def _sink(name: str, url: str, topics: list[str], converters: dict[str, str]) -> dict[str, str]:
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


def _json() -> dict[str, str]:
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    return {
        "key.converter": json_converter,
        "key.converter.schemas.enable": "true",
        "value.converter": json_converter,
        "value.converter.schemas.enable": "true",
    }


REGISTRY_CONVERTERS = {
    "avro": "io.confluent.connect.avro.AvroConverter",
    "json_schema": "io.confluent.connect.json.JsonSchemaConverter",
}


def _registry(converter: str, registry_url: str) -> dict[str, str]:
    return {
        "key.converter": REGISTRY_CONVERTERS[converter],
        "key.converter.schema.registry.url": registry_url,
        "value.converter": REGISTRY_CONVERTERS[converter],
        "value.converter.schema.registry.url": registry_url,
    }


def settle(pipeline: Pipeline, jobs: list[Any], what: str, timeout: float = 180) -> None:
    """Until both targets equal the source (or `timeout`, or a job ended: the comparison then says
    what differs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and all(job.running() for job in jobs):
        if not pipeline.differences():
            return
        time.sleep(1)
    problems = pipeline.differences()
    ended = [(job.name, job.outcomes, job.error) for job in jobs if not job.running()]
    assert not problems and not ended, f"after {what}: jobs ended {ended}; differences:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize("converter", ["json", "avro", "json_schema"])
def test_every_cell_arrives_as_it_left(
    converter: str,
    request: pytest.FixtureRequest,
    pipeline_dbs: Pipeline,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
) -> None:
    if converter != "json":
        converters = _registry(converter, request.getfixturevalue("schema_registry").url)
        # The source's other modes: intervals exact, times in microseconds whatever their precision
        modes = {"interval.handling.mode": "string", "time.precision.mode": "adaptive_time_microseconds"}
    else:
        converters, modes = _json(), {}
    _NUMERIC_INTERVALS[0] = "interval.handling.mode" not in modes
    # A prefix Avro takes as a namespace (letters, digits and underscores): hyphens are not valid
    # in Avro names, with Confluent's converter as with ours.
    prefix = f"fid_{converter}_{uuid.uuid4().hex[:8]}"
    topics = [create_topic(f"{prefix}.public.{t}") for t in ("matrix", "toast_full", "toast_default")]
    source = {
        "name": f"{prefix}-cdc",
        **cdc_source_config(pipeline_dbs.source_url, prefix),
        "table.include.list": r"public\.(matrix|toast_full|toast_default)",
        **converters,
        **modes,
    }
    jobs = [run_job(source, worker_props("enabled"))]
    for kind, url in pipeline_dbs.targets.items():
        jobs.append(run_job(_sink(f"{prefix}-{kind}", url, topics, converters), worker_props("disabled")))

    settle(pipeline_dbs, jobs, "the snapshot")
    _stream_changes(pipeline_dbs.source_url)
    settle(pipeline_dbs, jobs, "the changes")
    problems = pipeline_dbs.differences()
    for job in jobs:
        assert [o["state"] for o in job.stop()] == ["STOPPED"], job.outcomes
    assert not problems, "\n".join(problems)
    with pipeline_dbs.connect(pipeline_dbs.source_url) as conn:
        rows = conn.execute("SELECT count(*) FROM matrix").fetchone()[0]  # type: ignore[index]
    cells = rows * (len(COLUMNS) + 1 + len(ADDED)) + 2 * 2 * 3
    if converter == "json":  # what the events carry for the unchanged TOASTed values
        for topic, full in ((topics[1], True), (topics[2], False)):
            updates = [
                json.loads(r.value)["payload"]["after"]
                for r in read_committed(topic)
                if r.value and json.loads(r.value)["payload"]["op"] == "u"
            ]
            assert len(updates) == 2
            for after in updates:
                toasted = (after["notes"], after["doc"])
                if full:  # REPLICA IDENTITY FULL: taken from the old row, as Debezium does
                    assert len(after["notes"]) == TOAST_CHARS and json.loads(after["doc"])["blob"]
                else:
                    assert toasted == (PLACEHOLDER, PLACEHOLDER)
    assert cells >= 40 * 4, f"the matrix compares {cells} cells per target"
