"""`make demo-mysql`: MariaDB -> MySqlCdcSource -> Kafka -> JdbcSink -> PostgreSQL, exactly once,
through a task SIGKILL.

1. start a local Apache Kafka broker, a MariaDB server writing a binary log of full row images
   (`binlog_format=ROW`, `binlog_row_image=FULL`, `binlog_row_metadata=FULL`) with a database
   `bank`, a PostgreSQL server with a database `bank_copy`, and an eosconnect worker with
   exactly-once source support;
2. create a table of accounts with a few rows and two connectors: the binlog source (Debezium's
   MySQL connector settings, `transaction.boundary=connector`), whose snapshot sends the rows (op r),
   and JdbcSink into `bank_copy` as Debezium users configure a JDBC sink (`transforms=unwrap`,
   `insert.mode=upsert` on the key, `delete.enabled=true`);
3. commit a few transactions (inserts, a transfer updating two rows, a delete, a primary key change),
   SIGKILL the source task's Python worker, commit more while it is down; Spark retries the task,
   which resumes from its offset;
4. read the topic read_committed, print every event grouped by Kafka transaction, and verify: each
   change once, per key in binlog order, one database transaction (GTID) per Kafka transaction, the
   last event per key equal to the table's row (a tombstone for a deleted one);
5. compare the two databases' tables row by row: none missing, extra or different.
Stops what it started (worker, broker, MariaDB, PostgreSQL) by their own process ids. Exits non-zero
on a failed check. The connector is documented in docs/mysql-cdc.md.
"""

from __future__ import annotations

import functools
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.mariadb import LocalMariaDB
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.tools.demo_cdc import (
    JSON_WITH_SCHEMAS,
    _print_and_verify,
    _print_comparison,
    _step,
    console,
    run_bank_changes,
)
from eosconnect.tools.worker_process import WorkerProcess, local_worker_settings


def _changes(conn: Any, statements: list[tuple[str, tuple[Any, ...]]]) -> str:
    """Run `statements` as one transaction; its MariaDB GTID (`domain-server-sequence`)."""
    with conn.cursor() as cur:
        conn.begin()
        for sql, params in statements:
            cur.execute(sql, params)
        conn.commit()
        cur.execute("SELECT @@last_gtid")
        return str(cur.fetchone()[0])


def _rows(conn: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute("SELECT id, owner, balance FROM accounts ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def _binlog_position(source: dict[str, Any]) -> tuple[str, int, int]:
    """A change's place in the binlog: file, rows event, row."""
    return (str(source["file"]), int(source["pos"]), int(source["row"] or 0))


def _gtid(source: dict[str, Any]) -> Any:
    return source["gtid"]


def run_mysql_demo(run_dir: Path | None = None) -> bool:
    """Run the demo of the module's docstring, step by step; True if the copy equals the source.

    One function on purpose, as `make demo-cdc`'s: a script a reader follows top to bottom, and
    everything it starts is stopped in its one `finally`."""
    import pymysql

    started = time.monotonic()
    own_dir, passed = run_dir is None, False
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-mysql-"))
    run_dir.chmod(0o755)  # the databases run as their own users when we are root
    suffix = uuid.uuid4().hex[:6]
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    mariadb = LocalMariaDB(binlog=True)
    target = LocalPostgres(base=run_dir / "postgres")
    worker: WorkerProcess | None = None
    try:
        with console.status("Starting a local Apache Kafka broker, MariaDB and PostgreSQL ..."):
            bootstrap = cluster.start()
            mariadb.start()
            target.start()
            copy_url = target.create_database("bank_copy")
        _step(
            f"Kafka {cluster.version} at {bootstrap}; MariaDB (binlog_format=ROW, full row images and "
            f"metadata) on port {mariadb.port}, database bank; PostgreSQL on port {target.port}, "
            "database bank_copy"
        )
        conn = pymysql.connect(host="127.0.0.1", port=mariadb.port, user=mariadb.USER, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bank")
            cur.execute("USE bank")
            cur.execute(
                "CREATE TABLE accounts (id INT PRIMARY KEY, owner TEXT NOT NULL, balance DECIMAL(10,2))"
            )
            cur.execute("INSERT INTO accounts VALUES (1, 'ada', 100), (2, 'brian', 50), (3, 'chen', 75)")
        worker = WorkerProcess(local_worker_settings(bootstrap, f"demo-mysql-{suffix}"), run_dir / "worker")
        with console.status("Starting the eosconnect worker ..."):
            worker.start(timeout=300)  # Spark's start-up alone can take a minute on a busy machine
        prefix = f"bank{suffix}"
        topic = f"{prefix}.bank.accounts"
        config = {
            "connector.class": "io.debezium.connector.mysql.MySqlConnector",
            "database.hostname": "127.0.0.1",
            "database.port": str(mariadb.port),
            "database.user": mariadb.USER,
            "database.password": "",
            "database.server.id": "5401",
            "topic.prefix": prefix,
            "database.include.list": "bank",
            "table.include.list": "bank\\.accounts",
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
            **JSON_WITH_SCHEMAS,
            "value.converter.decimal.format": "NUMERIC",  # balances as numbers, not base64
        }
        source = ("MySqlCdcSource", "bank-binlog", config)
        verify = functools.partial(
            _print_and_verify,
            position=_binlog_position,
            transaction=_gtid,
            columns=("gtid", "file, pos, row"),
        )
        ok, comparison = run_bank_changes(
            worker, bootstrap, topic, source, copy_url, conn, _changes, _rows, verify
        )
        if comparison is None:
            return False
        ok = passed = ok and comparison.ok
        _print_comparison(
            comparison, "MariaDB bank.accounts -> binlog CDC -> Kafka -> JdbcSink -> PostgreSQL, row by row"
        )
        verdict = (
            "[green]demo passed: every change exactly once, bank_copy equals bank row by row[/]"
            if ok
            else "[red]demo FAILED[/]"
        )
        console.print(
            f"{verdict} in {time.monotonic() - started:.0f}s" + ("" if ok else f"; logs in {run_dir}")
        )
        return ok
    finally:
        if worker is not None:
            worker.stop()
        cluster.stop()
        mariadb.stop()
        target.stop()
        if own_dir and passed:  # kept after a failure: the logs are in it
            shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    sys.exit(0 if run_mysql_demo() else 1)


if __name__ == "__main__":
    main()
