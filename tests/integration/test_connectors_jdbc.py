"""JdbcSource end to end on the real broker and Spark, exactly once, on SQLite and PostgreSQL.

PostgreSQL comes from Debian's packages (`apt-get install -y postgresql`); the `postgres` fixture
runs a throwaway server from those binaries in a temp dir on a free loopback port (as the
`postgres` system user when the tests run as root, since initdb and pg_ctl refuse root). Without
the binaries the PostgreSQL cases are skipped, saying so.
"""

from __future__ import annotations

import glob
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
