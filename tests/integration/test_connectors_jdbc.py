"""JdbcSource end to end on the real broker and Spark, exactly once, on SQLite and PostgreSQL.

PostgreSQL comes from Debian's packages (`apt-get install -y postgresql`); the `postgres` fixture
runs a throwaway server from those binaries in a temp dir on a free loopback port (as the
`postgres` system user when the tests run as root, since initdb and pg_ctl refuse root). Without
the binaries the PostgreSQL cases are skipped, saying so.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from eosconnect.api import JsonConverter
from eosconnect.tools.verify import verify_jdbc_topic
from support.runtime_helpers import committed_offsets, offset_history, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

MODES = ["incrementing", "timestamp+incrementing"]


# ------------------------------------------------------------------------------------------ PostgreSQL


def _postgres_bindir() -> Path | None:
    candidates = [os.environ.get("EOSCONNECT_PG_BINDIR", "")]
    if found := shutil.which("pg_ctl"):
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A PostgreSQL server for this module; yields its SQLAlchemy URL without a database name."""
    bindir = _postgres_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
            "`apt-get install -y postgresql` (or set EOSCONNECT_PG_BINDIR)"
        )
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="eosconnect-pg-"))
    if os.geteuid() == 0:
        try:
            shutil.chown(base, "postgres", "postgres")
        except LookupError:
            shutil.rmtree(base)
            pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", _free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


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
        server = request.getfixturevalue("postgres")
        name = f"t_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        admin.dispose()
        db = Database(f"{server}/{name}", "postgresql")
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
    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(f"{postgres}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    db = Database(f"{postgres}/{name}", "postgresql")
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
