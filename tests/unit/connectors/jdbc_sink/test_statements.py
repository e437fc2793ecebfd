"""JdbcSink's task on a real SQLite database: modes, types, DDL, and the offsets table's fencing.

The PostgreSQL and broker cases are in tests/integration/test_connectors_jdbc_sink.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.connector import JdbcSinkConnector, JdbcSinkTask
from eosconnect.plugins.loading import resolve_connector_class

TP = TopicPartition("orders", 0)

VALUE_SCHEMA = (
    SchemaBuilder.struct()
    .field("id", SchemaBuilder.int64().build())
    .field("item", SchemaBuilder.string().optional().build())
    .field("price", Decimal.builder(2).optional().build())
    .field("day", Date.builder().optional().build())
    .field("at", Timestamp.builder().optional().build())
    .build()
)


def order(i: int, item: str = "x") -> Struct:
    return (
        Struct(VALUE_SCHEMA)
        .put("id", i)
        .put("item", item)
        .put("price", decimal.Decimal("1.25") * i)
        .put("day", dt.date(2024, 1, 1) + dt.timedelta(days=i))
        .put("at", dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=i))
    )


def record(i: int, value: object = "default", key: object = None, offset: int | None = None) -> SinkRecord:
    return SinkRecord(
        "orders",
        0,
        i if offset is None else offset,
        key,
        order(i) if value == "default" else value,
        leader_epoch=0,
        key_schema=SchemaBuilder.int64().build() if isinstance(key, int) else None,
        value_schema=VALUE_SCHEMA if value == "default" else None,
    )


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'target.db'}"


def start_task(url: str, **settings: str) -> JdbcSinkTask:
    config = {"name": "jdbc", "connection.url": url, "topics": "orders", "auto.create": "true", **settings}
    task = JdbcSinkTask()
    task.initialize(SinkTaskContext(configs=config))
    task.start(config)
    return task


def rows(url: str, sql: str = "SELECT * FROM orders ORDER BY id") -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def positions(n: int) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TP: OffsetAndMetadata(n, leader_epoch=0)}


def test_alias_and_short_name_resolve() -> None:
    assert resolve_connector_class("io.confluent.connect.jdbc.JdbcSinkConnector") is JdbcSinkConnector
    assert resolve_connector_class("JdbcSink") is JdbcSinkConnector


def test_insert_creates_the_table_with_the_schemas_types_and_commits_positions(url: str) -> None:
    task = start_task(url)
    task.open([TP])
    task.put([record(i) for i in range(1, 4)])
    assert not sa.inspect(sa.create_engine(url)).has_table("orders"), "nothing written before the flush"
    assert task.pre_commit(positions(4)) == positions(4)
    got = rows(url, "SELECT id, item, price, day, at FROM orders ORDER BY id")
    assert got[0] == (1, "x", 1.25, "2024-01-02", "2024-01-01 12:00:01.000000")
    assert len(got) == 3
    stored = rows(
        url,
        "SELECT connector, kafka_topic, kafka_partition, kafka_offset, leader_epoch, generation "
        "FROM eosconnect_sink_offsets",
    )
    assert stored == [("jdbc", "orders", 0, 4, 0, 1)]
    cols = {c["name"]: str(c["type"]) for c in sa.inspect(sa.create_engine(url)).get_columns("orders")}
    assert cols == {
        "id": "BIGINT",
        "item": "TEXT",
        "price": "NUMERIC(38, 2)",
        "day": "DATE",
        "at": "DATETIME",
    }
    task.stop()


def test_restart_resumes_from_the_database_offsets_with_the_leader_epoch(url: str) -> None:
    task = start_task(url)
    task.open([TP])
    task.put([record(i) for i in range(1, 4)])
    task.pre_commit(positions(4))
    task.put([record(4)])  # put, never flushed: the crash loses it from the buffer only
    task.stop()
    again = start_task(url)
    again.open([TP])
    assert again.context.requested_position(TP) == OffsetAndMetadata(4, leader_epoch=0)
    again.stop()


def test_a_stale_generation_cannot_commit_after_its_successor_claimed(url: str) -> None:
    zombie = start_task(url)
    zombie.open([TP])
    zombie.put([record(1)])
    successor = start_task(url)
    successor.open([TP])  # raises the generation: the zombie is fenced
    assert zombie.pre_commit(positions(2)) == {}, "the zombie's flush committed nothing"
    assert rows(url, "SELECT COUNT(*) FROM orders") == [(0,)]  # created by the zombie's flush, empty
    assert zombie.context.paused == {TP}
    successor.put([record(1)])
    assert successor.pre_commit(positions(2)) == positions(2)
    assert rows(url, "SELECT id FROM orders") == [(1,)]
    assert rows(url, "SELECT kafka_offset, generation FROM eosconnect_sink_offsets") == [(2, 2)]
    zombie.close([TP])
    zombie.open([TP])  # assigned back later: claims again, resumes after the successor, reads again
    assert zombie.context.paused == set() and zombie.context.resumed == {TP}
    assert zombie.context.requested_position(TP) == OffsetAndMetadata(2, leader_epoch=0)
    zombie.stop()
    successor.stop()


def test_upsert_and_delete_by_record_key_in_order(url: str) -> None:
    task = start_task(
        url, **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true"}
    )
    task.open([TP])
    task.put([record(1, key=1), record(2, key=2), record(1, key=1, offset=2)])
    task.put([SinkRecord("orders", 0, 3, 2, None, key_schema=SchemaBuilder.int64().build())])  # tombstone
    task.put([record(3, key=3, offset=4), record(3, key=3, offset=5)])
    task.pre_commit(positions(6))
    assert rows(url, "SELECT id FROM orders ORDER BY id") == [(1,), (3,)]
    pk = sa.inspect(sa.create_engine(url)).get_pk_constraint("orders")["constrained_columns"]
    assert pk == ["id"]
    task.stop()


def test_update_mode_changes_existing_rows_only(url: str) -> None:
    task = start_task(url, **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"})
    task.open([TP])
    task.put([record(1)])
    task.pre_commit(positions(2))
    task.stop()
    update = start_task(url, **{"insert.mode": "update", "pk.mode": "record_value", "pk.fields": "id"})
    update.open([TP])
    update.put([record(1, value=order(1, "changed"), offset=2), record(2, offset=3)])
    update.pre_commit(positions(4))
    assert rows(url, "SELECT id, item FROM orders") == [(1, "changed")]
    update.stop()


def test_schemaless_maps_kafka_pk_whitelist_and_auto_evolve(url: str) -> None:
    settings = {"pk.mode": "kafka", "fields.whitelist": "a,b,c", "auto.evolve": "true"}
    task = start_task(url, **settings)
    task.open([TP])
    task.put([record(0, value={"a": 1, "b": "x", "skipped": True})])
    task.put([record(1, value={"a": 2, "b": "y", "c": 1.5})])  # a new field: a new nullable column
    task.pre_commit(positions(2))
    got = rows(
        url,
        "SELECT __connect_topic, __connect_partition, __connect_offset, a, b, c FROM orders "
        "ORDER BY __connect_offset",
    )
    assert got == [("orders", 0, 0, 1, "x", None), ("orders", 0, 1, 2, "y", 1.5)]
    task.stop()


def test_missing_table_without_auto_create_names_the_fix(url: str) -> None:
    task = start_task(url, **{"auto.create": "false"})
    task.open([TP])
    task.put([record(1)])
    with pytest.raises(ConnectException, match=r"auto\.create=true"):
        task.pre_commit(positions(2))
    task.stop()


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"insert.mode": "upsert"}, "pk.mode"),
        ({"delete.enabled": "true", "pk.mode": "record_value"}, "delete.enabled"),
        ({"pk.mode": "kafka", "pk.fields": "a"}, "pk.fields"),
        ({"insert.mode": "merge"}, "insert.mode"),
    ],
)
def test_bad_settings_are_refused_by_name(url: str, settings: dict[str, str], field: str) -> None:
    config = {"name": "jdbc", "connection.url": url, "topics": "orders", **settings}
    bad = {v.name: v.errors for v in JdbcSinkConnector().validate(config) if v.errors}
    assert field in bad, bad
    with pytest.raises(ConfigException):
        JdbcSinkConnector().start(config)


def test_at_least_once_mode_keeps_no_offsets_table(url: str) -> None:
    task = start_task(url, **{"exactly.once": "false"})
    assert not task.stores_offsets
    task.open([TP])
    task.put([record(1)])
    assert task.pre_commit(positions(2)) == positions(2)
    assert not sa.inspect(sa.create_engine(url)).has_table("eosconnect_sink_offsets")
    task.stop()


def test_alter_and_reset_offsets_apply_to_the_offsets_table(url: str) -> None:
    task = start_task(url)
    task.open([TP])
    config = {"name": "jdbc", "connection.url": url, "topics": "orders"}
    assert JdbcSinkConnector().alter_offsets(config, {TP: 42, TopicPartition("orders", 1): 7}) is True
    assert rows(
        url,
        "SELECT kafka_partition, kafka_offset, generation FROM eosconnect_sink_offsets "
        "ORDER BY kafka_partition",
    ) == [(0, 42, 2), (1, 7, 1)]
    task.put([record(1)])
    assert task.pre_commit(positions(2)) == {}, "the running task was fenced by the alteration"
    assert JdbcSinkConnector().alter_offsets(config, None) is True
    assert rows(url, "SELECT COUNT(*) FROM eosconnect_sink_offsets") == [(0,)]
    assert JdbcSinkConnector().alter_offsets({**config, "exactly.once": "false"}, None) is False
    task.stop()


def test_an_unreachable_database_is_named_in_validation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}"
    config = {"name": "jdbc", "connection.url": url, "topics": "orders"}
    bad = {v.name: v.errors for v in JdbcSinkConnector().validate(config) if v.errors}
    assert list(bad) == ["connection.url"] and "cannot connect to" in bad["connection.url"][0]


def test_a_commit_whose_acknowledgement_was_lost_is_not_written_twice(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops right after COMMIT reached the database: the retry finds the position
    already stored and writes nothing again (a plain retry would duplicate every row)."""
    task = start_task(url, **{"connection.backoff.ms": "0"})
    task.open([TP])
    task.put([record(i) for i in range(1, 4)])
    real = task.writer._flush_once
    calls: list[bool] = []

    def commit_then_lose_the_connection(positions, rows, *, retry):  # type: ignore[no-untyped-def]
        calls.append(retry)
        result = real(positions, rows, retry=retry)
        if len(calls) == 1:
            raise sa.exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))
        return result

    monkeypatch.setattr(task.writer, "_flush_once", commit_then_lose_the_connection)
    assert task.pre_commit(positions(4)) == positions(4)
    assert calls == [False, True]
    assert rows(url, "SELECT COUNT(*) FROM orders") == [(3,)]
    assert rows(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == [(4,)]
    task.stop()


def test_a_lost_connection_fails_the_flush_after_connection_attempts(url: str, monkeypatch) -> None:
    task = start_task(url, **{"connection.backoff.ms": "0", "connection.attempts": "2"})
    task.open([TP])
    task.put([record(1)])
    calls: list[bool] = []

    def always_lost(positions, rows, *, retry):  # type: ignore[no-untyped-def]
        calls.append(retry)
        raise sa.exc.OperationalError("INSERT", {}, Exception("connection refused"))

    monkeypatch.setattr(task.writer, "_flush_once", always_lost)
    with pytest.raises(sa.exc.OperationalError):
        task.pre_commit(positions(2))
    assert calls == [False, True]
    task.stop()


def test_a_constraint_violation_is_reported_and_the_rest_committed_with_errors_tolerance_all(
    url: str,
) -> None:
    from eosconnect.runtime.dead_letter import DeadLetterQueue, ErrorReporting

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (k BIGINT PRIMARY KEY, note TEXT)")
    engine.dispose()
    config = {"name": "jdbc", "connection.url": url, "topics": "orders"}
    queue = DeadLetterQueue(ErrorReporting.parse({"errors.tolerance": "all"}), None, None, "jdbc", 0)
    task = JdbcSinkTask()
    task.initialize(SinkTaskContext(configs=config, errant_reporter=queue.reporter("JdbcSinkTask")))
    task.start(config)
    task.open([TP])
    values = [{"k": 1, "note": "a"}, {"k": 2, "note": "b"}, {"k": 1, "note": "dup"}, {"k": 3, "note": "c"}]
    task.put([record(i, value=v) for i, v in enumerate(values)])
    assert task.pre_commit(positions(4)) == positions(4)
    assert rows(url, "SELECT k, note FROM orders ORDER BY k") == [(1, "a"), (2, "b"), (3, "c")]
    assert queue.reported == 1
    assert rows(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == [(4,)]
    task.stop()

    strict = start_task(url, name="strict")
    strict.open([TP])
    strict.put([record(0, value={"k": 2, "note": "dup"})])
    with pytest.raises(sa.exc.IntegrityError):
        strict.pre_commit(positions(1))
    strict.stop()


def test_string_and_bytes_key_columns_get_a_length_on_mysql_only() -> None:
    """MySQL/MariaDB cannot index TEXT/BLOB without a length: key columns are VARCHAR/VARBINARY(256)
    there (as Confluent's MySQL dialect), TEXT/BYTEA elsewhere; non-key columns stay TEXT."""
    from sqlalchemy.dialects import mysql, postgresql
    from sqlalchemy.schema import CreateTable

    from eosconnect.connectors.jdbc_sink.dialect import _key_type
    from eosconnect.connectors.jdbc_sink.semantic import column_type

    def sql_type(schema: Schema) -> sa.types.TypeEngine[object]:
        return column_type(schema, "mysql")

    string, raw = SchemaBuilder.string().build(), SchemaBuilder.bytes().build()
    table = sa.Table(
        "t",
        sa.MetaData(),
        sa.Column("name", _key_type(sql_type(string)), primary_key=True),
        sa.Column("raw", _key_type(sql_type(raw)), primary_key=True),
        sa.Column("note", sql_type(string)),
    )
    on_mysql = str(CreateTable(table).compile(dialect=mysql.dialect()))
    assert "name VARCHAR(256) NOT NULL" in on_mysql and "raw VARBINARY(256) NOT NULL" in on_mysql
    assert "note TEXT" in on_mysql
    on_postgres = str(CreateTable(table).compile(dialect=postgresql.dialect()))
    assert "name TEXT NOT NULL" in on_postgres and "raw BYTEA NOT NULL" in on_postgres


def test_a_placeholder_leaves_the_column_as_it_is(url: str) -> None:
    """An unchanged TOASTed value the CDC source did not have arrives as its placeholder: the upsert
    leaves that column out, so the row keeps the value written before."""
    task = start_task(url, **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"})
    task.open([TP])
    task.put([record(1, value=order(1, "the long text"))])
    task.put(
        [
            record(
                1,
                value=order(1, "__debezium_unavailable_value").put("price", decimal.Decimal("9.99")),
                offset=1,
            )
        ]
    )
    task.pre_commit(positions(2))
    assert rows(url, "SELECT id, item, CAST(price AS TEXT) FROM orders") == [(1, "the long text", "9.99")]
    task.stop()


def test_a_routed_record_is_written_to_its_new_table_at_its_consumed_position(url: str) -> None:
    """A transformation (a RegexRouter) renamed the topic: the table follows the new name, the
    position committed is the consumed partition's."""
    task = start_task(url, **{"table.name.format": "${topic}"})
    task.open([TP])
    task.put([record(i).new_record(topic="routed") for i in range(3)])
    committed = task.pre_commit(positions(3))
    assert rows(url, "SELECT id FROM routed ORDER BY id") == [(0,), (1,), (2,)]
    assert committed[TP].offset == 3
    task.stop()


def test_debeziums_semantic_types_are_written_as_what_they_mean(url: str) -> None:
    """Days, micros, a variable-scale decimal and a zoned timestamp as the values they stand for."""
    from eosconnect.connectors.jdbc_sink.semantic import writer

    def debezium(builder: SchemaBuilder, name: str) -> Schema:
        return builder.name(name).optional().build()

    variable = (
        SchemaBuilder.struct()
        .name("io.debezium.data.VariableScaleDecimal")
        .field("scale", SchemaBuilder.int32().build())
        .field("value", SchemaBuilder.bytes().build())
        .optional()
        .build()
    )
    schema = (
        SchemaBuilder.struct()
        .field("id", SchemaBuilder.int64().build())
        .field("day", debezium(SchemaBuilder.int32(), "io.debezium.time.Date"))
        .field("at", debezium(SchemaBuilder.int64(), "io.debezium.time.MicroTimestamp"))
        .field("amount", variable)
        .field("seen", debezium(SchemaBuilder.string(), "io.debezium.time.ZonedTimestamp"))
        .build()
    )
    digits = 31415926535897932384626433832795028841
    amount = Struct(variable).put("scale", 37).put("value", digits.to_bytes(17, "big", signed=True))
    value = (
        Struct(schema)
        .put("id", 1)
        .put("day", (dt.date(1900, 2, 28) - dt.date(1970, 1, 1)).days)
        .put("at", -1)  # a microsecond before the epoch
        .put("amount", amount)
        .put("seen", "2024-06-01T10:00:00.123456Z")
    )
    task = start_task(url, **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"})
    task.open([TP])
    task.put([SinkRecord("orders", 0, 0, None, value, value_schema=schema)])
    task.pre_commit(positions(1))
    task.stop()
    ((day, at),) = rows(url, "SELECT day, at FROM orders")
    assert (str(day), str(at)) == ("1900-02-28", "1969-12-31 23:59:59.999999")
    # SQLite keeps numerics as floats: the exact values are the writers'
    zone = ZoneInfo("UTC")
    as_written = {f.name: writer(f.schema, zone, "postgresql") for f in schema.fields}
    assert as_written["amount"] is not None and as_written["seen"] is None  # PostgreSQL parses the ISO text
    assert str(as_written["amount"](amount)) == "3.1415926535897932384626433832795028841"
    on_sqlite = writer(schema.field("seen").schema, zone, "sqlite")  # type: ignore[union-attr]
    assert on_sqlite is not None and on_sqlite(value.get("seen")) == dt.datetime(2024, 6, 1, 10, 0, 0, 123456)
