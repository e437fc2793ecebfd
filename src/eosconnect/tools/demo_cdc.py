"""`make demo-cdc`: PostgreSQL -> PostgresCdcSource -> Kafka -> JdbcSink -> a second PostgreSQL database,
exactly once, through a task SIGKILL.

1. start a local Apache Kafka broker, a PostgreSQL server (wal_level=logical) with two databases
   (`bank` and `bank_copy`) and an eosconnect worker with exactly-once source support;
2. create a table of accounts with a few rows and two connectors: the CDC source (Debezium's
   settings, `transaction.boundary=connector`), whose snapshot sends the rows (op r), and JdbcSink
   into `bank_copy` as Debezium users configure a JDBC sink: `transforms=unwrap`
   (`io.debezium.transforms.ExtractNewRecordState`: the envelope becomes its row, a delete a null
   value), `insert.mode=upsert` on the key, `delete.enabled=true`;
3. commit a few transactions (inserts, a transfer updating two rows, a delete, a primary key change),
   SIGKILL the source task's Python worker, commit more while it is down; Spark retries the task,
   which resumes from its offset;
4. read the topic read_committed, print every event readably grouped by Kafka transaction, and
   verify: each change once, per key in commit order, one database transaction per Kafka
   transaction, the last event per key equal to the table's row (a tombstone for a deleted one);
5. compare the two databases' tables row by row: none missing, extra or different.
Stops what it started (worker, broker, PostgreSQL) by their own process ids. Exits non-zero on a
failed check. The connector is documented in docs/cdc.md.
"""

from __future__ import annotations

import decimal
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.storage.topics import ensure_topic
from eosconnect.tools.demo_db import TableComparison, compare_tables
from eosconnect.tools.worker_process import WorkerProcess, local_worker_settings

console = Console(width=None if sys.stdout.isatty() else 120)


def _step(text: str) -> None:
    console.print(f"[bold cyan]>[/] {text}")


def _changes(conn: Any, statements: list[tuple[str, tuple[Any, ...]]]) -> int:
    """Run `statements` as one transaction; its txid."""
    with conn.transaction():
        for sql, params in statements:
            conn.execute(sql, params)
        return int(conn.execute("SELECT txid_current()").fetchone()[0])


JSON_WITH_SCHEMAS = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


def _payload(raw: bytes) -> Any:
    """A JsonConverter (schemas.enable=true) record's payload; numbers with a fraction as Decimal."""
    return json.loads(raw, parse_float=decimal.Decimal)["payload"]


def _rows(conn: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute("SELECT id, owner, balance FROM accounts ORDER BY id")]


def _copied_rows(dsn: str, expected: list[tuple[Any, ...]], timeout: float) -> list[tuple[Any, ...]]:
    """bank_copy.accounts once it equals `expected`, or as it is after `timeout` seconds."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as copy:
        while True:
            try:
                rows = _rows(copy)
            except psycopg.errors.UndefinedTable:  # JdbcSink has not created it yet
                rows = []
            if rows == expected or time.monotonic() > deadline:
                return rows
            time.sleep(0.5)


def _dsn(url: str) -> str:
    """A libpq connection string from the SQLAlchemy URL LocalPostgres gives."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    return f"host={parsed.host} port={parsed.port} user={parsed.username} dbname={parsed.database}"


def _print_comparison(
    comparison: TableComparison,
    title: str = "bank.accounts -> CDC -> Kafka -> JdbcSink -> bank_copy.accounts, row by row",
) -> None:
    table = Table(title=title)
    table.add_column("rows in bank")
    table.add_column("rows in bank_copy")
    for column in ("missing", "extra", "different", "duplicated"):
        table.add_column(column)
    table.add_row(
        str(comparison.source_rows),
        str(comparison.target_rows),
        *(
            str(len(ids))
            for ids in (comparison.missing, comparison.extra, comparison.different, comparison.duplicated)
        ),
    )
    console.print(table)


def _describe(value: dict[str, Any] | None) -> str:
    if value is None:
        return "-"
    return " ".join(f"{k}={v}" for k, v in value.items() if k != "id")


