"""JdbcSource end to end on the real broker and Spark, exactly once, on SQLite and PostgreSQL.

PostgreSQL comes from the shared `postgres` fixture (tests/support/postgres.py): a throwaway server
from Debian's binaries; without them the PostgreSQL cases are skipped, saying so.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from eosconnect.converters import JsonConverter
from eosconnect.tools.verify import verify_jdbc_topic
from support.postgres import new_database
from support.runtime_helpers import committed_offsets, offset_history, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

MODES = ["incrementing", "timestamp+incrementing"]


# ------------------------------------------------------------------------------------------ databases


class Database:
    """One test database (SQLite file or PostgreSQL database) with insert-only tables."""

    def __init__(self, url: str, dialect: str) -> None:
        self.url, self.dialect = url, dialect
        self.engine = sa.create_engine(url)

    def create_table(self, name: str) -> None:
        if self.dialect == "sqlite":
            ddl = (
                f"CREATE TABLE {name} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "updated_at DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), item TEXT)"
            )
        else:  # the timestamp is the transaction's start: rows become visible later, at commit
            ddl = (
                f"CREATE TABLE {name} (id BIGSERIAL PRIMARY KEY, "
                "updated_at TIMESTAMP(6) NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'), item TEXT)"
            )
        with self.engine.begin() as conn:
            conn.exec_driver_sql(ddl)

    def insert(self, table: str, count: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {table} (item) VALUES (:item)"), [{"item": "x"}] * count)

    def count(self, table: str) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """`sqlite` or `postgresql`, chosen by indirect parametrization."""
    if request.param == "sqlite":
        db = Database(f"sqlite:///{tmp_path / 'shop.db'}", "sqlite")
    else:
        db = Database(new_database(request.getfixturevalue("postgres")), "postgresql")
    yield db
    db.engine.dispose()


class Inserter:
    """Keeps inserting small transactions into tables from a background thread."""

    def __init__(self, db: Database, tables: list[str], rows_per_txn: int = 3, pause_s: float = 0.02) -> None:
        self.db, self.tables, self.rows, self.pause = db, tables, rows_per_txn, pause_s
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Inserter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for table in self.tables:
                    self.db.insert(table, self.rows)
                self._stop.wait(self.pause)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error


def jdbc_config(
    name: str, db: Database, tables: list[str], mode: str, prefix: str, **extra: str
) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "JdbcSource",
        "tasks.max": extra.pop("tasks_max", "2"),
        "connection.url": db.url,
        "tables": ",".join(tables),
        "mode": mode,
        "incrementing.column.name": "id",
        "timestamp.column.name": "updated_at" if mode != "incrementing" else "",
        "timestamp.delay.interval.ms": "300",
        "topic.prefix": prefix,
        "poll.interval.ms": "100",
        "batch.max.rows": "50",
        "transaction.boundary": "connector",
        "exactly.once.support": "required",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def topic_count(read_committed: Callable[..., list], topic: str) -> int:
    return len(read_committed(topic))


# ------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("mode", MODES)
def test_rows_exactly_once_across_a_restart(
    mode, database, run_job, worker_props, topic_name, create_topic, read_committed, bootstrap
):
    tables = ["orders", "customers", "payments"]
    prefix = topic_name("db") + "-"
    for table in tables:
        database.create_table(table)
        create_topic(prefix + table, partitions=2)
        database.insert(table, 120)
    worker = worker_props("enabled")
    config = jdbc_config("jdbc-eos", database, tables, mode, prefix)

    def all_rows_delivered() -> bool:
        return all(topic_count(read_committed, prefix + t) >= database.count(t) for t in tables)

    with Inserter(database, tables) as inserter:
        job = run_job(config, worker)
        wait_until(lambda: topic_count(read_committed, prefix + "orders") >= 200, 120, "rows to flow", job)
        outcomes = job.stop()  # in the middle: rows keep coming in
        assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes
        database.insert("payments", 40)
        job = run_job(config, worker, generation=1, previous_task_count=2)
        time.sleep(3)
        inserter.stop()
    wait_until(all_rows_delivered, 120, "every row to be delivered", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes

    for table in tables:
        report = verify_jdbc_topic({"bootstrap.servers": bootstrap}, prefix + table, database.url, table)
        assert report.ok, (table, report.anomalies)
        assert report.expected > 200
    transactions = sum(o["metrics"]["transactions-committed"] for o in outcomes)
    assert transactions > 0
    assert all(o["metrics"]["transaction-size-max"] <= 50 for o in outcomes), "one transaction per table poll"


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("mode", MODES)
def test_idle_table_offset_advances_while_another_is_busy(
    mode, database, run_job, worker_props, topic_name, create_topic, read_committed
):
    prefix = topic_name("db") + "-"
    for table in ("busy", "idle"):
        database.create_table(table)
        create_topic(prefix + table)
    database.insert("idle", 5)
    worker = worker_props("enabled")
    config = jdbc_config(
        "jdbc-heartbeat", database, ["busy", "idle"], mode, prefix, tasks_max="1", heartbeat_interval_ms="300"
    )
    offsets_topic = worker["offset.storage.topic"]

    def idle_offsets() -> list[dict]:
        return [
            o
            for p, o in offset_history(read_committed, offsets_topic, "jdbc-heartbeat")
            if p == {"table": "idle"}
        ]

    with Inserter(database, ["busy"], rows_per_txn=2, pause_s=0.05):
        job = run_job(config, worker)
        wait_until(
            lambda: topic_count(read_committed, prefix + "idle") == 5, 60, "the idle table's rows", job
        )
        wait_until(lambda: len([o for o in idle_offsets() if "heartbeat" in o]) >= 3, 60, "heartbeats", job)
        job.stop()

    heartbeats = [o for o in idle_offsets() if "heartbeat" in o]
    stamps = [o["heartbeat"] for o in heartbeats]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0], "the idle table's offset keeps advancing"
    assert topic_count(read_committed, prefix + "idle") == 5, "heartbeats write no records"
    last = heartbeats[-1]
    if mode == "incrementing":
        assert last["incrementing"] == 5, "an id position stays at the last row read"
    else:
        assert last["incrementing"] is None
        assert heartbeats[0]["timestamp"] < last["timestamp"], "the timestamp moves to the read bound"
    latest = committed_offsets(read_committed, offsets_topic, "jdbc-heartbeat")
    assert latest['{"table": "idle"}'] == last
    assert topic_count(read_committed, prefix + "busy") > 0


def test_schemad_rows_read_the_same_in_eosconnect_and_kafkas_json_converter(
    postgres, run_job, worker_props, topic_name, create_topic, read_committed, connect_harness
):
    """Structs with the table's schema, JsonConverter schemas.enable=true, exactly once on PostgreSQL:
    every row reads back as the same Struct, and Kafka's own JsonConverter reads each record and
    writes it back byte for byte (what a Java schema-aware sink sees)."""
    db = Database(new_database(postgres), "postgresql")
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE items (id BIGSERIAL PRIMARY KEY, qty INTEGER NOT NULL, price NUMERIC(10,2), "
            "day DATE, at TIMESTAMP(3), label VARCHAR(20), ok BOOLEAN, raw BYTEA)"
        )
        conn.execute(
            sa.text(
                "INSERT INTO items (qty, price, day, at, label, ok, raw) VALUES "
                "(:qty, :price, :day, :at, :label, :ok, :raw)"
            ),
            [
                {
                    "qty": i,
                    "price": decimal.Decimal(i) / 4,
                    "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
                    "at": dt.datetime(2024, 1, 1, 12, 0, 0, 123000) + dt.timedelta(hours=i),
                    "label": f"é-{i}" if i % 3 else None,
                    "ok": i % 2 == 0,
                    "raw": bytes([i % 256, 0]),
                }
                for i in range(1, 41)
            ],
        )
    prefix = topic_name("db") + "-"
    create_topic(prefix + "items")
    converter_settings = {"schemas.enable": "true"}
    config = jdbc_config(
        "jdbc-schemas",
        db,
        ["items"],
        "incrementing",
        prefix,
        tasks_max="1",
        **{
            "value_converter": "org.apache.kafka.connect.json.JsonConverter",
            "value_converter_schemas_enable": "true",
            "key_converter": "org.apache.kafka.connect.json.JsonConverter",
            "key_converter_schemas_enable": "true",
        },
    )
    job = run_job(config, worker_props("enabled"))
    wait_until(lambda: topic_count(read_committed, prefix + "items") >= 40, 120, "rows to flow", job)
    job.stop()

    records = read_committed(prefix + "items")
    ours = JsonConverter()
    ours.configure(converter_settings, False)
    read = [ours.to_connect_data(prefix + "items", r.value) for r in records]
    assert sorted(v.value.get("id") for v in read) == list(range(1, 41))  # each row once
    schema = read[0].schema
    assert schema.name == "items" and all(v.schema == schema for v in read)
    types = {f.name: (f.schema.type.name, f.schema.name, f.schema.optional) for f in schema.fields}
    assert types["id"] == ("INT64", None, False) and types["qty"] == ("INT32", None, False)
    assert types["price"] == ("BYTES", "org.apache.kafka.connect.data.Decimal", True)
    assert types["day"][1] == "org.apache.kafka.connect.data.Date"
    assert types["at"][1] == "org.apache.kafka.connect.data.Timestamp"
    row = next(v.value for v in read if v.value.get("id") == 5)
    assert row.get("price") == decimal.Decimal("1.25") and row.get("day") == dt.date(2024, 1, 6)
    assert row.get("at") == dt.datetime(2024, 1, 1, 17, 0, 0, 123000, tzinfo=dt.UTC)
    assert row.get("label") == "é-5" and row.get("ok") is False and row.get("raw") == b"\x05\x00"
    key = ours.to_connect_data(prefix + "items", records[0].key)
    assert key.schema is not None and key.schema.type.name == "INT64"

    for record in records[:5]:  # Kafka's JsonConverter reads and rewrites them unchanged
        text = record.value.decode()
        answer = connect_harness.run(
            {"converter": converter_settings, "topic": prefix + "items", "value": json.loads(text)}
        )
        assert "error" not in answer, answer
        assert answer["value"] == json.loads(text)
    db.engine.dispose()


def test_postgres_columns_added_dropped_and_retyped_while_running(postgres: Any) -> None:
    """The task alone (no Kafka): each poll after an ALTER TABLE carries the table's new columns,
    the row of the poll that notices the change included; an int -> text retype reads as text."""
    from eosconnect.api import InMemoryOffsetStorageReader, SourceTaskContext
    from eosconnect.connectors.jdbc import JdbcSourceTask

    db = Database(new_database(postgres), "postgresql")
    run = db.engine.begin
    with run() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE products (id BIGSERIAL PRIMARY KEY, qty INT NOT NULL, weight NUMERIC(6,2))"
        )
        conn.exec_driver_sql("INSERT INTO products (qty, weight) VALUES (5, 2.50)")
    task = JdbcSourceTask()
    task.initialize(SourceTaskContext(offset_storage_reader=InMemoryOffsetStorageReader([])))
    task.start(
        {
            "connection.url": db.url,
            "tables": "products",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": "shop-",
            "poll.interval.ms": "1",
        }
    )

    def polled() -> list[dict[str, Any]]:
        records = task.poll() or []
        return [
            {f.name: (f.schema.type.name, r.value.get(f.name)) for f in r.value_schema.fields}
            for r in records
        ]

    try:
        assert polled() == [
            {"id": ("INT64", 1), "qty": ("INT32", 5), "weight": ("BYTES", decimal.Decimal("2.50"))}
        ]
        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products ADD COLUMN color TEXT")
            conn.exec_driver_sql("INSERT INTO products (qty, weight, color) VALUES (6, 3.25, 'red')")
        assert polled() == [
            {
                "id": ("INT64", 2),
                "qty": ("INT32", 6),
                "weight": ("BYTES", decimal.Decimal("3.25")),
                "color": ("STRING", "red"),
            }
        ]
        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products DROP COLUMN weight")
            conn.exec_driver_sql("INSERT INTO products (qty, color) VALUES (7, 'blue')")
        assert polled() == [{"id": ("INT64", 3), "qty": ("INT32", 7), "color": ("STRING", "blue")}]
        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products ALTER COLUMN qty TYPE TEXT")
            conn.exec_driver_sql("INSERT INTO products (qty, color) VALUES ('a dozen', NULL), ('8', 'green')")
        assert polled() == [
            {"id": ("INT64", 4), "qty": ("STRING", "a dozen"), "color": ("STRING", None)},
            {"id": ("INT64", 5), "qty": ("STRING", "8"), "color": ("STRING", "green")},
        ]
    finally:
        task.stop()
        db.engine.dispose()
