"""`make demo-db`: database -> Kafka -> database, exactly once, through a crash of the sink task.

1. start a local Apache Kafka broker and a PostgreSQL server (Debian's binaries, `make postgres`),
   and a generator inserting orders into an SQLite table;
2. start a worker with two connectors: JdbcSource (exactly once) reads the SQLite table into a
   topic, JdbcSink writes that topic into a PostgreSQL table with `insert.mode=insert` and no
   primary key: an append-only table, where an at-least-once sink leaves a duplicate for every
   record it writes again after a crash;
3. SIGKILL the sink task's Python worker mid-stream (Spark runs the task again; it resumes from the
   positions its last database transaction stored in the offsets table);
4. stop the generator, wait for the tail, and compare the two tables row by row: every order must
   be in PostgreSQL exactly once, with the same values.

Everything it starts (broker, PostgreSQL, worker) is stopped by its own pid at the end.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.postgres import LocalPostgres, PostgresSetupError
from eosconnect.tools.demo import RowGenerator
from eosconnect.tools.worker_process import WorkerProcess, local_worker_settings

__all__ = ["TableComparison", "compare_tables", "run_db_demo"]

console = Console()
JSON = "org.apache.kafka.connect.json.JsonConverter"


@dataclass
class TableComparison:
    """The target table against the source table, by the `id` column."""

    source_rows: int = 0
    target_rows: int = 0
    duplicated: list[int] = field(default_factory=list)  # ids in the target more than once
    missing: list[int] = field(default_factory=list)  # ids of the source not in the target
    extra: list[int] = field(default_factory=list)  # ids in the target the source does not have
    different: list[int] = field(default_factory=list)  # ids whose values differ

    @property
    def ok(self) -> bool:
        return not (self.duplicated or self.missing or self.extra or self.different)


def compare_tables(source: list[tuple[Any, ...]], target: list[tuple[Any, ...]]) -> TableComparison:
    """Rows are (id, *values): each source row must be in the target once, with equal values."""
    counts = Counter(row[0] for row in target)
    by_id = {row[0]: tuple(row[1:]) for row in target}
    result = TableComparison(source_rows=len(source), target_rows=len(target))
    source_ids = {row[0] for row in source}
    result.duplicated = sorted(i for i, n in counts.items() if n > 1)
    result.extra = sorted(set(counts) - source_ids)
    for row in source:
        if row[0] not in by_id:
            result.missing.append(row[0])
        elif by_id[row[0]] != tuple(row[1:]):
            result.different.append(row[0])
    return result


def _step(text: str) -> None:
    console.print(f"[bold cyan]>>[/] {text}")


def _target_rows(url: str, table: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(f'SELECT id, item, amount FROM "{table}"').all()
            return [tuple(r) for r in rows]
    except sa.exc.ProgrammingError:  # not created yet
        return []
    finally:
        engine.dispose()


def _source_rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return [tuple(r) for r in db.execute("SELECT id, item, amount FROM orders")]


def _summary(comparison: TableComparison, killed_at: int, elapsed: float) -> Table:
    def ids(values: list[int]) -> str:
        return f"{len(values)}" + (f"  (e.g. {values[:5]})" if values else "")

    table = Table(title="SQLite orders -> Kafka -> PostgreSQL orders, row by row", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("rows in the source table", str(comparison.source_rows))
    table.add_row("rows in the target table", str(comparison.target_rows))
    table.add_row("rows in the target when the sink task was killed", str(killed_at))
    table.add_row("duplicated rows", ids(comparison.duplicated))
    table.add_row("missing rows", ids(comparison.missing))
    table.add_row("rows not in the source", ids(comparison.extra))
    table.add_row("rows with different values", ids(comparison.different))
    table.add_row("elapsed", f"{elapsed:.0f} s")
    return table


def run_db_demo(run_dir: Path | None = None, seconds: float = 6.0) -> bool:
    """Run the demo of the module's docstring, step by step; True if every order is in PostgreSQL once.

    One function on purpose: the demo is a script a reader follows top to bottom, each step
    narrated as it runs, and everything it starts is stopped in its one `finally`."""
    started = time.monotonic()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="eosconnect-demo-db-"))
    suffix = uuid.uuid4().hex[:6]
    try:
        postgres = LocalPostgres()
    except PostgresSetupError as exc:
        console.print(f"[red]{exc}[/red]")
        return False
    cluster = LocalKafkaCluster(run_dir / "kafka", brokers=1, tie_to_parent=True)
    generator: RowGenerator | None = None
    worker: WorkerProcess | None = None
    try:
        with console.status("Starting a local Apache Kafka broker and a PostgreSQL server ..."):
            bootstrap = cluster.start()
            postgres.start()
            target = postgres.new_database()
        _step(f"Apache Kafka {cluster.version} at {bootstrap}; PostgreSQL (pid {postgres.pid()}) at {target}")
        database = run_dir / "shop.db"
        generator = RowGenerator(database, rate_per_s=100).start()
        worker = WorkerProcess(
            local_worker_settings(bootstrap, f"demo-db-{suffix}", offset_flush_interval_ms="1000"),
            run_dir / "worker",
        )
        with console.status("Starting the eosconnect worker (Spark driver, herder, REST API) ..."):
            worker.start()
        _step(
            f"worker (pid {worker.proc.pid if worker.proc else '?'}) at {worker.url}; log: {worker.log_path}"
        )
        topic = f"shop-{suffix}-orders"
        source = {
            "connector.class": "JdbcSource",
            "tasks.max": "1",
            "connection.url": f"sqlite:///{database}",
            "tables": "orders",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": f"shop-{suffix}-",
            "poll.interval.ms": "200",
            "exactly.once.support": "required",
            "value.converter": JSON,
            "value.converter.schemas.enable": "true",
        }
        sink = {
            "connector.class": "JdbcSink",
            "tasks.max": "1",
            "topics": topic,
            "connection.url": target,
            "table.name.format": "orders",
            "insert.mode": "insert",
            "pk.mode": "none",
            "auto.create": "true",
            "batch.size": "100",
            # The killed task's consumer leaves the group only when its session times out: keep it short.
            "consumer.override.session.timeout.ms": "6000",
            "value.converter": JSON,
            "value.converter.schemas.enable": "true",
        }
        for name, config in (("shop-source", source), ("orders-sink", sink)):
            response = worker.create_connector(name, config)
            if response.status_code != 201:
                console.print(f"[red]creating {name} failed: {response.text}[/red]")
                return False
            worker.wait_for(lambda n=name: worker.task_states(n) == ["RUNNING"], 120, f"{name} RUNNING")
        _step(
            f"JdbcSource 'shop-source' (SQLite orders -> topic {topic}) and JdbcSink 'orders-sink' (-> "
            "PostgreSQL table orders, insert.mode=insert, no primary key) are RUNNING"
        )
        worker.wait_for(lambda: len(_target_rows(target, "orders")) >= 200, 120, "200 rows in PostgreSQL")
        time.sleep(seconds / 2)

        victim = worker.request("GET", "/internal/tasks").json().get("orders-sink-0", {}).get("pid")
        killed_at = len(_target_rows(target, "orders"))
        if victim:
            os.kill(int(victim), signal.SIGKILL)
            _step(
                f"SIGKILLed the Python worker of the sink task (pid {victim}) with {killed_at} rows in "
                "PostgreSQL; Spark runs the task again, it resumes from the database's offsets table"
            )
            worker.wait_for(
                lambda: (
                    worker.request("GET", "/internal/tasks").json().get("orders-sink-0", {}).get("pid")
                    not in (None, victim)
                ),
                120,
                "the sink task to run again",
            )
        else:
            console.print("[yellow]the sink task reported no Python worker pid: nothing killed[/yellow]")
        time.sleep(seconds)

        generator.stop()
        source_rows = _source_rows(database)
        _step(f"stopped the generator after {len(source_rows)} orders; waiting for the sink to catch up")
        deadline = time.monotonic() + 120
        comparison = compare_tables(source_rows, _target_rows(target, "orders"))
        while comparison.missing and time.monotonic() < deadline:
            time.sleep(1)
            comparison = compare_tables(source_rows, _target_rows(target, "orders"))
        time.sleep(2)  # anything written twice would land now
        comparison = compare_tables(source_rows, _target_rows(target, "orders"))
        console.print(_summary(comparison, killed_at, time.monotonic() - started))
        states = {n: worker.task_states(n) for n in ("shop-source", "orders-sink")}
        console.print(f"task states: {states}")
        if comparison.ok:
            console.print("[green]demo passed: every order is in PostgreSQL exactly once, values equal[/]")
        else:
            console.print(f"[red]demo FAILED[/] (logs in {run_dir})")
        return comparison.ok
    finally:
        if generator is not None:
            generator.stop()
        if worker is not None:
            worker.stop()
        postgres.stop()
        cluster.stop()