def run_cdc_demo(run_dir: Path | None = None) -> bool:
    """Run the demo of the module's docstring, step by step; True if the copy equals the source.

    One function on purpose: the demo is a script a reader follows top to bottom, each step
    narrated as it runs, and everything it starts is stopped in its one `finally`."""
    import psycopg

    started = time.monotonic()
    own_dir, passed = run_dir is None, False
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-cdc-"))
    run_dir.chmod(0o755)  # PostgreSQL runs as the `postgres` user when we are root
    suffix = uuid.uuid4().hex[:6]
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    database = LocalPostgres(base=run_dir / "postgres")
    worker: WorkerProcess | None = None
    try:
        with console.status("Starting a local Apache Kafka broker and PostgreSQL ..."):
            bootstrap = cluster.start()
            database.start()
            database.create_database("bank")
            copy_url = database.create_database("bank_copy")
        _step(
            f"Kafka {cluster.version} at {bootstrap}; PostgreSQL (wal_level=logical) on port "
            f"{database.port}, databases bank and bank_copy"
        )
        conn = psycopg.connect(
            host="127.0.0.1", port=database.port, user="postgres", dbname="bank", autocommit=True
        )
        conn.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner TEXT NOT NULL, balance NUMERIC(10,2))")
        conn.execute("INSERT INTO accounts VALUES (1, 'ada', 100), (2, 'brian', 50), (3, 'chen', 75)")
        worker = WorkerProcess(
            local_worker_settings(bootstrap, f"demo-cdc-{suffix}"),
            run_dir / "worker",
        )
        with console.status("Starting the eosconnect worker ..."):
            worker.start(timeout=300)  # Spark's start-up alone can take a minute on a busy machine
        prefix = f"bank{suffix}"
        topic = f"{prefix}.public.accounts"
        config = {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": "127.0.0.1",
            "database.port": str(database.port),
            "database.user": "postgres",
            "database.dbname": "bank",
            "topic.prefix": prefix,
            "slot.name": f"demo_{suffix}",
            "publication.autocreate.mode": "filtered",
            "table.include.list": "public\\.accounts",
            "poll.interval.ms": "200",
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
            **JSON_WITH_SCHEMAS,
            "value.converter.decimal.format": "NUMERIC",  # balances as numbers, not base64
        }
        source = ("PostgresCdcSource", "bank-cdc", config)
        ok, comparison = run_bank_changes(
            worker, bootstrap, topic, source, copy_url, conn, _changes, _rows, _print_and_verify
        )
        if comparison is None:
            return False
        ok = passed = ok and comparison.ok
        _print_comparison(comparison)
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
        database.stop()
        if own_dir and passed:  # kept after a failure: the logs are in it
            shutil.rmtree(run_dir, ignore_errors=True)


def run_bank_changes(
    worker: WorkerProcess,
    bootstrap: str,
    topic: str,
    source: tuple[str, str, dict[str, str]],
    copy_url: str,
    conn: Any,
    changes: Callable[[Any, list[tuple[str, tuple[Any, ...]]]], Any],
    rows_of: Callable[[Any], list[tuple[Any, ...]]],
    verify: Callable[[list[Any], dict[Any, Any], list[Any], int], bool],
) -> tuple[bool, TableComparison | None]:
    """The bank scenario both CDC demos run, whatever the database: create the CDC source
    (`source` = class label, connector name, config) and a JdbcSink copying its topic, make the
    changes with the task SIGKILLed half way, then check the topic (`verify`) and the copy. Closes
    `conn`. (False, None) when a connector could not be created."""
    source_class, source_name, source_config = source
    sink = {  # a JDBC sink of Debezium events, as Debezium's users configure one
        "connector.class": "JdbcSink",
        "topics": topic,
        "connection.url": copy_url,
        "table.name.format": "accounts",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "delete.enabled": "true",
        "auto.create": "true",
        # a killed task's consumer leaves the group only when its session times out: keep it short
        "consumer.override.session.timeout.ms": "6000",
        **JSON_WITH_SCHEMAS,
    }
    ensure_topic(AdminClient({"bootstrap.servers": bootstrap}), topic, partitions=1, replication_factor=1)
    for name, settings in ((source_name, source_config), ("bank-copy", sink)):
        response = worker.create_connector(name, settings)
        if response.status_code != 201:
            console.print(f"[red]creating {name} failed: {response.text}[/red]")
            return False, None
    _step(
        f"{source_class} '{source_name}' (topic {topic}, 3 rows to snapshot) and JdbcSink 'bank-copy' "
        "(unwrap, upsert on the key, delete.enabled -> bank_copy.accounts) created"
    )
    consumer: dict[str, object] = {"bootstrap.servers": bootstrap}

    def events() -> list[Any]:
        return read_to_end(consumer, topic, timeout=30)

    worker.wait_for(lambda: len(events()) >= 3, 120, "the snapshot")
    insert = "INSERT INTO accounts VALUES (%s, %s, %s)"
    transfer = "UPDATE accounts SET balance = balance + %s WHERE id = %s"
    ids = [
        changes(conn, [(insert, (4, "dana", 20))]),
        changes(conn, [(transfer, (-30, 1)), (transfer, (30, 2))]),  # a transfer: one transaction
        changes(conn, [("DELETE FROM accounts WHERE id = %s", (3,))]),
    ]
    worker.wait_for(lambda: len(events()) >= 8, 60, "the first changes")
    pid = worker.request("GET", "/internal/tasks").json().get(f"{source_name}-0", {}).get("pid")
    if pid:
        os.kill(int(pid), signal.SIGKILL)
        _step(f"SIGKILLed the task's Python worker (pid {pid}); committing more while it is down")
    ids += [
        changes(conn, [(insert, (5, "emil", 5)), (transfer, (-5, 4)), (transfer, (5, 5))]),
        changes(conn, [("UPDATE accounts SET owner = 'ada l.' WHERE id = %s", (1,))]),
        changes(conn, [("UPDATE accounts SET id = %s WHERE id = %s", (20, 2))]),  # a key change
    ]
    expected_changes = 1 + 2 + 1 + 3 + 1 + 2  # the key change: a delete and a create
    worker.wait_for(
        lambda: sum(1 for r in events() if r.value and _payload(r.value)["op"] != "r") >= expected_changes,
        120,
        "every change after the restart",
    )
    records = events()
    source_rows = rows_of(conn)
    rows = {r[0]: (r[1], str(r[2])) for r in source_rows}
    conn.close()
    ok = verify(records, rows, ids, expected_changes)
    with console.status("Waiting for JdbcSink to bring bank_copy.accounts up to date ..."):
        copied = _copied_rows(_dsn(copy_url), source_rows, timeout=120)
    comparison = compare_tables(source_rows, copied)
    return ok, comparison


def _lsn(source: dict[str, Any]) -> Any:
    return source["lsn"]


def _txid(source: dict[str, Any]) -> Any:
    return source["txId"]


def _print_and_verify(
    records: list[Any],
    rows: dict[int, tuple[str, str]],
    txids: list[Any],
    changes: int,
    position: Callable[[dict[str, Any]], Any] = _lsn,
    transaction: Callable[[dict[str, Any]], Any] = _txid,
    columns: tuple[str, str] = ("txId", "lsn"),
) -> bool:
    """Print the events grouped by Kafka transaction and check them; `position` orders a source
    block's events in commit order, `transaction` names its database transaction (`columns` are
    their headings)."""
    table = Table(title="read_committed, one group per Kafka transaction")
    for column in ("kafka txn", "offset", "op", "key", "before", "after", *columns):
        table.add_column(column)
    group, previous = 0, None
    per_key: dict[int, list[Any]] = defaultdict(list)
    seen: set[str] = set()
    problems: list[str] = []
    kafka_txns: dict[int, set[Any]] = defaultdict(set)
    for record in records:
        if previous is None or record.offset != previous + 1:
            group += 1  # a gap in the offsets is a transaction marker
        previous = record.offset
        key = _payload(record.key)["id"]
        value = _payload(record.value) if record.value else None
        per_key[key].append(value)
        if value is None:
            table.add_row(str(group), str(record.offset), "tombstone", str(key), "", "", "", "")
            continue
        identity = json.dumps(
            [position(value["source"]), value["op"], value["before"], value["after"]], default=str
        )
        if identity in seen:
            problems.append(f"duplicate event {identity}")
        seen.add(identity)
        kafka_txns[group].add(transaction(value["source"]) if value["op"] != "r" else "snapshot")
        table.add_row(
            str(group), str(record.offset), value["op"], str(key), _describe(value["before"]),
            _describe(value["after"]), str(transaction(value["source"])), str(position(value["source"])),
        )  # fmt: skip
    console.print(table)
    streamed = [v for r in records if r.value and (v := _payload(r.value))["op"] != "r"]
    if len(streamed) != changes:
        problems.append(f"{len(streamed)} change events, expected {changes}")
    if sorted({transaction(v["source"]) for v in streamed}) != sorted(txids):
        problems.append("the database transactions and the events' txIds differ")
    if any(len(ids) != 1 for ids in kafka_txns.values()):
        problems.append(f"a Kafka transaction holds several database transactions: {dict(kafka_txns)}")
    for key, history in per_key.items():
        lsns = [position(v["source"]) for v in history if v is not None and v["op"] != "r"]
        if lsns != sorted(lsns):
            problems.append(f"key {key}: events out of commit order")
        last = history[-1]
        if key in rows:
            after = last["after"] if last else None
            owner, balance = rows[key]
            if after is None or (after["owner"], decimal.Decimal(str(after["balance"]))) != (
                owner,
                decimal.Decimal(balance),
            ):
                problems.append(f"key {key}: last event {after} != row {rows[key]}")
        elif last is not None:
            problems.append(f"key {key} was deleted but its last record is not a tombstone")
    for problem in problems:
        console.print(f"[red]{problem}[/red]")
    console.print(
        f"{len(streamed)} changes of {len(txids)} database transactions in {len(kafka_txns) - 1} Kafka "
        f"transactions after the snapshot; last event per key = table row: {not problems}"
    )
    return not problems


def main() -> None:
    sys.exit(0 if run_cdc_demo() else 1)


if __name__ == "__main__":
    main()
